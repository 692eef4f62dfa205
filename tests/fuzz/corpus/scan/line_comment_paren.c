KC_KERNEL void k // (int x)
(int a) { }