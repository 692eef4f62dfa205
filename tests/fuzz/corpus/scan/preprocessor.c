#define TWICE(x) (2 * (x))
#if defined(FOO) \
  && BAR(1)
int hidden(void);
#endif
  # pragma unroll
KC_DEVICE float f(float x) { return TWICE(x) + g(x); }
