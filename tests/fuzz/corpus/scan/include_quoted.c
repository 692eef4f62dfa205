#include "common.h"
#include <math.h>
# include_next "dsp/fir.cuh"
k(1);