KC_KERNEL void k(KC_GLOBAL float *out, float x) {
  size_t i = kc_global_id(0);
  out[i] = h(x) + (float)i;
}