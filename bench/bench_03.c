/* Lesson 03's benchmark: the reference solution's threaded products against
 * OpenBLAS's cblas_dgemv at the same thread count, the triangular product
 * under three schedules, the column split against the row split, and the
 * false-sharing demo, padded against adjacent. A and L are 8192 x 8192
 * doubles (512 MiB each), far out of any cache.
 *
 * Repetitions are interleaved (every variant once per round, the order
 * rotated each round) so that a busy neighbour slows all of them alike;
 * medians are reported; every buffer is allocated and written before the
 * first timing. Both OpenMP's and OpenBLAS's idle threads keep spinning for
 * a while after a call (OpenBLAS's for about 0.1 s), and on a machine with
 * few cores they would steal the next variant's cores; so each timing
 * starts after a pause in which they go to sleep (--pause-ms), then one
 * untimed call of the same variant, which wakes its own threads. */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "cli.h"
#include "compare.h"
#include "counters.h"
#include "kernels.h"
#include "matrix.h"
#include "omp_matvec.h"
#include "reference.h"
#include "timer.h"

enum {
    ROWS_1, DGEMV_1, ROWS_2, DGEMV_2, COLUMNS_2, TRI_STATIC_2, TRI_DYNAMIC_2,
    TRI_GUIDED_2, ADJACENT_2, PADDED_2, VARIANTS
};
static const char *const names[VARIANTS] = {
    "rows", "openblas_dgemv", "rows", "openblas_dgemv", "columns",
    "tri_static", "tri_dynamic", "tri_guided", "counters_adjacent",
    "counters_padded"
};
static const int thread_counts[VARIANTS] = { 1, 1, 2, 2, 2, 2, 2, 2, 2, 2 };

/* Increments per thread in the false-sharing demo. */
enum { EVENTS = 1 << 22 };

typedef struct {
    size_t n;
    const double *A, *L, *x;  /* A and L are (n, n), x is (n) */
    double *y, *partials;     /* y is (n), partials is (2, n) */
    long *adjacent, *padded;  /* counters, one per thread (2) */
} workload;

static void run(const workload *w, int variant)
{
    int threads = thread_counts[variant];
    int n = (int)w->n;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    switch (variant) {
    case ROWS_1:
    case ROWS_2:
        matvec_omp_rows(w->n, w->n, w->A, w->x, w->y);
        break;
    case DGEMV_1:
    case DGEMV_2:
        cblas_dgemv(CblasRowMajor, CblasNoTrans, n, n, 1.0, w->A, n, w->x, 1,
                    0.0, w->y, 1);
        break;
    case COLUMNS_2:
        matvec_omp_columns(w->n, w->n, w->A, w->x, w->y, w->partials);
        break;
    case TRI_STATIC_2:
    case TRI_DYNAMIC_2:
    case TRI_GUIDED_2: {
        static const omp_sched_t kinds[3] = {
            omp_sched_static, omp_sched_dynamic, omp_sched_guided
        };
        omp_set_schedule(kinds[variant - TRI_STATIC_2], 0);
        matvec_omp_triangular(w->n, w->L, w->x, w->y);
        break;
    }
    case ADJACENT_2:
        count_events(w->adjacent, adjacent_counter, threads, EVENTS);
        break;
    case PADDED_2:
        count_events(w->padded, padded_counter, threads, EVENTS);
        break;
    }
}

static void pause_ms(int ms)
{
    struct timespec pause = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&pause, NULL);
}

/* Stops the benchmark on a wrong answer: a fast wrong answer is not a
 * result. */
static void expect_right(int variant, const comparison_t *c)
{
    if (comparison_ok(c))
        return;
    char text[512];
    comparison_describe(c, "y", text, sizeof text);
    fprintf(stderr, "bench_03: %s on %d threads is wrong: %s\n",
            names[variant], thread_counts[variant], text);
    exit(1);
}

