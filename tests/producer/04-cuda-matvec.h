/* What lesson 04's judge (tests/test_04-cuda-matvec.c) and its producer
 * (tests/producer/04-cuda-matvec.c) agree on: the cases, the files, the
 * guard after y and the exit status of a kernel that failed on the GPU.
 *
 *   device_double KERNEL M N   matvec_device_double on device copies of A, x
 *   device_float  KERNEL M N   the same in float
 *       reads A.bin (M*N) and x.bin (N); y on the device is M + GUARD
 *       elements, every byte 0xFF first (a NaN in float and in double).
 *       Writes status.bin (one int, what the call returned) right after the
 *       call, then y.bin (all M + GUARD elements, as the device held them
 *       after the kernel), A_after.bin and x_after.bin (A and x copied back
 *       from the device).
 *   gpu_double KERNEL M N      matvec_gpu_double on A, x in host memory
 *   gpu_float  KERNEL M N      the same in float
 *       reads A.bin and x.bin; y (M) in host memory starts as NaN. Writes
 *       status.bin, y.bin (M), and A_after.bin and x_after.bin (the host
 *       arrays as the call left them).
 *
 * Every number is raw binary of the case's precision (8 bytes for double,
 * 4 for float); status is a C int. The outputs have names of their own, not
 * the inputs', so that a producer that stopped early cannot leave the
 * inputs looking like untouched outputs. */
#ifndef ZZ_PRODUCER_04_CUDA_MATVEC_H
#define ZZ_PRODUCER_04_CUDA_MATVEC_H

/* Elements after y that a kernel must leave alone: as many as any grid of
 * blocks of up to 1024 threads has threads past the last row. */
enum { MATVEC04_GUARD = 1024 };

/* The producer's exit status when the kernel failed while it ran (the
 * first call that waits for it, cudaDeviceSynchronize, returned an error);
 * its last line on standard error then starts with MATVEC04_FAILED_WORDS
 * and gives CUDA's explanation. Any other failure of a CUDA call of the
 * producer's own exits with status 1 and names the call. */
enum { MATVEC04_KERNEL_FAILED = 4 };
#define MATVEC04_FAILED_WORDS "the kernel failed on the GPU: "

#endif
