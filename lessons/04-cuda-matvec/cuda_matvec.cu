/* Lesson 04, y = Ax on the GPU with CUDA.
 * You write: device memory and the copies (TODO 1); one thread per row
 * (TODO 2); one warp per row, summed with shuffles (TODO 3); 16-byte loads
 * with the row's ragged ends (TODO 4); x staged in shared memory (TODO 5);
 * cuBLAS's gemv on a row-major A (TODO 6); the float entry points, every
 * CUDA call checked (TODO 7).
 * Given: the tools in cuda_tools.cuh (block counts, vector types, the
 * cuBLAS handle and its check), the dispatcher that picks a kernel and the
 * double entry points in cuda_dispatch.cuh (included at the bottom of this
 * file, after the functions they call), and the driver (main.c) that
 * checks and times every kernel.
 * Run `make check L=04` to test (on a machine with a CUDA device; without
 * one every test says "skipped"); `make all`, then
 *   build/student/04-cuda-matvec/cuda_matvec to check and time. */

/* Until you write them, the functions below leave their parameters unused;
 * this line keeps the host compiler quiet about that. Delete it when you
 * are done, if you like: the solution does not need it. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#include "cuda_matvec.h"

#include <cstdint>

#include <cublas_v2.h>

#include "check_cuda.h"
#include "cuda_tools.cuh"

/* ---- TODO 1: memory on the device, and the copies ------------------------ */

/* y = A x for A (m, n), x (n), y (m) in host memory. */
template <typename T>
static int matvec_gpu(int kernel, size_t m, size_t n, const T *A, const T *x,
                      T *y)
{
    if (!shape_ok<T>(kernel, m, n))
        return -1;
    /* TODO 1 start: the GPU cannot read A, x or y where they are, in host
     * memory. Make room on the device for A (m*n elements), x (n) and
     * y (m), counted in bytes; copy A and x there; run the kernel on the
     * device's copies with matvec_device(kernel, m, n, A_dev, x_dev,
     * y_dev); copy y back into y; free the device memory. Every CUDA call
     * goes through CUDA_CHECK (common/check_cuda.h), which stops the
     * program with the call, the file and the line when it fails. */
    NOT_DONE();
    /* TODO 1 end */
    return 0;
}

/* ---- TODO 2: one thread per row ------------------------------------------ */

/* TODO 2 start: a kernel in which thread i of the grid computes y[i], the
 * sum over j of A[i*n + j] * x[j], stored (not added) into y[i]; and its
 * launch: blocks of BLOCK threads, enough of them for every row
 * (blocks_for; both in cuda_tools.cuh), or fewer with each thread going on
 * to row i + (threads in the grid) until it passes m. The grid has more
 * threads than rows unless m is a multiple of BLOCK: a thread whose row
 * does not exist must do nothing (the bounds check). After the launch,
 * CUDA_CHECK_LAUNCH(). */
template <typename T>
__global__ void thread_per_row(size_t m, size_t n, const T *__restrict__ A,
                               const T *__restrict__ x, T *__restrict__ y)
{
}

template <typename T>
static void launch_thread_per_row(size_t m, size_t n, const T *A, const T *x,
                                  T *y)
{
    NOT_DONE();
}
/* TODO 2 end */

/* ---- TODO 3: one warp per row -------------------------------------------- */

/* TODO 3 start: a kernel in which warp w of the grid computes y[w] (warp w
 * is the threads (w % (BLOCK/WARP))*WARP .. +31 of block w / (BLOCK/WARP)).
 * Lane l of the warp (threadIdx.x % WARP) adds up columns l, l + 32,
 * l + 64, ... below n, so that the 32 lanes read 32 neighbouring elements
 * of the row together. Then the 32 partial sums become one: write a
 * __device__ function warp_sum that adds, five times, the value that
 * __shfl_down_sync brings from the lane 16, 8, 4, 2, 1 places higher, so
 * that lane 0 ends with the sum of all 32; lane 0 stores y[w]. Every lane
 * of the warp must reach the shuffle. Its launch: BLOCK / WARP rows per
 * block. */
