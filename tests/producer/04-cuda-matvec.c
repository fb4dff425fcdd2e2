/* Lesson 04's producer (tests/harness/producer.h): runs your GPU code on
 * the tests' inputs and writes what it computed. The cases, the files and
 * the exit statuses are in 04-cuda-matvec.h:
 *   device_double|device_float KERNEL M N   matvec_device_* on device memory
 *   gpu_double|gpu_float KERNEL M N         matvec_gpu_* on host memory
 * It decides nothing: the tests (tests/test_04-cuda-matvec.c) check what it
 * wrote. Every CUDA call of its own is checked: a failure says which call
 * on standard error and exits with status 1; a kernel that failed while it
 * ran exits with MATVEC04_KERNEL_FAILED. */
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "04-cuda-matvec.h"
#include "cuda_matvec.h"
#include "producer.h"

/* The producer's own CUDA calls: a failure stops it, naming the call. */
#define PRODUCER_CUDA(call)                                                   \
    do {                                                                      \
        cudaError_t producer_cuda_error_ = (call);                            \
        if (producer_cuda_error_ != cudaSuccess)                              \
            cuda_failed(producer_cuda_error_, #call);                         \
    } while (0)

static _Noreturn void cuda_failed(cudaError_t error, const char *call)
{
    fprintf(stderr, "producer: the test's own %s failed: %s (%s)\n", call,
            cudaGetErrorString(error), cudaGetErrorName(error));
    exit(1);
}

/* One case's command line: the kernel, the shape and the bytes. */
typedef struct {
    int kernel;
    size_t m, n;
    size_t element;               /* bytes of one number: 4 or 8 */
    size_t bytes_A, bytes_x;
} shape;

static shape shape_of_args(bool single)
{
    shape s = { .element = single ? sizeof(float) : sizeof(double) };
    size_t kernel = producer_arg(0);
    s.m = producer_arg(1);
    s.n = producer_arg(2);
    if (kernel > INT_MAX || s.m == 0 || s.n == 0 ||
        s.m > (SIZE_MAX / s.element - MATVEC04_GUARD) / s.n) {
        fprintf(stderr, "producer: KERNEL %zu, M %zu, N %zu: the kernel must "
                "be at most INT_MAX, M and N at least 1, and the bytes of A "
                "and of y with its guard must fit in a size_t\n", kernel,
                s.m, s.n);
        exit(2);
    }
    s.kernel = (int)kernel;
    s.bytes_A = s.m * s.n * s.element;
    s.bytes_x = s.n * s.element;
    return s;
}

/* Waits for what the student's call launched: a kernel that failed while
 * it ran (an index outside its memory), or could not be launched, shows
 * here, at the first call that waits for it. */
static void wait_for_kernel(void)
{
    cudaError_t error = cudaDeviceSynchronize();
    if (error == cudaSuccess)
        error = cudaGetLastError();
    if (error != cudaSuccess) {
        fprintf(stderr, "producer: " MATVEC04_FAILED_WORDS "%s (%s)\n",
                cudaGetErrorString(error), cudaGetErrorName(error));
        exit(MATVEC04_KERNEL_FAILED);
    }
}

/* device_*: the kernel alone, on A and x that the producer put on the
 * device itself, so that each kernel is tested whatever TODO 1 does. y on
 * the device is followed by MATVEC04_GUARD more elements, and every byte of
 * both is 0xFF first: all bits set is a NaN in float and in double, so an
 * element of y never written shows, and so does a write past its end. */
static void device_case(bool single)
{
    const shape s = shape_of_args(single);
    const size_t count_y = s.m + MATVEC04_GUARD;
    const size_t bytes_y = count_y * s.element;
    void *A = producer_input("A", s.element, s.m * s.n);
    void *x = producer_input("x", s.element, s.n);
    unsigned char *y = producer_alloc(count_y, s.element, "y");

    void *A_dev = NULL, *x_dev = NULL, *y_dev = NULL;
    PRODUCER_CUDA(cudaMalloc(&A_dev, s.bytes_A));
    PRODUCER_CUDA(cudaMalloc(&x_dev, s.bytes_x));
    PRODUCER_CUDA(cudaMalloc(&y_dev, bytes_y));
    PRODUCER_CUDA(cudaMemcpy(A_dev, A, s.bytes_A, cudaMemcpyHostToDevice));
    PRODUCER_CUDA(cudaMemcpy(x_dev, x, s.bytes_x, cudaMemcpyHostToDevice));
    PRODUCER_CUDA(cudaMemset(y_dev, 0xFF, bytes_y));
    /* Everything above has finished before the student's code starts. */
    PRODUCER_CUDA(cudaDeviceSynchronize());

    int status = single
        ? matvec_device_float(s.kernel, s.m, s.n, A_dev, x_dev, y_dev)
        : matvec_device_double(s.kernel, s.m, s.n, A_dev, x_dev, y_dev);
    produce("status", &status, sizeof status, 1);
    wait_for_kernel();

    PRODUCER_CUDA(cudaMemcpy(y, y_dev, bytes_y, cudaMemcpyDeviceToHost));
    produce("y", y, s.element, count_y);
    /* A and x as the kernel left them on the device: it must only read
     * them. The host copies are overwritten with what comes back. */
    PRODUCER_CUDA(cudaMemcpy(A, A_dev, s.bytes_A, cudaMemcpyDeviceToHost));
    produce("A_after", A, s.element, s.m * s.n);
    PRODUCER_CUDA(cudaMemcpy(x, x_dev, s.bytes_x, cudaMemcpyDeviceToHost));
    produce("x_after", x, s.element, s.n);

    PRODUCER_CUDA(cudaFree(A_dev));
    PRODUCER_CUDA(cudaFree(x_dev));
    PRODUCER_CUDA(cudaFree(y_dev));
    free(A);
    free(x);
    free(y);
    matvec_gpu_release();
}

/* gpu_*: the student's matvec_gpu_* does everything (TODO 1: the device
 * memory and the copies). y in host memory starts as NaN, so a y that
 * never comes back shows. */
static void gpu_case(bool single)
{
    const shape s = shape_of_args(single);
    void *A = producer_input("A", s.element, s.m * s.n);
    void *x = producer_input("x", s.element, s.n);
    void *y = producer_alloc(s.m, s.element, "y");
    for (size_t i = 0; i < s.m; i++) {
        if (single)
            ((float *)y)[i] = NAN;
        else
            ((double *)y)[i] = NAN;
    }

    int status = single
        ? matvec_gpu_float(s.kernel, s.m, s.n, A, x, y)
        : matvec_gpu_double(s.kernel, s.m, s.n, A, x, y);
    produce("status", &status, sizeof status, 1);
    wait_for_kernel();

    produce("y", y, s.element, s.m);
    /* A and x in host memory as the call left them. */
    produce("A_after", A, s.element, s.m * s.n);
    produce("x_after", x, s.element, s.n);
    free(A);
    free(x);
    free(y);
    matvec_gpu_release();
}

static void device_double(void)
{
    device_case(false);
}

static void device_float(void)
{
    device_case(true);
}

static void gpu_double(void)
{
    gpu_case(false);
}

static void gpu_float(void)
{
    gpu_case(true);
}

int main(int argc, char **argv)
{
    static const producer_case cases[] = {
        { "device_double", 3, device_double, false },
        { "device_float", 3, device_float, false },
        { "gpu_double", 3, gpu_double, false },
        { "gpu_float", 3, gpu_float, false },
    };
    return producer_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
