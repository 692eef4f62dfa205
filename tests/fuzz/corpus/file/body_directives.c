KC_DEVICE float f(float x) {
#if 1
  return x;
#endif
}
