KC_DEVICE int f(int a) {
  if (a) return sizeof(int);
  while (a--)
    for (;;) switch (a) {
      default: return (int)_Alignof(long) + alignof(int);
      }
  return g(a);
}