#include <cuda_fp16.h>
#define SCALE 2.0f
namespace ops {
__device__ float twice(float x) { return x * SCALE; }
__device__ float twice(int x) { return (float)x * 2.0f; }
namespace detail {
__device__ float add1(float x) { return x + 1.0f; }
}  // namespace detail
__device__ float both(float x) { return detail::add1(twice(x)); }
}  // namespace ops
namespace fo = ops;
namespace { __device__ int hidden(int x) { return x + 1; } }
namespace c::d { constexpr int depth = 2; }
inline namespace v1 { struct P { float x; }; }
template <typename T> struct Box { T v; __device__ T get() const; };
template <typename T> __device__ T Box<T>::get() const { return v; }
extern "C" {
namespace e { __global__ void k(float *y) { Box<float> b{1.0f}; y[0] = ops::both(1.0f) + fo::twice(3) + b.get(); } }
}
