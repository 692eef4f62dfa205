KC_KERNEL void ka(KC_GLOBAL float *y, float base, int n) {
  size_t i = kc_global_id(0);
  if ((int)i < n) y[i] = base + (float)i;
}
