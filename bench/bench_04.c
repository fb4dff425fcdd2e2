/* Lesson 04's benchmark: the solution's four kernels against cuBLAS's gemv
 * and against a device-to-device copy (the memory bandwidth the GPU really
 * reaches), in double and in float, on a matrix of a few GB (32768 x 16384:
 * 4 GiB of doubles, 2 GiB of floats); and the copy of A from host to device
 * out of pageable and out of pinned memory.
 *
 * Repetitions are interleaved (every variant once, then again, the order
 * rotated each round), timed with CUDA events, and medians reported; every
 * buffer is allocated and written, and every kernel run once, before the
 * first timing. Without a CUDA device it says why and writes no CSV rows. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "check_cuda.h"
#include "cli.h"
#include "cuda_matvec.h"
#include "float_reference.h"
#include "format_bytes.h"
#include "matrix.h"
#include "reference.h"
#include "timer.h"

enum { COPY = MATVEC_KERNELS, VARIANTS };
/* --reps is capped where the median of the timings is taken (timer.h). */
enum { MAX_REPS = TIMINGS_MAX };
/* Rows checked against the reference, spread over A (first and last
 * included, odd and even): the reference for all of a 4 GiB A would take
 * longer than the whole benchmark. */
enum { CHECKED_ROWS = 257 };

/* GB/s of each variant in one precision, and the host-to-device copies. */
typedef struct {
    double gbs[VARIANTS];
    int best;            /* the fastest of the solution's own kernels */
} precision_result;

static const char *variant_name(int v)
{
    return v == COPY ? "d2d_copy" : matvec_kernel_name(v);
}

static double event_seconds(cudaEvent_t start, cudaEvent_t stop)
{
    float ms = 0;
    CUDA_CHECK(cudaEventSynchronize(stop));
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms / 1e3;
}

static int run_device(bool single, int kernel, size_t m, size_t n,
                      const void *A_dev, const void *x_dev, void *y_dev)
{
    return single ? matvec_device_float(kernel, m, n, A_dev, x_dev, y_dev)
                  : matvec_device_double(kernel, m, n, A_dev, x_dev, y_dev);
}

/* Runs every kernel once and compares CHECKED_ROWS rows of y with the
 * reference (A64 and x64: the exact numbers the kernels got). Exits on a
 * wrong answer: a fast wrong result is not a result. */
static void check_kernels(bool single, size_t m, size_t n, const double *A64,
                          const double *x64, const void *A_dev,
                          const void *x_dev, void *y_dev)
{
    size_t element = single ? sizeof(float) : sizeof(double);
    void *y = malloc(m * element);
    if (y == NULL) {
        fprintf(stderr, "bench_04: cannot allocate y\n");
        exit(2);
    }
    size_t rows = m < CHECKED_ROWS ? m : CHECKED_ROWS;
    for (int kernel = 0; kernel < MATVEC_KERNELS; kernel++) {
        /* All bits set: NaN in float and double, so no stale y passes. */
        CUDA_CHECK(cudaMemset(y_dev, 0xFF, m * element));
        if (run_device(single, kernel, m, n, A_dev, x_dev, y_dev) != 0) {
            fprintf(stderr, "bench_04: %s refused A of %zu x %zu\n",
                    matvec_kernel_name(kernel), m, n);
            exit(1);
        }
        CUDA_CHECK(cudaMemcpy(y, y_dev, m * element,
                              cudaMemcpyDeviceToHost));
        for (size_t k = 0; k < rows; k++) {
            size_t i = rows == 1 ? 0 : k * (m - 1) / (rows - 1);
            double expected, bound;
            const double *row = &A64[i * n];
            if (single)
                reference_matvec_float(1, n, row, x64, &expected, &bound);
            else
                reference_matvec(1, n, row, x64, &expected, &bound);
            double got = single ? (double)((float *)y)[i]
                                : ((double *)y)[i];
            if (!(fabs(got - expected) <= bound)) {
                fprintf(stderr, "bench_04: %s (%s) is wrong: y[%zu] is %.17g, "
                        "expected %.17g (allowed error %.3g)\n",
                        matvec_kernel_name(kernel), single ? "float"
                        : "double", i, got, expected, bound);
                exit(1);
            }
        }
    }
    free(y);
}

