/* SPDX-License-Identifier: MIT */
/* maps.c -- taking every memory mapping the process has left (kc_test.h,
 * kct_maps): the full table that test_transient (a failure for want of
 * mappings is not remembered) and test_host_scale (linked objects do not
 * take a mapping each) run kcache against. */
#include "kc_test.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KCT_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define KCT_SANITIZED 1
#endif
#endif

long kct_maps_limit(void) {
#ifdef KCT_SANITIZED
  print_message("skipped under sanitizers\n");
  skip();
#endif
  long limit = 65530;
  FILE *in = fopen("/proc/sys/vm/max_map_count", "r");
  if (in) {
    if (fscanf(in, "%ld", &limit) != 1) limit = 65530;
    fclose(in);
  }
  if (limit > 300000) {
    print_message("vm.max_map_count is %ld: too many mappings to fill quickly\n", limit);
    skip();
  }
  return limit;
}

void kct_maps_fill(kct_maps *m) {
  long limit = kct_maps_limit();
  memset(m, 0, sizeof *m);
  m->page = (size_t)sysconf(_SC_PAGESIZE);
  m->len = (size_t)limit * 2 * m->page;
  m->base = mmap(NULL, m->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  assert_true(m->base != MAP_FAILED);
  while (m->taken < (size_t)limit &&
         mprotect(m->base + (2 * m->taken + 1) * m->page, m->page, PROT_READ) == 0)
    m->taken++;
  assert_true(m->taken < (size_t)limit); /* the kernel said no before the reservation ran out */
  assert_int_equal(errno, ENOMEM);
}

void kct_maps_fill_singles(kct_maps *m) {
  while (m->nsingles < 64) {
    void *p = mmap(NULL, m->page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) break;
    m->singles[m->nsingles++] = p;
  }
}

void kct_maps_give_back(kct_maps *m, size_t n) {
  assert_true(m->taken > n);
  for (size_t i = m->taken - n; i < m->taken; i++)
    assert_int_equal(mprotect(m->base + (2 * i + 1) * m->page, m->page, PROT_NONE), 0);
  m->taken -= n;
}

void kct_maps_free(kct_maps *m) {
  for (int i = 0; i < m->nsingles; i++) munmap(m->singles[i], m->page);
  assert_int_equal(munmap(m->base, m->len), 0);
}
