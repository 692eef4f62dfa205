extern "C" {
__global__ void c(float *y) { y[0] = 1; }
// ab
