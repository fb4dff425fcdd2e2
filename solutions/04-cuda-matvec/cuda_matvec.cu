/* Lesson 04, y = Ax on the GPU with CUDA: reference solution.
 * You write: device memory and the copies (TODO 1); one thread per row
 * (TODO 2); one warp per row, summed with shuffles (TODO 3); 16-byte loads
 * with the row's ragged ends (TODO 4); x staged in shared memory (TODO 5);
 * cuBLAS's gemv on a row-major A (TODO 6); the float entry points, every
 * CUDA call checked (TODO 7).
 * Given: the tools in cuda_tools.cuh (block counts, vector types, the
 * cuBLAS handle and its check), the dispatcher that picks a kernel and the
 * double entry points in cuda_dispatch.cuh (included at the bottom of this
 * file, after the functions they call), and the driver (main.c) that
 * checks and times every kernel. */

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
    /* TODO 1 start */
    const size_t bytes_A = m * n * sizeof(T);
    const size_t bytes_x = n * sizeof(T), bytes_y = m * sizeof(T);
    T *A_dev = nullptr, *x_dev = nullptr, *y_dev = nullptr;
    CUDA_CHECK(cudaMalloc(&A_dev, bytes_A));
    CUDA_CHECK(cudaMalloc(&x_dev, bytes_x));
    CUDA_CHECK(cudaMalloc(&y_dev, bytes_y));
    CUDA_CHECK(cudaMemcpy(A_dev, A, bytes_A, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(x_dev, x, bytes_x, cudaMemcpyHostToDevice));
    matvec_device(kernel, m, n, A_dev, x_dev, y_dev);
    /* The copy back waits for the kernel, and reports a kernel that failed
     * while it ran (an illegal address, say). */
    CUDA_CHECK(cudaMemcpy(y, y_dev, bytes_y, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(A_dev));
    CUDA_CHECK(cudaFree(x_dev));
    CUDA_CHECK(cudaFree(y_dev));
    /* TODO 1 end */
    return 0;
}

/* ---- TODO 2: one thread per row ------------------------------------------ */

/* TODO 2 start */
/* Thread i of the grid computes y[i]; with fewer threads than rows, each
 * goes on to row i + (threads in the grid), and so on. */
template <typename T>
__global__ void thread_per_row(size_t m, size_t n, const T *__restrict__ A,
                               const T *__restrict__ x, T *__restrict__ y)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += stride) {
        const T *row = A + i * n;
        T sum = 0;
        for (size_t j = 0; j < n; j++)
            sum += row[j] * x[j];
        y[i] = sum;
    }
}

template <typename T>
static void launch_thread_per_row(size_t m, size_t n, const T *A, const T *x,
                                  T *y)
{
    thread_per_row<T><<<blocks_for(m, BLOCK), BLOCK>>>(m, n, A, x, y);
    CUDA_CHECK_LAUNCH();
}
/* TODO 2 end */

/* ---- TODO 3: one warp per row -------------------------------------------- */

/* TODO 3 start */
/* The sum of `value` over the 32 lanes of the warp, in lane 0. Each step
 * adds the value of the lane `offset` higher: after offsets 16, 8, 4, 2, 1,
 * lane 0 has added all 32. */
template <typename T>
__device__ T warp_sum(T value)
{
    for (unsigned offset = WARP / 2; offset > 0; offset /= 2)
        value += __shfl_down_sync(FULL_MASK, value, offset);
    return value;
}

/* Warp w of the grid computes y[w]: lane l takes columns l, l + 32, ...,
 * so the 32 lanes read 32 neighbouring elements of the row at once. */
template <typename T>
__global__ void warp_per_row(size_t m, size_t n, const T *__restrict__ A,
                             const T *__restrict__ x, T *__restrict__ y)
{
    const unsigned lane = threadIdx.x % WARP;
    const size_t warps_per_block = blockDim.x / WARP;
    const size_t warps = (size_t)gridDim.x * warps_per_block;
    for (size_t i = blockIdx.x * warps_per_block + threadIdx.x / WARP; i < m;
         i += warps) {
        const T *row = A + i * n;
        T sum = 0;
        for (size_t j = lane; j < n; j += WARP)
            sum += row[j] * x[j];
        /* Every lane of the warp is here: the whole warp shares i. */
        sum = warp_sum(sum);
        if (lane == 0)
            y[i] = sum;
    }
}

template <typename T>
static void launch_warp_per_row(size_t m, size_t n, const T *A, const T *x,
                                T *y)
{
    warp_per_row<T><<<blocks_for(m, BLOCK / WARP), BLOCK>>>(m, n, A, x, y);
    CUDA_CHECK_LAUNCH();
}
/* TODO 3 end */

/* ---- TODO 4: 16 bytes a load --------------------------------------------- */

/* TODO 4 start */
/* One warp per row as in TODO 3, with the row read in 16-byte vectors. A
 * row starts on a 16-byte boundary only when i*n*sizeof(T) is a multiple of
 * 16, so each row has a head (the elements before its first boundary, up
 * to width - 1), the vectors, and a tail (fewer than width elements). */
