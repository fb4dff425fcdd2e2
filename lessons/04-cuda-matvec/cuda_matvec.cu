/* Lesson 04, y = Ax on the GPU with CUDA.
 * You write: device memory and the copies (TODO 1); one thread per row
 * (TODO 2); one warp per row, summed with shuffles (TODO 3); 16-byte loads
 * with the row's ragged ends (TODO 4); x staged in shared memory (TODO 5);
 * cuBLAS's gemv on a row-major A (TODO 6); the float entry points, every
 * CUDA call checked (TODO 7).
 * Given: the tools below (block counts, vector types, the cuBLAS handle),
 * the dispatcher that picks a kernel, the double entry points, and the
 * driver (main.c) that checks and times every kernel.
 * Run `make check L=04` to test (on a machine with a CUDA device; without
 * one every test says "skipped"); `make all`, then
 *   build/student/04-cuda-matvec/cuda_matvec to check and time. */

/* Until you write them, the functions below leave their parameters unused;
 * this line keeps the host compiler quiet about that. Delete it when you
 * are done, if you like: the solution does not need it. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

#include "cuda_matvec.h"

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cublas_v2.h>

#include "check_cuda.h"

/* ---- Tools ----------------------------------------------------------------- */

/* Threads in a warp: they execute one instruction together. */
inline constexpr unsigned WARP = 32;
/* Every lane of a warp takes part in a shuffle. */
inline constexpr unsigned FULL_MASK = 0xffffffffu;
/* Threads per block: a multiple of the warp, small enough that an SM holds
 * several blocks (2048 threads at most on recent GPUs), large enough that
 * the block count stays modest. */
inline constexpr unsigned BLOCK = 256;
/* Elements of x in one tile of shared memory (TODO 5): 16 KiB of doubles,
 * so that several blocks fit in one SM's shared memory. */
inline constexpr unsigned TILE = 2048;
/* The most blocks a launch asks for: gridDim.x may be up to 2^31 - 1, and
 * every kernel here loops over its rows in strides of the whole grid, so a
 * grid smaller than the rows is still right. */
inline constexpr size_t MAX_BLOCKS = 0x7fffffff;

/* Blocks of `per_block` items each for `items` items, at least one. */
inline unsigned blocks_for(size_t items, size_t per_block)
{
    size_t blocks = (items + per_block - 1) / per_block;
    if (blocks == 0)
        blocks = 1;
    return (unsigned)(blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS);
}

/* The 16-byte vector of each precision (TODO 4): one load instruction
 * brings `width` elements. */
template <typename T> struct vector_of;
template <> struct vector_of<double> {
    using type = double2;
    static constexpr size_t width = 2;
};
template <> struct vector_of<float> {
    using type = float4;
    static constexpr size_t width = 4;
};

/* sum + a . b, element by element, for one vector of a row and one of x. */
__device__ inline double multiply_add(double sum, double2 a, double2 b)
{
    return sum + a.x * b.x + a.y * b.y;
}
__device__ inline float multiply_add(float sum, float4 a, float4 b)
{
    return sum + a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}
/* The same with x read one element at a time, for when x + j is not on a
 * 16-byte boundary although the row is. */
__device__ inline double multiply_add(double sum, double2 a, const double *x)
{
    return sum + a.x * x[0] + a.y * x[1];
}
__device__ inline float multiply_add(float sum, float4 a, const float *x)
{
    return sum + a.x * x[0] + a.y * x[1] + a.z * x[2] + a.w * x[3];
}

/* cuBLAS reports errors as a cublasStatus_t, not a cudaError_t. */
#define CUBLAS_CHECK(call)                                                    \
    do {                                                                      \
        cublasStatus_t cublas_check_status_ = (call);                         \
        if (cublas_check_status_ != CUBLAS_STATUS_SUCCESS)                    \
            cublas_failed(cublas_check_status_, #call, __FILE__, __LINE__);   \
    } while (0)

[[noreturn]] static void cublas_failed(cublasStatus_t status, const char *call,
                                       const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, call,
            cublasGetStatusString(status));
    exit(1);
}

/* One cuBLAS handle for the whole process, made on first use: making one
 * costs far more than a matvec (it sets up a context and device memory). */
static cublasHandle_t shared_handle = nullptr;

