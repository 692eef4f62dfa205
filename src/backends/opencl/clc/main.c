/* SPDX-License-Identifier: MIT */
/*
 * clc/main.c -- kcache-clc, the OpenCL compile helper that the OpenCL
 * backend starts where the platform builds one program at a time per
 * process (../helpers.c). All of it is in the library (../serve.c); not
 * for running by hand: descriptor 0 must be the backend's socket.
 */
int kc__ocl_helper_main(int argc, char **argv);

int main(int argc, char **argv) { return kc__ocl_helper_main(argc, argv); }
