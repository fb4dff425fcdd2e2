/* Lesson 01's benchmark: the reference solution's naive and fast kernels
 * against OpenBLAS's cblas_dgemv and STREAM's triad, one core, on a matrix
 * far out of cache (8192 x 8192 doubles: 512 MiB).
 *
 * Repetitions are interleaved (naive, fast, dgemv, triad, then again, with
 * the order rotated each round) so that a busy neighbour slows all four
 * alike; medians are reported; every buffer is allocated and written before
 * the first timing. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "cli.h"
#include "compare.h"
#include "matrix.h"
#include "matvec.h"
#include "reference.h"
#include "stream.h"
#include "timer.h"

enum { NAIVE, FAST, DGEMV, TRIAD, VARIANTS };
static const char *const names[VARIANTS] = { "naive", "fast", "openblas_dgemv",
                                             "stream_triad" };

int main(int argc, char **argv)
{
    size_t n = 8192;
    int reps = 10;
    const cli_option options[] = {
        { "n", CLI_SIZE, &n, "A is n x n", 1, 1u << 17 },
        { "reps", CLI_INT, &reps, "interleaved repetitions", 1,
          TIMINGS_MAX },
    };
    const cli_spec spec = { "bench_01", "lesson 01 against OpenBLAS dgemv and "
                            "STREAM triad, one core", options, 2 };
    cli_parse_or_exit(&spec, argc, argv, false);

    openblas_set_num_threads(1);
    double *A = matrix_alloc_or_exit(n, n, "A");
    double *x = vector_alloc_or_exit(n, "x");
    double *y = vector_alloc_or_exit(n, "y");
    double *expected = vector_alloc_or_exit(n, "reference");
    double *bound = vector_alloc_or_exit(n, "bound");
    matrix_fill_random(A, n, n, 0, 0, 1);
    vector_fill_random(x, n, 0, 1);
    triad_arrays triad = triad_alloc_or_exit(TRIAD_DEFAULT_N);

    /* Each kernel once, checked: a fast wrong answer is not a result. */
    reference_matvec(n, n, A, x, expected, bound);
    for (int v = NAIVE; v <= DGEMV; v++) {
        if (v == NAIVE)
            matvec_naive(n, n, A, x, y);
        else if (v == FAST)
            matvec_fast(n, n, A, x, y);
        else
            cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)n, 1.0, A,
                        (int)n, x, 1, 0.0, y, 1);
        comparison_t c = compare_within(expected, y, bound, n);
        if (!comparison_ok(&c)) {
            char text[512];
            comparison_describe(&c, "y", text, sizeof text);
            fprintf(stderr, "bench_01: %s is wrong: %s\n", names[v], text);
            return 1;
        }
    }
    triad_once(&triad);

    static double seconds[VARIANTS][TIMINGS_MAX];
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < VARIANTS; k++) {
            int v = (r + k) % VARIANTS;
            double start = timer_now();
            switch (v) {
            case NAIVE:
                matvec_naive(n, n, A, x, y);
                break;
            case FAST:
                matvec_fast(n, n, A, x, y);
                break;
            case DGEMV:
                cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)n, 1.0,
                            A, (int)n, x, 1, 0.0, y, 1);
                break;
            case TRIAD:
                triad_once(&triad);
                break;
            }
            seconds[v][r] = timer_now() - start;
        }
    }

    double matvec_bytes = 8.0 * ((double)n * (double)n + 2.0 * (double)n);
    double gbs[VARIANTS];
    for (int v = 0; v < VARIANTS; v++)
        gbs[v] = (v == TRIAD ? triad_bytes(triad.n) : matvec_bytes)
                 / timings_median(seconds[v], reps) / 1e9;

    char size[32];
    snprintf(size, sizeof size, "%zux%zu", n, n);
    FILE *csv = bench_csv_open();
    printf("lesson 01: y = Ax, A %s doubles, 1 thread, medians of %d "
           "interleaved repetitions\n", size, reps);
    printf("  %-4s %-16s %-11s %3s %3s  %-10s %10s %-8s %-16s %s\n", "less",
           "variant", "size", "thr", "rks", "metric", "value", "unit",
           "baseline", "ratio");
    const bench_row rows[] = {
        { "01", "naive", size, 1, 1, "bandwidth", gbs[NAIVE], "GB/s",
          "openblas_dgemv", gbs[DGEMV] },
        { "01", "fast", size, 1, 1, "bandwidth", gbs[FAST], "GB/s",
          "openblas_dgemv", gbs[DGEMV] },
        { "01", "fast", size, 1, 1, "bandwidth", gbs[FAST], "GB/s",
          "stream_triad", gbs[TRIAD] },
        { "01", "openblas_dgemv", size, 1, 1, "bandwidth", gbs[DGEMV], "GB/s",
          NULL, 0 },
        { "01", "stream_triad", "3x2^23", 1, 1, "bandwidth", gbs[TRIAD],
          "GB/s", NULL, 0 },
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        bench_record(csv, &rows[k]);
    if (csv != NULL)
        fclose(csv);
    printf("targets: fast/openblas_dgemv >= 1.2: %.2f; fast/stream_triad >= "
           "0.9: %.2f\n", gbs[FAST] / gbs[DGEMV], gbs[FAST] / gbs[TRIAD]);

    triad_free(&triad);
    matrix_free(A);
    matrix_free(x);
    matrix_free(y);
    matrix_free(expected);
    matrix_free(bound);
    return 0;
}
