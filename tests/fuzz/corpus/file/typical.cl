/* a file */
#include "common.h"
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define BIAS 1.0f
typedef struct Pair { float a, b; } Pair;
KC_DEVICE float ha(float x);
KC_DEVICE float ha(float x) { return x + BIAS; }
KC_KERNEL void ka(KC_GLOBAL float *y) { y[kc_global_id(0)] = ha(1.0f); }
