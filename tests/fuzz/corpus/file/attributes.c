KC_KERNEL void k(KC_GLOBAL float *y) __attribute__((reqd_work_group_size(1, 1, 1))) { }
