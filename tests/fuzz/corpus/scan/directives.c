#if defined(A) && B(1)
#elif C
#error don't call d(1)
#pragma unroll N
#endif
