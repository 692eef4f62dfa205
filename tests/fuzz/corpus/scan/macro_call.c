KC_KERNEL void k(KC_GLOBAL float *y) {
#define CALL(x) helper(x)
  y[0] = CALL(1);
}
