#ifdef X
int a;
#endif
