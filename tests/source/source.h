/* SPDX-License-Identifier: MIT */
/*
 * source.h -- what the two files of the source suite share: a launch that
 * returns y[0] of a one-buffer kernel, and the compile counter.
 */
#ifndef KC_TEST_SOURCE_H
#define KC_TEST_SOURCE_H

#include "kc_test.h"

/* y[0] after launching kernel `name` (no specialization) on f's buffer. */
float src_run(kct_fixture *f, const char *name);
/* Compiles so far (kc_stats.compiles). */
uint64_t src_compiles(kc_runtime *rt);

/* The file tests (test_source_file.c), listed by main in test_source.c. */
void test_file_defines_everything_in_one_world(void **state);
void test_file_reload_recompiles_what_reaches_the_edit(void **state);
void test_file_removed_names_are_undefined(void **state);
void test_file_reports_each_change(void **state);
void test_file_reloads_are_collected(void **state);
void test_file_refuses_what_it_cannot_split(void **state);
void test_big_file_edit_recompiles_one_kernel(void **state);
void test_file_loads_from_threads(void **state);

/* The never-stale tests (test_stale.c). */
void test_names_defined_after_their_users(void **state);
void test_preprocessor_tests_follow_definitions(void **state);
void test_failures_live_in_worlds(void **state);
void test_deep_chains_and_wide_fan_ins(void **state);
void test_enumerator_of_an_old_world(void **state);
/* Headers on disk (test_disk_headers.c). */
void test_disk_headers_in_memory(void **state);
void test_disk_headers_across_runtimes(void **state);
void test_disk_headers_created_later(void **state);
void test_disk_headers_in_system_dirs(void **state);
void test_disk_headers_gone_after_the_compile(void **state);
void test_disk_headers_changed_during_a_compile(void **state);
void test_disk_headers_read_before_a_refresh(void **state);
void test_disk_headers_two_change_at_once(void **state);
void test_disk_headers_new_set_starts_at_the_change(void **state);
void test_disk_headers_tcc_unidentified(void **state);
void test_disk_headers_tcc_header_appearing(void **state);
void test_disk_headers_helper_reads_ids(void **state);
void test_disk_headers_tcc_empty_environment(void **state);
void test_disk_headers_link_switched_during_a_compile(void **state);
void test_disk_headers_link_switched_during_a_recompile(void **state);

#endif
