KC_KERNEL void saxpy(KC_GLOBAL float *y, KC_GLOBAL const float *x, float a, unsigned n) {
  size_t i = kc_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}
