/* SPDX-License-Identifier: MIT */
/*
 * abi.h -- the size checks of the public structs that can grow (kcache.h,
 * "Struct sizes"): kc_options, kc_stats, kc_launch_config, kc_param_info.
 * Included by core.h.
 */
#ifndef KC_CORE_ABI_H
#define KC_CORE_ABI_H

/* The end of a field: where a struct's oldest layout ends (kc_launch_config's: its stream). */
#define KC__END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define KC__LAUNCH_CONFIG_MIN_SIZE KC__END_OF(kc_launch_config, stream)

/* What a size of 0 means: a struct never initialized, or a size passed
 * by hand where the macro passes sizeof. */
#define KC__INIT_HINT(init, type) \
  "initialize it with " #init " (its size field is the caller's sizeof(" #type "))"
#define KC__SIZE_HINT(call, type) "call " #call ", which passes sizeof(" #type ") as the size"
/* The size check of a struct that can grow (kcache.h, "Struct sizes"):
 * size 0 (init says what to do: KC__INIT_HINT, KC__SIZE_HINT), smaller
 * than min (the oldest layout this library reads), or larger than known
 * (this library's sizeof) with a byte past known set (a newer caller's
 * field this library would ignore) are KC_EINVAL, naming the struct as
 * what. p NULL: the bytes past known are not read (written only). */
kc_status kc__abi_check(const kc_runtime *rt, const char *what, const char *init, const void *p, size_t size,
                        size_t min, size_t known);

#endif
