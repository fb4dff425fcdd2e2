/* Lesson 04's given tools, for the kernels you write in cuda_matvec.cu: the
 * sizes of warps, blocks and tiles, block counts, 16-byte vector types,
 * cuBLAS's error check and its one handle, and the shapes the entry points
 * accept.
 *
 * Included by cuda_matvec.cu alone, at its top: the handle below is the
 * process's only one, and cuda_dispatch.cuh, included at the bottom of the
 * same file, releases it. */
#ifndef ZZ_LESSON04_CUDA_TOOLS_CUH
#define ZZ_LESSON04_CUDA_TOOLS_CUH

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cublas_v2.h>

#include "check_cuda.h"
#include "cuda_matvec.h"

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
 * costs far more than a matvec (it sets up a context and device memory).
 * matvec_gpu_release (cuda_dispatch.cuh) destroys it. */
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

/* Runs `kernel` on device memory: the dispatcher, which calls your launch
 * functions, so it is defined after them (cuda_dispatch.cuh). */
template <typename T>
static int matvec_device(int kernel, size_t m, size_t n, const T *A,
                         const T *x, T *y);

#endif
