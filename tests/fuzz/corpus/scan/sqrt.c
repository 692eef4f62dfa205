KC_DEVICE double sqrt(double x) {
  (void)x;
  return 42.0;
}