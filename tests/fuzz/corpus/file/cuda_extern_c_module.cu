extern "C"{
__global__ void a(float *y) { y[0] = 1; }
__global__ void b(float *y) { y[0] = 2; }
}