template <typename T>
__global__ void warp_per_row(size_t m, size_t n, const T *__restrict__ A,
                             const T *__restrict__ x, T *__restrict__ y)
{
}

template <typename T>
static void launch_warp_per_row(size_t m, size_t n, const T *A, const T *x,
                                T *y)
{
    NOT_DONE();
}
/* TODO 3 end */

/* ---- TODO 4: 16 bytes a load --------------------------------------------- */

/* TODO 4 start: the warp-per-row kernel with the row read as vectors of
 * vector_of<T>::width elements (double2, float4), 16 bytes a load. A
 * vector load needs an address that is a multiple of 16, and row i starts
 * at A + i*n, which is one only when i*n*sizeof(T) is a multiple of 16
 * (cudaMalloc's own addresses are). So split each row into a head (the
 * elements before its first 16-byte boundary, none to width - 1 of them,
 * never more than n), the whole vectors, and a tail (the fewer than width
 * elements after the last whole vector). The lanes share the vectors as
 * they shared the columns in TODO 3; the head and the tail go one element
 * per lane. x may be read as vectors only where x + (head) is on a
 * boundary too; elsewhere read it element by element (multiply_add has
 * both forms). */
template <typename T>
__global__ void vectorised(size_t m, size_t n, const T *__restrict__ A,
                           const T *__restrict__ x, T *__restrict__ y)
{
}

template <typename T>
static void launch_vectorised(size_t m, size_t n, const T *A, const T *x,
                              T *y)
{
    NOT_DONE();
}
/* TODO 4 end */

/* ---- TODO 5: x in shared memory ------------------------------------------ */

/* TODO 5 start: one warp per row again, BLOCK / WARP rows per block, with
 * x read through shared memory: a __shared__ array of TILE elements that
 * the whole block fills together with x[start .. start + TILE-1] (fewer in
 * the last tile), before any warp multiplies its row's part of that tile
 * with it. Two barriers (__syncthreads) per tile: nobody reads the tile
 * before all of it is written, nobody overwrites it while a warp still
 * reads it. Every thread of the block must reach every barrier, including
 * the warps of the last block that have no row. */
template <typename T>
__global__ void shared_x(size_t m, size_t n, const T *__restrict__ A,
                         const T *__restrict__ x, T *__restrict__ y)
{
}

template <typename T>
static void launch_shared_x(size_t m, size_t n, const T *A, const T *x, T *y)
{
    NOT_DONE();
}
/* TODO 5 end */

/* ---- TODO 6: cuBLAS, side by side ---------------------------------------- */

/* TODO 6 start: the same product by cuBLAS's gemv (y = alpha op(A) x +
 * beta y, alpha 1, beta 0), through the shared handle cublas_handle(),
 * checked with CUBLAS_CHECK (both in cuda_tools.cuh): cublasDgemv for
 * double, cublasSgemv for float (two overloaded functions, one per
 * precision, called from here). cuBLAS
 * stores matrices by columns: what is the row-major (m, n) A to it, which
 * op, which dimensions, which leading dimension? */
template <typename T>
static void launch_cublas(size_t m, size_t n, const T *A, const T *x, T *y)
{
    NOT_DONE();
}
/* TODO 6 end */

/* ---- TODO 7: both precisions, every call checked ------------------------- */

/* TODO 7 start: the float entry points, as the double ones in
 * cuda_dispatch.cuh: if your kernels are written for any T, and every
 * launch and cuBLAS call is checked, they are one line each. Then read this
 * file once more from the top: does every CUDA call go through CUDA_CHECK,
 * every kernel launch have its CUDA_CHECK_LAUNCH, every cuBLAS call its
 * CUBLAS_CHECK? */
extern "C" int matvec_gpu_float(int kernel, size_t m, size_t n,
                                const float *A, const float *x, float *y)
{
    NOT_DONE();
}

extern "C" int matvec_device_float(int kernel, size_t m, size_t n,
                                   const float *A_dev, const float *x_dev,
                                   float *y_dev)
{
    NOT_DONE();
}
/* TODO 7 end */

/* ---- Given: the dispatcher and the double entry points ------------------- */

/* They call your functions above, so they come after them. */
#include "cuda_dispatch.cuh"