inline cublasHandle_t cublas_handle()
{
    if (shared_handle == nullptr)
        CUBLAS_CHECK(cublasCreate(&shared_handle));
    return shared_handle;
}

/* Whether the entry points can run `kernel` on an (m, n) product of T:
 * sizes whose bytes fit in a size_t, and cuBLAS's int dimensions. */
template <typename T>
static bool shape_ok(int kernel, size_t m, size_t n)
{
    if (kernel < 0 || kernel >= MATVEC_KERNELS || m == 0 || n == 0)
        return false;
    if (m > SIZE_MAX / n || m * n > SIZE_MAX / sizeof(T))
        return false;
    return kernel != MATVEC_CUBLAS || (m <= INT_MAX && n <= INT_MAX);
}

/* Runs `kernel` on device memory (defined at the end, after the kernels). */
template <typename T>
static int matvec_device(int kernel, size_t m, size_t n, const T *A,
                         const T *x, T *y);

/* ---- Task a: memory on the device, and the copies ------------------------- */

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

/* ---- Task b: one thread per row ------------------------------------------- */

/* TODO 2 start: a kernel in which thread i of the grid computes y[i], the
 * sum over j of A[i*n + j] * x[j], stored (not added) into y[i]; and its
 * launch: blocks of BLOCK threads, enough of them for every row
 * (blocks_for), or fewer with each thread going on to row i + (threads in
 * the grid) until it passes m. The grid has more threads than rows unless
 * m is a multiple of BLOCK: a thread whose row does not exist must do
 * nothing (the bounds check). After the launch, CUDA_CHECK_LAUNCH(). */
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

/* ---- Task c: one warp per row --------------------------------------------- */

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

/* ---- Task d: 16 bytes per load -------------------------------------------- */

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

/* ---- Task e: x in shared memory ------------------------------------------- */

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

/* ---- Task f: cuBLAS ------------------------------------------------------- */

/* TODO 6 start: the same product by cuBLAS's gemv (y = alpha op(A) x +
 * beta y, alpha 1, beta 0), through the shared handle cublas_handle(),
 * checked with CUBLAS_CHECK: cublasDgemv for double, cublasSgemv for float
 * (two overloaded functions, one per precision, called from here). cuBLAS
 * stores matrices by columns: what is the row-major (m, n) A to it, which
 * op, which dimensions, which leading dimension? */
template <typename T>
static void launch_cublas(size_t m, size_t n, const T *A, const T *x, T *y)
{
    NOT_DONE();
}
/* TODO 6 end */

/* ---- The dispatcher ------------------------------------------------------- */

template <typename T>
static int matvec_device(int kernel, size_t m, size_t n, const T *A,
                         const T *x, T *y)
{
    if (!shape_ok<T>(kernel, m, n))
        return -1;
    switch (kernel) {
    case MATVEC_THREAD_PER_ROW:
        launch_thread_per_row(m, n, A, x, y);
        break;
    case MATVEC_WARP_PER_ROW:
        launch_warp_per_row(m, n, A, x, y);
        break;
    case MATVEC_VECTORISED:
        launch_vectorised(m, n, A, x, y);
        break;
    case MATVEC_SHARED_X:
        launch_shared_x(m, n, A, x, y);
        break;
    case MATVEC_CUBLAS:
        launch_cublas(m, n, A, x, y);
        break;
    }
    return 0;
}

/* ---- Task g: the entry points that C calls -------------------------------- */

extern "C" int matvec_gpu_double(int kernel, size_t m, size_t n,
                                 const double *A, const double *x, double *y)
{
    return matvec_gpu(kernel, m, n, A, x, y);
}

extern "C" int matvec_device_double(int kernel, size_t m, size_t n,
                                    const double *A_dev, const double *x_dev,
                                    double *y_dev)
{
    return matvec_device(kernel, m, n, A_dev, x_dev, y_dev);
}

/* TODO 7 start: the float entry points, as the double ones above: if your
 * kernels are written for any T, and every launch and cuBLAS call is
 * checked, they are one line each. Then read this file once more from the
 * top: does every CUDA call go through CUDA_CHECK, every kernel launch
 * have its CUDA_CHECK_LAUNCH, every cuBLAS call its CUBLAS_CHECK? */
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

extern "C" void matvec_gpu_release(void)
{
    if (shared_handle != nullptr)
        CUBLAS_CHECK(cublasDestroy(shared_handle));
    shared_handle = nullptr;
}
