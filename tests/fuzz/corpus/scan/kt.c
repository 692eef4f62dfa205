KC_KERNEL void kt(KC_GLOBAL float *y) {
  size_t i = kc_global_id(0);
  y[i] = g((float)i);
}