KC_DEVICE float f(float x) { return x; }
/* never closed ( k(