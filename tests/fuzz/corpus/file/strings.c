KC_DEVICE int f(void) { return "}"[0] + '{'; } /* } */ // {
