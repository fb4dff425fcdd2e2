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