/* Times the kernels and the copy on device memory, interleaved. */
static precision_result time_kernels(bool single, size_t m, size_t n,
                                     const void *A_dev, const void *x_dev,
                                     void *y_dev, void *copy_dev, int reps)
{
    static double seconds[VARIANTS][MAX_REPS];
    size_t element = single ? sizeof(float) : sizeof(double);
    size_t bytes_A = m * n * element;
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    /* Round -1 is untimed: the copy's first run, and any lazy set-up. */
    for (int r = -1; r < reps; r++)
        for (int k = 0; k < VARIANTS; k++) {
            int v = (r + 1 + k) % VARIANTS;
            CUDA_CHECK(cudaEventRecord(start, 0));
            if (v == COPY)
                CUDA_CHECK(cudaMemcpy(copy_dev, A_dev, bytes_A,
                                      cudaMemcpyDeviceToDevice));
            else
                run_device(single, v, m, n, A_dev, x_dev, y_dev);
            CUDA_CHECK(cudaEventRecord(stop, 0));
            double t = event_seconds(start, stop);
            if (r >= 0)
                seconds[v][r] = t;
        }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));

    /* A matvec moves A, x and y once; a copy reads and writes A. */
    double matvec_bytes = (double)element *
                          ((double)m * (double)n + (double)m + (double)n);
    precision_result result = { .best = 0 };
    for (int v = 0; v < VARIANTS; v++)
        result.gbs[v] = (v == COPY ? 2.0 * (double)bytes_A : matvec_bytes) /
                        timings_median(seconds[v], reps) / 1e9;
    for (int v = 1; v < MATVEC_CUBLAS; v++)
        if (result.gbs[v] > result.gbs[result.best])
            result.best = v;
    return result;
}

/* The host-to-device copy of `bytes` from pageable (`pageable`) and pinned
 * memory, interleaved; GB/s into gbs[0] (pageable) and gbs[1] (pinned). */
static void time_h2d(void *A_dev, const void *pageable, size_t bytes,
                     int reps, double gbs[2])
{
    static double seconds[2][MAX_REPS];
    void *pinned;
    CUDA_CHECK(cudaMallocHost(&pinned, bytes));
    memcpy(pinned, pageable, bytes);
    for (int r = -1; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            int source = (r + 1 + k) % 2;
            double t0 = timer_now();
            CUDA_CHECK(cudaMemcpy(A_dev, source ? pinned : pageable, bytes,
                                  cudaMemcpyHostToDevice));
            /* A pageable copy may return before the last bytes land. */
            CUDA_CHECK(cudaDeviceSynchronize());
            if (r >= 0)
                seconds[source][r] = timer_now() - t0;
        }
    CUDA_CHECK(cudaFreeHost(pinned));
    for (int s = 0; s < 2; s++)
        gbs[s] = (double)bytes / timings_median(seconds[s], reps) / 1e9;
}

/* One precision: A on the device, checked, timed. A64 and x64 hold the
 * numbers (already rounded to float for float); A and x are what the
 * kernels get (the same doubles, or floats). */
