KC_DEVICE float f(float x) { return "x;
#define A b(
k(int a) }