/* Lesson 04's driver: generates A and x from a seed, checks every kernel of
 * cuda_matvec.cu against a reference computed on the CPU, then times them
 * on the GPU side by side with a device-to-device copy of A (the memory
 * bandwidth the GPU really reaches), and times the copy of A from host to
 * device out of pinned and out of pageable memory.
 * Without a CUDA device it says why and exits 0: there is nothing to run.
 * You do not need to change this file. */
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_cuda.h"
#include "cli.h"
#include "compare.h"
#include "cuda_matvec.h"
#include "float_reference.h"
#include "format_bytes.h"
#include "matrix.h"
#include "reference.h"
#include "timer.h"

/* The variants timed: the kernels, then a device-to-device copy of A. */
enum { COPY = MATVEC_KERNELS, VARIANTS };
/* --reps is capped where the median of the timings is taken (timer.h). */
enum { MAX_REPS = TIMINGS_MAX };

/* The product in the precision being run: A (m, n) and x (n) in host
 * memory, as doubles (A64, x64: rounded to float first when single), and
 * as the kernels get them (A, x: the same doubles, or floats). */
typedef struct {
    bool single;
    size_t m, n, element;       /* element: bytes of one number */
    double *A64, *x64;
    const void *A, *x;
} problem;

/* count numbers of `element` bytes, allocated and written; exits with 2,
 * as matrix_alloc_or_exit does, when that cannot be. */
static void *numbers_alloc(size_t count, size_t element, const char *what)
{
    if (count > SIZE_MAX / element) {
        fprintf(stderr, "error: %s of %zu numbers is too large to address\n",
                what, count);
        exit(2);
    }
    void *data = malloc(count * element);
    if (data == NULL) {
        char human[32];
        format_bytes((double)(count * element), human, sizeof human);
        fprintf(stderr, "error: cannot allocate %s for %s: not enough "
                "memory\n", human, what);
        exit(2);
    }
    memset(data, 0, count * element);
    return data;
}

/* y (m numbers of the problem's precision) = NaN everywhere. */
static void fill_nan(const problem *p, void *y)
{
    for (size_t i = 0; i < p->m; i++) {
        if (p->single)
            ((float *)y)[i] = NAN;
        else
            ((double *)y)[i] = NAN;
    }
}

static int run_host(const problem *p, int kernel, void *y)
{
    return p->single
        ? matvec_gpu_float(kernel, p->m, p->n, p->A, p->x, y)
        : matvec_gpu_double(kernel, p->m, p->n, p->A, p->x, y);
}

static int run_device(const problem *p, int kernel, const void *A_dev,
                      const void *x_dev, void *y_dev)
{
    return p->single
        ? matvec_device_float(kernel, p->m, p->n, A_dev, x_dev, y_dev)
        : matvec_device_double(kernel, p->m, p->n, A_dev, x_dev, y_dev);
}

/* Runs `kernel` once through matvec_gpu_* and compares with the
 * reference; stops the program on a wrong answer, since timing a wrong
 * kernel means nothing. y is m numbers of the precision, y64 m doubles. */
static void check_kernel(const problem *p, int kernel, void *y, double *y64,
                         const double *expected, const double *bound)
{
    const char *name = matvec_kernel_name(kernel);
    fill_nan(p, y); /* a y[i] the kernel forgot cannot pass */
    if (run_host(p, kernel, y) != 0) {
        fprintf(stderr, "cuda_matvec: %s refused A of %zu x %zu\n", name,
                p->m, p->n);
        exit(1);
    }
    for (size_t i = 0; i < p->m; i++)
        y64[i] = p->single ? (double)((float *)y)[i] : ((double *)y)[i];
    comparison_t c = compare_within(expected, y64, bound, p->m);
    if (!comparison_ok(&c)) {
        char text[512];
        comparison_describe(&c, "y", text, sizeof text);
        fprintf(stderr, "cuda_matvec: %s (%s) is wrong: %s\n", name,
                p->single ? "float" : "double", text);
        exit(1);
    }
    printf("  %-15s right: every y[i] within its error bound\n", name);
}

/* Seconds between two events recorded on the default stream. */
static double event_seconds(cudaEvent_t start, cudaEvent_t stop)
{
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / 1e3;
}