static precision_result run_precision(bool single, size_t m, size_t n,
                                      const double *A64, const double *x64,
                                      const void *A, const void *x, int reps,
                                      double h2d_gbs[2])
{
    size_t element = single ? sizeof(float) : sizeof(double);
    size_t bytes_A = m * n * element;
    void *A_dev, *x_dev, *y_dev, *copy_dev;
    CUDA_CHECK(cudaMalloc(&A_dev, bytes_A));
    CUDA_CHECK(cudaMalloc(&copy_dev, bytes_A));
    CUDA_CHECK(cudaMalloc(&x_dev, n * element));
    CUDA_CHECK(cudaMalloc(&y_dev, m * element));
    CUDA_CHECK(cudaMemcpy(A_dev, A, bytes_A, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(x_dev, x, n * element, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(copy_dev, 0, bytes_A));
    if (h2d_gbs != NULL)
        time_h2d(A_dev, A, bytes_A, reps < 5 ? reps : 5, h2d_gbs);
    check_kernels(single, m, n, A64, x64, A_dev, x_dev, y_dev);
    precision_result result = time_kernels(single, m, n, A_dev, x_dev, y_dev,
                                           copy_dev, reps);
    CUDA_CHECK(cudaFree(A_dev));
    CUDA_CHECK(cudaFree(copy_dev));
    CUDA_CHECK(cudaFree(x_dev));
    CUDA_CHECK(cudaFree(y_dev));
    return result;
}

int main(int argc, char **argv)
{
    size_t m = 32768, n = 16384;
    int reps = 10;
    const cli_option options[] = {
        { "m", CLI_SIZE, &m, "rows of A", 1, 1u << 30 },
        { "n", CLI_SIZE, &n, "columns of A", 1, 1u << 23 },
        { "reps", CLI_INT, &reps, "interleaved repetitions", 1, MAX_REPS },
    };
    const cli_spec spec = { "bench_04", "lesson 04 against cuBLAS gemv and "
                            "a device-to-device copy, double and float",
                            options, sizeof options / sizeof options[0] };
    cli_parse_or_exit(&spec, argc, argv, false);

    char why[256];
    if (cuda_devices_available(why, sizeof why) == 0) {
        printf("lesson 04: skipped: %s\n", why);
        return 0;
    }
    struct cudaDeviceProp device;
    CUDA_CHECK(cudaGetDeviceProperties(&device, 0));
    size_t free_bytes, total_bytes, bytes_A;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    /* A and its copy in double, with room to spare: halve the rows until
     * they fit, and say so. */
    const size_t spare = (size_t)256 << 20;
    const size_t asked = m;
    while (!matrix_bytes(m, n, &bytes_A) ||
           (m > 1 && (free_bytes < spare || bytes_A > (free_bytes - spare) / 2)))
        m /= 2;
    char size[32], human_A[32];
    snprintf(size, sizeof size, "%zux%zu", m, n);
    format_bytes((double)bytes_A, human_A, sizeof human_A);
    printf("lesson 04: y = Ax on %s (%d SMs), A %s (%s in double, half in "
           "float), medians of %d interleaved repetitions\n", device.name,
           device.multiProcessorCount, size, human_A, reps);
    if (m != asked)
        printf("  (%zu rows asked for: A and its copy would not fit in the "
               "device's free memory)\n", asked);

    double *A64 = matrix_alloc_or_exit(m, n, "A");
    double *x64 = vector_alloc_or_exit(n, "x");
    matrix_fill_random(A64, m, n, 0, 0, 1);
    vector_fill_random(x64, n, 0, 1);
    double h2d_gbs[2];
    precision_result fp64 = run_precision(false, m, n, A64, x64, A64, x64,
                                          reps, h2d_gbs);
    /* Float: the same numbers rounded to float, for the kernels and for
     * the reference alike. */
    round_to_float(A64, m * n);
    round_to_float(x64, n);
    float *A32 = malloc(m * n * sizeof(float));
    float *x32 = malloc(n * sizeof(float));
    if (A32 == NULL || x32 == NULL) {
        fprintf(stderr, "bench_04: cannot allocate A and x in float\n");
        return 2;
    }
    copy_to_float(A32, A64, m * n);
    copy_to_float(x32, x64, n);
    precision_result fp32 = run_precision(true, m, n, A64, x64, A32, x32,
                                          reps, NULL);

    FILE *csv = bench_csv_open();
    printf("  %-4s %-22s %-11s %3s %3s  %-10s %10s %-8s %-16s %s\n", "less",
           "variant", "size", "thr", "rks", "metric", "value", "unit",
           "baseline", "ratio");
    const precision_result *results[2] = { &fp64, &fp32 };
    const char *suffix[2] = { "fp64", "fp32" };
    for (int p = 0; p < 2; p++) {
        const precision_result *r = results[p];
        char names[VARIANTS][40], cublas[40], copy[40];
        for (int v = 0; v < VARIANTS; v++)
            snprintf(names[v], sizeof names[v], "%s_%s", variant_name(v),
                     suffix[p]);
        snprintf(cublas, sizeof cublas, "%s", names[MATVEC_CUBLAS]);
        snprintf(copy, sizeof copy, "%s", names[COPY]);
        for (int v = 0; v < MATVEC_CUBLAS; v++) {
            bench_row row = { "04", names[v], size, 1, 1, "bandwidth",
                              r->gbs[v], "GB/s", cublas,
                              r->gbs[MATVEC_CUBLAS] };
            bench_record(csv, &row);
        }
        bench_row best_row = { "04", names[r->best], size, 1, 1,
                               "bandwidth", r->gbs[r->best], "GB/s", copy,
                               r->gbs[COPY] };
        bench_record(csv, &best_row);
        bench_row cublas_row = { "04", cublas, size, 1, 1, "bandwidth",
                                 r->gbs[MATVEC_CUBLAS], "GB/s", copy,
                                 r->gbs[COPY] };
        bench_record(csv, &cublas_row);
        bench_row copy_row = { "04", copy, size, 1, 1, "bandwidth",
                               r->gbs[COPY], "GB/s", NULL, 0 };
        bench_record(csv, &copy_row);
    }
    bench_row pageable_row = { "04", "h2d_pageable", size, 1, 1,
                               "bandwidth", h2d_gbs[0], "GB/s", "h2d_pinned",
                               h2d_gbs[1] };
    bench_record(csv, &pageable_row);
    bench_row pinned_row = { "04", "h2d_pinned", size, 1, 1, "bandwidth",
                             h2d_gbs[1], "GB/s", NULL, 0 };
    bench_record(csv, &pinned_row);
    if (csv != NULL)
        fclose(csv);
    printf("targets: best/cublas >= 0.9: fp64 %.2f (%s), fp32 %.2f (%s); "
           "best/d2d_copy >= 0.8: fp64 %.2f, fp32 %.2f\n",
           fp64.gbs[fp64.best] / fp64.gbs[MATVEC_CUBLAS],
           matvec_kernel_name(fp64.best),
           fp32.gbs[fp32.best] / fp32.gbs[MATVEC_CUBLAS],
           matvec_kernel_name(fp32.best),
           fp64.gbs[fp64.best] / fp64.gbs[COPY],
           fp32.gbs[fp32.best] / fp32.gbs[COPY]);

    matvec_gpu_release();
    free(A32);
    free(x32);
    matrix_free(A64);
    matrix_free(x64);
    return 0;
}
