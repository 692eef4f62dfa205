KC_DEVICE int f(void) {
  const char *s = "call(me) \" not(this)";
  char c = '(';
  char d = '\'';
  return s[0] + c + d + real(1);
}