int main(int argc, char **argv)
{
    size_t m = 8192, n = 8192;
    uint64_t seed = 1;
    int reps = 10;
    const char *precision = "double";
    const cli_option options[] = {
        { "m", CLI_SIZE, &m, "rows of A", 1, 1u << 30 },
        { "n", CLI_SIZE, &n, "columns of A", 1, 1u << 23 },
        { "seed", CLI_SEED, &seed, "seed that A and x are generated from",
          0, 0 },
        { "reps", CLI_INT, &reps, "timed repetitions of each variant", 1,
          MAX_REPS },
        { "precision", CLI_STRING, &precision, "float or double", 0, 0 },
    };
    const cli_spec spec = { "cuda_matvec", "lesson 04: y = Ax on a GPU, "
                            "five kernels checked and timed against a "
                            "device-to-device copy", options,
                            sizeof options / sizeof options[0] };
    cli_parse_or_exit(&spec, argc, argv, false);

    problem p = { .m = m, .n = n };
    if (strcmp(precision, "double") == 0)
        p.single = false;
    else if (strcmp(precision, "float") == 0)
        p.single = true;
    else {
        fprintf(stderr, "cuda_matvec: --precision must be float or double, "
                "got '%s'\n", precision);
        cli_print_usage(&spec, stderr);
        return 2;
    }
    p.element = p.single ? sizeof(float) : sizeof(double);
    const char *type = p.single ? "float" : "double";
    size_t bytes_A;
    if (!matrix_bytes(m, n, &bytes_A)) {
        fprintf(stderr, "cuda_matvec: A of %zu x %zu %ss is too large\n", m,
                n, type);
        return 2;
    }
    bytes_A = bytes_A / sizeof(double) * p.element;

    char why[256];
    if (cuda_devices_available(why, sizeof why) == 0) {
        printf("cuda_matvec: skipped: %s\n", why);
        printf("summary: skipped=%s\n", why);
        return 0;
    }
    struct cudaDeviceProp device;
    CUDA_CHECK(cudaGetDeviceProperties(&device, 0));
    size_t free_bytes, total_bytes;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    char human_A[32], human_free[32], human_total[32];
    format_bytes((double)bytes_A, human_A, sizeof human_A);
    format_bytes((double)free_bytes, human_free, sizeof human_free);
    format_bytes((double)total_bytes, human_total, sizeof human_total);
    /* A and its copy for the timing, and room to spare for x, y and
     * cuBLAS's workspace. */
    const size_t spare = (size_t)64 << 20;
    if (free_bytes < spare || bytes_A > (free_bytes - spare) / 2) {
        fprintf(stderr, "cuda_matvec: A of %zu x %zu %ss (%s) and a copy of "
                "it do not fit in the device's %s of free memory\n", m, n,
                type, human_A, human_free);
        return 2;
    }
    printf("cuda_matvec: y = Ax on %s (compute capability %d.%d, %d SMs, "
           "%s), A is %zu x %zu %ss (%s), seed %" PRIu64 "\n", device.name,
           device.major, device.minor, device.multiProcessorCount,
           human_total, m, n, type, human_A, seed);

    /* The inputs, and the reference computed from exactly the numbers the
     * kernels get: for float, the generated numbers rounded to float. */
    p.A64 = matrix_alloc_or_exit(m, n, "A");
    p.x64 = vector_alloc_or_exit(n, "x");
    matrix_fill_random(p.A64, m, n, 0, 0, seed);
    vector_fill_random(p.x64, n, 0, seed);
    double *expected = vector_alloc_or_exit(m, "reference y");
    double *bound = vector_alloc_or_exit(m, "error bounds");
    double *y64 = vector_alloc_or_exit(m, "y as doubles");
    float *A32 = NULL, *x32 = NULL;
    if (p.single) {
        round_to_float(p.A64, m * n);
        round_to_float(p.x64, n);
        A32 = numbers_alloc(m * n, sizeof(float), "A in float");
        x32 = numbers_alloc(n, sizeof(float), "x in float");
        copy_to_float(A32, p.A64, m * n);
        copy_to_float(x32, p.x64, n);
        p.A = A32;
        p.x = x32;
        reference_matvec_float(m, n, p.A64, p.x64, expected, bound);
    } else {
        p.A = p.A64;
        p.x = p.x64;
        reference_matvec(m, n, p.A64, p.x64, expected, bound);
    }
    void *y = numbers_alloc(m, p.element, "y");

    for (int kernel = 0; kernel < MATVEC_KERNELS; kernel++)
        check_kernel(&p, kernel, y, y64, expected, bound);

    /* Timing on device memory: A, x and y stay on the device, and a second
     * buffer of A's size takes the device-to-device copy. */
    void *A_dev, *x_dev, *y_dev, *copy_dev, *pinned;
    CUDA_CHECK(cudaMalloc(&A_dev, bytes_A));
    CUDA_CHECK(cudaMalloc(&copy_dev, bytes_A));
    CUDA_CHECK(cudaMalloc(&x_dev, n * p.element));
    CUDA_CHECK(cudaMalloc(&y_dev, m * p.element));
    CUDA_CHECK(cudaMemcpy(A_dev, p.A, bytes_A, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(x_dev, p.x, n * p.element,
                          cudaMemcpyHostToDevice));
    /* Pinned (page-locked) host memory: the GPU's copy engine reads it
     * directly. The pageable A above must first be copied by the driver,
     * piece by piece, into a pinned buffer of its own. */
    CUDA_CHECK(cudaMallocHost(&pinned, bytes_A));
    memcpy(pinned, p.A, bytes_A);
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));

    /* Repetitions of every variant interleaved, the order rotated each
     * round, so that whatever else the GPU does slows all of them alike;
     * medians reported. Before the first round, one untimed run of each:
     * a kernel's first launch loads its code onto the GPU. */
    static double seconds[VARIANTS][MAX_REPS];
    static double h2d_seconds[2][MAX_REPS]; /* 0: pageable, 1: pinned */
    for (int r = -1; r < reps; r++)
        for (int k = 0; k < VARIANTS; k++) {
            int v = (r + 1 + k) % VARIANTS;
            CUDA_CHECK(cudaEventRecord(start, 0));
            if (v == COPY)
                CUDA_CHECK(cudaMemcpy(copy_dev, A_dev, bytes_A,
                                      cudaMemcpyDeviceToDevice));
            else
                run_device(&p, v, A_dev, x_dev, y_dev);
            CUDA_CHECK(cudaEventRecord(stop, 0));
            double t = event_seconds(start, stop);
            if (r >= 0)
                seconds[v][r] = t;
        }
    /* A pageable copy returns once the driver has staged the data, which
     * may be before the last of it reaches the device: hence the
     * synchronisation inside the timing. */
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            int source = (r + k) % 2;
            double t0 = timer_now();
            CUDA_CHECK(cudaMemcpy(A_dev, source ? pinned : p.A, bytes_A,
                                  cudaMemcpyHostToDevice));
            CUDA_CHECK(cudaDeviceSynchronize());
            h2d_seconds[source][r] = timer_now() - t0;
        }

    /* A matvec reads A and x and writes y: element * (mn + n + m) bytes. A
     * copy reads and writes A: 2 * bytes_A. */
    double matvec_bytes = (double)p.element *
                          ((double)m * (double)n + (double)n + (double)m);
    double gbs[VARIANTS];
    for (int v = 0; v < VARIANTS; v++)
        gbs[v] = (v == COPY ? 2.0 * (double)bytes_A : matvec_bytes) /
                 timings_median(seconds[v], reps) / 1e9;
    double h2d_gbs[2];
    for (int s = 0; s < 2; s++)
        h2d_gbs[s] = (double)bytes_A / timings_median(h2d_seconds[s], reps)
                     / 1e9;
    int best = 0;
    for (int v = 1; v < MATVEC_CUBLAS; v++)
        if (gbs[v] > gbs[best])
            best = v;

    printf("\n  %-15s %10s %9s %8s   (%s, medians of %d)\n", "variant",
           "time (ms)", "GB/s", "of copy", type, reps);
    for (int v = 0; v < VARIANTS; v++)
        printf("  %-15s %10.3f %9.1f %7.0f%%\n",
               v == COPY ? "d2d_copy" : matvec_kernel_name(v),
               1e3 * timings_median(seconds[v], reps), gbs[v],
               100.0 * gbs[v] / gbs[COPY]);
    printf("  %-15s %10.3f %9.1f   (host to device, A from malloc'd "
           "memory)\n", "h2d_pageable", 1e3 * timings_median(h2d_seconds[0],
                                                            reps),
           h2d_gbs[0]);
    printf("  %-15s %10.3f %9.1f   (host to device, A from "
           "cudaMallocHost)\n", "h2d_pinned",
           1e3 * timings_median(h2d_seconds[1], reps), h2d_gbs[1]);
    printf("summary: precision=%s", type);
    for (int v = 0; v < VARIANTS; v++)
        printf(" %s_gbs=%.1f", v == COPY ? "d2d_copy" : matvec_kernel_name(v),
               gbs[v]);
    printf(" best=%s best_of_cublas=%.2f best_of_copy=%.2f "
           "h2d_pageable_gbs=%.1f h2d_pinned_gbs=%.1f\n",
           matvec_kernel_name(best), gbs[best] / gbs[MATVEC_CUBLAS],
           gbs[best] / gbs[COPY], h2d_gbs[0], h2d_gbs[1]);

    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    CUDA_CHECK(cudaFreeHost(pinned));
    CUDA_CHECK(cudaFree(A_dev));
    CUDA_CHECK(cudaFree(copy_dev));
    CUDA_CHECK(cudaFree(x_dev));
    CUDA_CHECK(cudaFree(y_dev));
    matvec_gpu_release();
    free(y);
    free(A32);
    free(x32);
    matrix_free(p.A64);
    matrix_free(p.x64);
    matrix_free(expected);
    matrix_free(bound);
    matrix_free(y64);
    return 0;
}
