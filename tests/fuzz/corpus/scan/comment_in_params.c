/* k(int z) */ KC_KERNEL void k(
  int a
) { "k("; }