int main(int argc, char **argv)
{
    size_t n = 8192;
    int reps = 10, pause = 150;
    const cli_option options[] = {
        { "n", CLI_SIZE, &n, "A and L are n x n", 1, 1u << 17 },
        { "reps", CLI_INT, &reps, "interleaved repetitions", 1,
          TIMINGS_MAX },
        { "pause-ms", CLI_INT, &pause, "idle time before each timing, so "
          "that spinning threads of the previous variant go to sleep", 0,
          10000 },
    };
    const cli_spec spec = { "bench_03", "lesson 03 against OpenBLAS dgemv "
                            "at 1 and 2 threads; schedules; false sharing",
                            options, sizeof options / sizeof options[0] };
    cli_parse_or_exit(&spec, argc, argv, false);

    double *A = matrix_alloc_or_exit(n, n, "A");
    double *L = matrix_alloc_or_exit(n, n, "L");
    double *x = vector_alloc_or_exit(n, "x");
    double *y = vector_alloc_or_exit(n, "y");
    double *serial = vector_alloc_or_exit(n, "serial y");
    double *triangular = vector_alloc_or_exit(n, "serial triangular y");
    double *expected = vector_alloc_or_exit(n, "reference");
    double *bound = vector_alloc_or_exit(n, "bound");
    double *partials = matrix_alloc_or_exit(2, n, "partials");
    long *adjacent = adjacent_counters_alloc(2);
    long *padded = padded_counters_alloc(2);
    if (adjacent == NULL || padded == NULL) {
        fprintf(stderr, "bench_03: cannot allocate the counters\n");
        return 2;
    }
    matrix_fill_random(A, n, n, 0, 0, 1);
    matrix_fill_random(L, n, n, 0, 0, 2);
    vector_fill_random(x, n, 0, 1);
    matvec_rows(n, n, A, n, x, serial);
    for (size_t i = 0; i < n; i++)
        matvec_rows(1, i + 1, &L[i * n], n, x, &triangular[i]);
    reference_matvec(n, n, A, x, expected, bound);
    workload w = { n, A, L, x, y, partials, adjacent, padded };

    /* Each variant once, checked (which also starts every thread pool). */
    for (int v = 0; v < VARIANTS; v++) {
        run(&w, v);
        comparison_t c;
        if (v == ROWS_1 || v == ROWS_2)
            c = compare_bitwise(serial, y, n);
        else if (v == DGEMV_1 || v == DGEMV_2 || v == COLUMNS_2)
            c = compare_within(expected, y, bound, n);
        else if (v >= TRI_STATIC_2 && v <= TRI_GUIDED_2)
            c = compare_bitwise(triangular, y, n);
        else
            continue;
        expect_right(v, &c);
    }

    static double seconds[VARIANTS][TIMINGS_MAX];
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < VARIANTS; k++) {
            int v = (r + k) % VARIANTS;
            pause_ms(pause);
            run(&w, v);
            double start = timer_now();
            run(&w, v);
            seconds[v][r] = timer_now() - start;
        }

    double full_bytes = 8.0 * ((double)n * (double)n + 2.0 * (double)n);
    double tri_bytes = 8.0 * ((double)n * ((double)n + 1.0) / 2.0 +
                              2.0 * (double)n);
    double value[VARIANTS];
    for (int v = 0; v < VARIANTS; v++) {
        double t = timings_median(seconds[v], reps);
        if (v >= ADJACENT_2)
            value[v] = 2.0 * EVENTS / t / 1e6; /* million increments/s */
        else
            value[v] = (v >= TRI_STATIC_2 ? tri_bytes : full_bytes) / t / 1e9;
    }

    char size[32];
    snprintf(size, sizeof size, "%zux%zu", n, n);
    FILE *csv = bench_csv_open();
    printf("lesson 03: y = Ax on OpenMP threads, A and L %s doubles, medians "
           "of %d interleaved repetitions, each after a %d ms pause and a "
           "warm-up call\n", size, reps, pause);
    printf("  %-4s %-16s %-11s %3s %3s  %-10s %10s %-8s %-16s %s\n", "less",
           "variant", "size", "thr", "rks", "metric", "value", "unit",
           "baseline", "ratio");
    const bench_row rows[] = {
        { "03", "rows", size, 1, 1, "bandwidth", value[ROWS_1], "GB/s",
          "openblas_dgemv", value[DGEMV_1] },
        { "03", "openblas_dgemv", size, 1, 1, "bandwidth", value[DGEMV_1],
          "GB/s", NULL, 0 },
        { "03", "rows", size, 2, 1, "bandwidth", value[ROWS_2], "GB/s",
          "openblas_dgemv", value[DGEMV_2] },
        { "03", "openblas_dgemv", size, 2, 1, "bandwidth", value[DGEMV_2],
          "GB/s", NULL, 0 },
        { "03", "rows", size, 2, 1, "bandwidth", value[ROWS_2], "GB/s",
          "rows_1_thread", value[ROWS_1] },
        { "03", "columns", size, 2, 1, "bandwidth", value[COLUMNS_2], "GB/s",
          "rows", value[ROWS_2] },
        { "03", "tri_static", size, 2, 1, "bandwidth", value[TRI_STATIC_2],
          "GB/s", NULL, 0 },
        { "03", "tri_dynamic", size, 2, 1, "bandwidth", value[TRI_DYNAMIC_2],
          "GB/s", "tri_static", value[TRI_STATIC_2] },
        { "03", "tri_guided", size, 2, 1, "bandwidth", value[TRI_GUIDED_2],
          "GB/s", "tri_static", value[TRI_STATIC_2] },
        { "03", "counters_adjacent", "2x2^22", 2, 1, "rate",
          value[ADJACENT_2], "M/s", NULL, 0 },
        { "03", "counters_padded", "2x2^22", 2, 1, "rate", value[PADDED_2],
          "M/s", "counters_adjacent", value[ADJACENT_2] },
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++)
        bench_record(csv, &rows[k]);
    if (csv != NULL)
        fclose(csv);
    printf("targets: rows/openblas_dgemv at 2 threads >= 1.2: %.2f; "
           "rows at 2 threads over 1: %.2f; columns/rows: %.2f; "
           "guided/static: %.2f; padded/adjacent: %.2f\n",
           value[ROWS_2] / value[DGEMV_2], value[ROWS_2] / value[ROWS_1],
           value[COLUMNS_2] / value[ROWS_2],
           value[TRI_GUIDED_2] / value[TRI_STATIC_2],
           value[PADDED_2] / value[ADJACENT_2]);

    free(adjacent);
    free(padded);
    matrix_free(A);
    matrix_free(L);
    matrix_free(x);
    matrix_free(y);
    matrix_free(serial);
    matrix_free(triangular);
    matrix_free(expected);
    matrix_free(bound);
    matrix_free(partials);
    return 0;
}
