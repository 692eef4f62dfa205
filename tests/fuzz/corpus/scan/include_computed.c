#define HDR "x.h"
#include HDR
#include "unterminated
