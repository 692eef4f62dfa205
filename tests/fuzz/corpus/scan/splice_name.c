KC_KERNEL void ks(KC_GLOBAL float *y) { y[0] = hel\
per(1.0f); }