#define TWICE(x) \
  (dbl(x) * SCALE)