template <typename T>
__global__ void vectorised(size_t m, size_t n, const T *__restrict__ A,
                           const T *__restrict__ x, T *__restrict__ y)
{
    using V = typename vector_of<T>::type;
    constexpr size_t width = vector_of<T>::width;
    const unsigned lane = threadIdx.x % WARP;
    const size_t warps_per_block = blockDim.x / WARP;
    const size_t warps = (size_t)gridDim.x * warps_per_block;
    for (size_t i = blockIdx.x * warps_per_block + threadIdx.x / WARP; i < m;
         i += warps) {
        const T *row = A + i * n;
        /* Elements before the first 16-byte boundary in the row. */
        const size_t past = (reinterpret_cast<uintptr_t>(row) % sizeof(V)) /
                            sizeof(T);
        size_t head = past == 0 ? 0 : width - past;
        if (head > n)
            head = n;
        const size_t vectors = (n - head) / width;
        const size_t tail = head + vectors * width;

        T sum = 0;
        if (lane < head)
            sum += row[lane] * x[lane];
        const V *row_vectors = reinterpret_cast<const V *>(row + head);
        const T *x_head = x + head;
        /* The same branch for the whole warp (one row), so no lane waits
         * for another. x + head is on a boundary only when head is 0. */
        if (reinterpret_cast<uintptr_t>(x_head) % sizeof(V) == 0) {
            const V *x_vectors = reinterpret_cast<const V *>(x_head);
            #pragma unroll 4
            for (size_t k = lane; k < vectors; k += WARP)
                sum = multiply_add(sum, row_vectors[k], x_vectors[k]);
        } else {
            #pragma unroll 4
            for (size_t k = lane; k < vectors; k += WARP)
                sum = multiply_add(sum, row_vectors[k], x_head + k * width);
        }
        for (size_t j = tail + lane; j < n; j += WARP)
            sum += row[j] * x[j];
        sum = warp_sum(sum);
        if (lane == 0)
            y[i] = sum;
    }
}

template <typename T>
static void launch_vectorised(size_t m, size_t n, const T *A, const T *x,
                              T *y)
{
    vectorised<T><<<blocks_for(m, BLOCK / WARP), BLOCK>>>(m, n, A, x, y);
    CUDA_CHECK_LAUNCH();
}
/* TODO 4 end */

/* ---- TODO 5: x in shared memory ------------------------------------------ */

/* TODO 5 start */
/* Block b computes rows b*R .. b*R + R-1, R = warps per block, one warp per
 * row. x goes through shared memory a tile of TILE elements at a time:
 * the block loads the tile together, once, and each of its R warps reads
 * it from there. */
template <typename T>
__global__ void shared_x(size_t m, size_t n, const T *__restrict__ A,
                         const T *__restrict__ x, T *__restrict__ y)
{
    __shared__ T tile[TILE];
    const unsigned lane = threadIdx.x % WARP;
    const size_t rows_per_block = blockDim.x / WARP;
    for (size_t first = blockIdx.x * rows_per_block; first < m;
         first += (size_t)gridDim.x * rows_per_block) {
        const size_t i = first + threadIdx.x / WARP;
        T sum = 0;
        for (size_t start = 0; start < n; start += TILE) {
            const size_t count = n - start < TILE ? n - start : TILE;
            /* No thread may overwrite the tile while a warp still reads
             * the previous one. */
            __syncthreads();
            for (size_t k = threadIdx.x; k < count; k += blockDim.x)
                tile[k] = x[start + k];
            /* No warp may read the tile before all of it is written. */
            __syncthreads();
            /* A warp without a row (i >= m, in the last block) still
             * loads and waits above: __syncthreads needs every thread. */
            if (i < m) {
                const T *row = A + i * n + start;
                for (size_t j = lane; j < count; j += WARP)
                    sum += row[j] * tile[j];
            }
        }
        sum = warp_sum(sum);
        if (i < m && lane == 0)
            y[i] = sum;
    }
}

template <typename T>
static void launch_shared_x(size_t m, size_t n, const T *A, const T *x, T *y)
{
    shared_x<T><<<blocks_for(m, BLOCK / WARP), BLOCK>>>(m, n, A, x, y);
    CUDA_CHECK_LAUNCH();
}
/* TODO 5 end */

/* ---- TODO 6: cuBLAS, side by side ---------------------------------------- */

/* TODO 6 start */
/* cuBLAS is column-major: the row-major (m, n) A is, to cuBLAS, the
 * column-major (n, m) matrix A^T with leading dimension n. So y = A x is
 * y = (A^T)^T x: gemv with CUBLAS_OP_T on an n x m matrix, lda = n. With
 * beta = 0, gemv never reads y, so y may hold anything (NaN) before. */
static void gemv(size_t m, size_t n, const double *A, const double *x,
                 double *y)
{
    const double one = 1.0, zero = 0.0;
    CUBLAS_CHECK(cublasDgemv(cublas_handle(), CUBLAS_OP_T, (int)n, (int)m,
                             &one, A, (int)n, x, 1, &zero, y, 1));
}

static void gemv(size_t m, size_t n, const float *A, const float *x, float *y)
{
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemv(cublas_handle(), CUBLAS_OP_T, (int)n, (int)m,
                             &one, A, (int)n, x, 1, &zero, y, 1));
}

template <typename T>
static void launch_cublas(size_t m, size_t n, const T *A, const T *x, T *y)
{
    gemv(m, n, A, x, y);
}
/* TODO 6 end */

/* ---- TODO 7: both precisions, every call checked ------------------------- */

/* TODO 7 start */
extern "C" int matvec_gpu_float(int kernel, size_t m, size_t n,
                                const float *A, const float *x, float *y)
{
    return matvec_gpu(kernel, m, n, A, x, y);
}

extern "C" int matvec_device_float(int kernel, size_t m, size_t n,
                                   const float *A_dev, const float *x_dev,
                                   float *y_dev)
{
    return matvec_device(kernel, m, n, A_dev, x_dev, y_dev);
}
/* TODO 7 end */

/* ---- Given: the dispatcher and the double entry points ------------------- */

/* They call your functions above, so they come after them. */
#include "cuda_dispatch.cuh"
