#define LONG(x) \
  ((x) + \
   1)
KC_DEVICE int f(int a) { return LONG(a); }
