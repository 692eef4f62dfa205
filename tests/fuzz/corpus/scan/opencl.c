__kernel void k(__global float *y, __local float *tmp) {
  y[get_global_id(0)] = tmp[get_local_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
}