/* Lesson 04: y = Ax on a GPU, the entry points of cuda_matvec.cu as C sees
 * them.
 *
 * Shapes: A is (m, n), row-major, so A[i][j] is A[i*n + j]; x is (n); y is
 * (m). Every function overwrites all of y and changes nothing else.
 *
 * cuda_matvec.cu is CUDA C++ (nvcc compiles it as C++, which gives it
 * templates: one kernel serves double and float). These entry points have
 * C linkage, so that the driver and the tests, plain C, can call them. */
#ifndef ZZ_LESSON04_CUDA_MATVEC_H
#define ZZ_LESSON04_CUDA_MATVEC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kernels, in the order the lesson builds them. */
typedef enum {
    MATVEC_THREAD_PER_ROW, /* TODO 2: one thread computes one row */
    MATVEC_WARP_PER_ROW,   /* TODO 3: 32 threads share a row, then shuffle */
    MATVEC_VECTORISED,     /* TODO 4: the same, 16 bytes per load */
    MATVEC_SHARED_X,       /* TODO 5: x staged in shared memory */
    MATVEC_CUBLAS,         /* TODO 6: cuBLAS gemv, for comparison */
    MATVEC_KERNELS         /* how many there are */
} matvec_kernel;

/* A kernel's name, as tables and CSV files print it. */
static inline const char *matvec_kernel_name(int kernel)
{
    switch (kernel) {
    case MATVEC_THREAD_PER_ROW: return "thread_per_row";
    case MATVEC_WARP_PER_ROW:   return "warp_per_row";
    case MATVEC_VECTORISED:     return "vectorised";
    case MATVEC_SHARED_X:       return "shared_x";
    case MATVEC_CUBLAS:         return "cublas";
    default:                    return "?";
    }
}

/* TODO 1 (float: TODO 7). y = A x on the GPU, for A, x and y in host
 * memory: allocates device memory, copies A and x to the device, runs
 * `kernel`, copies y back and frees the device memory.
 * Returns 0; or -1, having done nothing, when `kernel` is no kernel, m or n
 * is 0, the byte counts overflow, or cuBLAS is asked for more than INT_MAX
 * rows or columns. A failed CUDA call stops the program with the call, the
 * file and the line (CUDA_CHECK). */
int matvec_gpu_double(int kernel, size_t m, size_t n, const double *A,
                      const double *x, double *y);
int matvec_gpu_float(int kernel, size_t m, size_t n, const float *A,
                     const float *x, float *y);

/* The same product on memory that is already on the device: A_dev is
 * (m, n), x_dev (n), y_dev (m), all from cudaMalloc. Launches the kernel on
 * the default stream and returns without waiting for it: time it with CUDA
 * events; the next cudaMemcpy or cudaDeviceSynchronize waits for it.
 * Returns 0, or -1 as matvec_gpu_double does. */
int matvec_device_double(int kernel, size_t m, size_t n, const double *A_dev,
                         const double *x_dev, double *y_dev);
int matvec_device_float(int kernel, size_t m, size_t n, const float *A_dev,
                        const float *x_dev, float *y_dev);

/* Frees what the kernels keep from one call to the next (cuBLAS's handle).
 * Call it once, at the end; a later call of the functions above starts
 * afresh. */
void matvec_gpu_release(void);

#ifdef __cplusplus
}

/* The marker for unwritten code (common/not_done.h), for C++. That header
 * is C: its _Noreturn is spelled [[noreturn]] in C++, and its function has
 * C linkage, so C++ must be told so, or it would look for a C++ name. */
extern "C" [[noreturn]] void not_done_at(const char *file, int line,
                                         const char *function);
#define NOT_DONE() not_done_at(__FILE__, __LINE__, __func__)
#endif

#endif
