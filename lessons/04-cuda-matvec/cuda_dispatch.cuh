/* Lesson 04's given dispatcher and entry points: what runs the kernels you
 * write in cuda_matvec.cu, and what C calls.
 *
 * Included by cuda_matvec.cu alone, at its bottom, after your code. Not a
 * file of its own: it instantiates your templates (matvec_gpu, the launch
 * functions) for double, and C++ compiles a template only where its
 * definition is in sight, so this code must be in your file's translation
 * unit. */
#ifndef ZZ_LESSON04_CUDA_DISPATCH_CUH
#define ZZ_LESSON04_CUDA_DISPATCH_CUH

#include "cuda_tools.cuh"

/* Runs `kernel` on device memory (declared in cuda_tools.cuh, so that
 * matvec_gpu can call it before this point). */
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

/* The double entry points; the float ones are yours (TODO 7). */
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

extern "C" void matvec_gpu_release(void)
{
    if (shared_handle != nullptr)
        CUBLAS_CHECK(cublasDestroy(shared_handle));
    shared_handle = nullptr;
}

#endif
