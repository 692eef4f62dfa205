KC_DEVICE float h(float x) { /* été */
  return λ(x);
}