/* Checking every CUDA call. */
#include "check_cuda.h"

#include <stdio.h>
#include <stdlib.h>

void cuda_check_failed(cudaError_t error, const char *call, const char *file,
                       int line)
{
    fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, call,
            cudaGetErrorString(error), cudaGetErrorName(error));
    exit(1);
}

int cuda_devices_available(char *why, size_t len)
{
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
        snprintf(why, len, "no CUDA device: cudaGetDeviceCount: %s",
                 cudaGetErrorString(error));
        return 0;
    }
    if (count == 0)
        snprintf(why, len, "no CUDA device: cudaGetDeviceCount found none");
    return count;
}
