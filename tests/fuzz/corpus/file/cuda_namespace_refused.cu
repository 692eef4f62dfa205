// an operator, then a using-directive: refused
namespace a {
__device__ float f(float x) { return x; }
__device__ float operator+(float2 a, float2 b) { return a.x + b.x; }
}
using namespace a;



