KC_KERNEL void kb(KC_GLOBAL float *y) {
  y[kc_global_id(0)] = (float)sqrt(4.0);
}
