/* Checking every CUDA call and kernel launch.
 *
 *     CUDA_CHECK(cudaMalloc(&device_x, bytes));
 *     kernel<<<blocks, threads>>>(...);
 *     CUDA_CHECK_LAUNCH();
 *
 * CUDA reports errors through return values that are easy to ignore, and a
 * failed launch says nothing until a later call. Both macros stop the
 * program with the call, the file, the line and CUDA's explanation.
 * Usable from C (.c host code) and from CUDA C++ (.cu). */
#ifndef ZZ_CHECK_CUDA_H
#define ZZ_CHECK_CUDA_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_CHECK(call)                                                    \
    do {                                                                    \
        cudaError_t cuda_check_error_ = (call);                             \
        if (cuda_check_error_ != cudaSuccess)                               \
            cuda_check_failed(cuda_check_error_, #call, __FILE__, __LINE__);\
    } while (0)

/* A launch's own errors (bad configuration) show in cudaGetLastError. */
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

void cuda_check_failed(cudaError_t error, const char *call, const char *file,
                       int line);

/* How many CUDA devices this process can use. When there are none (no GPU,
 * no driver, CUDA_VISIBLE_DEVICES empty), returns 0 and says why in `why`,
 * e.g. "no CUDA device: cudaGetDeviceCount: CUDA driver version is
 * insufficient for CUDA runtime version". Never exits. */
int cuda_devices_available(char *why, size_t len);

#ifdef __cplusplus
}
#endif

#endif
