KC_KERNEL void k(KC_GLOBAL float *y) {
  size_t i = kc_global_id(0);
  y[i] = h((float)i);
}
