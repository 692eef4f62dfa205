KC_KERNEL void ks(KC_GLOBAL float *y) {
  T v = (T)V;
  y[kc_global_id(0)] = (float)v;
}
