/* SPDX-License-Identifier: MIT */
/*
 * pocl_after_launch -- what a PoCL program binary holds depending on when it
 * is fetched, and what loading it costs in a new process (issue 29 item 5,
 * the OpenCL warm start with PoCL's own cache off). Raw OpenCL, no kcache:
 *
 *   early FILE   build from source, fetch the binary (what kcache stores:
 *                the compile fetches it before any launch), then launch
 *   late FILE    build from source, launch once (local size 64), only then
 *                fetch the binary: PoCL serializes a program's binary once,
 *                at the first fetch, with the work-group functions made by
 *                then, so this one holds the launch's specialized machine code
 *   load FILE    a new process's warm start from FILE: create the program
 *                from the binary, build, launch once and wait
 *
 * Each prints its phases in ms. Run each in a fresh POCL_CACHE_DIR with
 * POCL_KERNEL_CACHE=0 (bench/pocl-after-launch.sh does), so that nothing
 * PoCL kept from an earlier process is found.
 *
 * Build: cc -O2 bench/pocl_after_launch.c -o pocl_after_launch -lOpenCL
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* kc_bench_util.h's typical kernel, as OpenCL C */
static const char *src =
    "float lerp3(float a, float b, float t) { return a + (b - a) * t; }\n"
    "float smooth(float x) { x = x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); return x * x * (3.0f - 2.0f * x); "
    "}\n"
    "float poly(float x) { float r = 0.0f; for (int i = 0; i < 8; i++) r = r * x + (float)(i + 1) * 0.125f;"
    " return r; }\n"
    "float shade(float x, float y) { return lerp3(smooth(x), poly(y), 0.25f) + smooth(y) * poly(x); }\n"
    "__kernel void typical(__global float *out, __global const float *in, float scale, int n) {\n"
    "  int i = get_global_id(0);\n"
    "  if (i < n) out[i] = shade(in[i], in[i] * scale);\n"
    "}\n";

static int fail(const char *what, cl_int e) {
  fprintf(stderr, "pocl_after_launch: %s: %d\n", what, (int)e);
  return 1;
}

static int fetch(cl_program p, const char *path, size_t *size) {
  cl_int e = clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof *size, size, NULL);
  if (e != CL_SUCCESS || !*size) return fail("CL_PROGRAM_BINARY_SIZES", e);
  unsigned char *b = malloc(*size);
  if (!b) return fail("malloc", 0);
  e = clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof b, &b, NULL);
  if (e != CL_SUCCESS) return fail("CL_PROGRAM_BINARIES", e);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(b, 1, *size, f) != *size || fclose(f)) return fail(path, 0);
  free(b);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "early") && strcmp(argv[1], "late") && strcmp(argv[1], "load"))) {
    fprintf(stderr, "usage: %s early|late|load FILE\n", argv[0]);
    return 2;
  }
  const char *mode = argv[1], *path = argv[2];
  double t0 = now_ms();
  cl_platform_id pl;
  cl_device_id d;
  cl_int e = clGetPlatformIDs(1, &pl, NULL);
  if (e == CL_SUCCESS) e = clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &d, NULL);
  if (e != CL_SUCCESS) return fail("no OpenCL device", e);
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  if (!c) return fail("clCreateContext", e);
  cl_command_queue q = clCreateCommandQueue(c, d, 0, &e);
  if (!q) return fail("clCreateCommandQueue", e);
  enum { N = 4096 };
  cl_mem out = clCreateBuffer(c, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &e);
  cl_mem in = clCreateBuffer(c, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &e);
  if (!out || !in) return fail("clCreateBuffer", e);
  double t1 = now_ms();
  cl_program p;
  if (!strcmp(mode, "load")) {
    static unsigned char buf[1 << 24];
    FILE *f = fopen(path, "rb");
    if (!f) return fail(path, 0);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const unsigned char *bp = buf;
    cl_int bs = CL_SUCCESS;
    p = clCreateProgramWithBinary(c, 1, &d, &n, &bp, &bs, &e);
    if (!p || bs != CL_SUCCESS) return fail("clCreateProgramWithBinary", p ? bs : e);
  } else {
    p = clCreateProgramWithSource(c, 1, &src, NULL, &e);
    if (!p) return fail("clCreateProgramWithSource", e);
  }
  e = clBuildProgram(p, 1, &d, "", NULL, NULL);
  if (e != CL_SUCCESS) return fail("clBuildProgram", e);
  double t2 = now_ms();
  size_t size = 0;
  if (!strcmp(mode, "early") && fetch(p, path, &size)) return 1;
  double t3 = now_ms();
  cl_kernel k = clCreateKernel(p, "typical", &e);
  if (!k) return fail("clCreateKernel", e);
  float scale = 1.5f;
  int n = N;
  clSetKernelArg(k, 0, sizeof out, &out);
  clSetKernelArg(k, 1, sizeof in, &in);
  clSetKernelArg(k, 2, sizeof scale, &scale);
  clSetKernelArg(k, 3, sizeof n, &n);
  size_t global = N, local = 64;
  e = clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL);
  if (e == CL_SUCCESS) e = clFinish(q);
  if (e != CL_SUCCESS) return fail("launch", e);
  double t4 = now_ms();
  if (!strcmp(mode, "late") && fetch(p, path, &size)) return 1;
  double t5 = now_ms();
  printf("%-5s setup %7.2f  build %7.2f  fetch %6.2f  first launch %7.2f  fetch %6.2f  (binary %zu bytes)\n",
         mode, t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, size);
  clReleaseKernel(k);
  clReleaseProgram(p);
  clReleaseMemObject(out);
  clReleaseMemObject(in);
  clReleaseCommandQueue(q);
  clReleaseContext(c);
  return 0;
}
