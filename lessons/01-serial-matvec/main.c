/* Lesson 01's driver: generates A and x from a seed, checks both of your
 * kernels against a reference, then times them side by side with STREAM's
 * triad, the memory bandwidth a plain loop reaches on this machine.
 * You do not need to change this file. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "compare.h"
#include "format_bytes.h"
#include "matrix.h"
#include "matvec.h"
#include "reference.h"
#include "stream.h"
#include "timer.h"

typedef void matvec_fn(size_t m, size_t n, const double *A, const double *x,
                       double *y);

/* Runs `kernel` once and compares with the reference; stops the program on a
 * wrong answer, since timing a wrong kernel means nothing. */
static void check_kernel(const char *name, matvec_fn *kernel, size_t m,
                         size_t n, const double *A, const double *x,
                         double *y, const double *expected,
                         const double *bound)
{
    char text[512];
    for (size_t i = 0; i < m; i++)
        y[i] = NAN; /* a y[i] the kernel forgot cannot pass */
    kernel(m, n, A, x, y);
    comparison_t c = compare_within(expected, y, bound, m);
    comparison_describe(&c, "y", text, sizeof text);
    if (!comparison_ok(&c)) {
        fprintf(stderr, "matvec: %s is wrong: %s\n", name, text);
        exit(1);
    }
    printf("  %-6s right: every y[i] within its error bound\n", name);
}

/* Matvec's fast version has restrict-qualified parameters; both are called
 * through one type. */
static void call_fast(size_t m, size_t n, const double *A, const double *x,
                      double *y)
{
    matvec_fast(m, n, A, x, y);
}

int main(int argc, char **argv)
{
    size_t m = 4096, n = 4096;
    uint64_t seed = 1;
    int reps = 10;
    const cli_option options[] = {
        { "m", CLI_SIZE, &m, "rows of A", 1, 1u << 30 },
        { "n", CLI_SIZE, &n, "columns of A", 1, 1u << 30 },
        { "seed", CLI_SEED, &seed, "seed that A and x are generated from",
          0, 0 },
        { "reps", CLI_INT, &reps, "timed repetitions of each kernel", 1,
          TIMINGS_MAX },
    };
    const cli_spec spec = { "matvec", "lesson 01: y = Ax on one core, "
                            "checked and timed", options,
                            sizeof options / sizeof options[0] };
    cli_parse_or_exit(&spec, argc, argv, false);

    char human[32];
    size_t bytes_a;
    if (!matrix_bytes(m, n, &bytes_a)) {
        fprintf(stderr, "matvec: A of %zu x %zu doubles is too large\n", m, n);
        return 2;
    }
    format_bytes((double)bytes_a, human, sizeof human);
    printf("matvec: y = Ax, A is %zu x %zu (%s), seed %" PRIu64 "\n", m, n,
           human, seed);

    double *A = matrix_alloc_or_exit(m, n, "A");
    double *x = vector_alloc_or_exit(n, "x");
    double *y = vector_alloc_or_exit(m, "y");
    double *expected = vector_alloc_or_exit(m, "reference y");
    double *bound = vector_alloc_or_exit(m, "error bounds");
    /* Every buffer, the triad's too, before any work: memory that runs out
     * stops the program before the checks, not after them. */
    triad_arrays triad = triad_alloc_or_exit(TRIAD_DEFAULT_N);
    matrix_fill_random(A, m, n, 0, 0, seed);
    vector_fill_random(x, n, 0, seed);
    reference_matvec(m, n, A, x, expected, bound);

    check_kernel("naive", matvec_naive, m, n, A, x, y, expected, bound);
    check_kernel("fast", call_fast, m, n, A, x, y, expected, bound);

    /* Repetitions of the three kernels interleaved, so that whatever else
     * the machine is doing slows all three alike; medians reported. */
    static double seconds[3][TIMINGS_MAX];
    triad_once(&triad);
    for (int r = 0; r < reps; r++) {
        double start = timer_now();
        matvec_naive(m, n, A, x, y);
        seconds[0][r] = timer_now() - start;
        start = timer_now();
        matvec_fast(m, n, A, x, y);
        seconds[1][r] = timer_now() - start;
        seconds[2][r] = triad_once(&triad);
    }
    /* A matvec reads A and x and writes y once: 8(mn + n + m) bytes for
     * 2mn flops. */
    double bytes = 8.0 * ((double)m * (double)n + (double)n + (double)m);
    double flops = 2.0 * (double)m * (double)n;
    double triad_gbs = triad_bytes(triad.n) / timings_median(seconds[2], reps)
                       / 1e9;
    const char *names[2] = { "naive", "fast" };
    double gbs[2];
    printf("\n  %-6s %10s %8s %9s %10s   (medians of %d)\n", "kernel",
           "time (ms)", "GB/s", "GFLOP/s", "of triad", reps);
    for (int k = 0; k < 2; k++) {
        double t = timings_median(seconds[k], reps);
        gbs[k] = bytes / t / 1e9;
        printf("  %-6s %10.3f %8.2f %9.2f %9.0f%%\n", names[k], 1e3 * t,
               gbs[k], flops / t / 1e9, 100.0 * gbs[k] / triad_gbs);
    }
    printf("  %-6s %10.3f %8.2f %9s %9s\n", "triad",
           1e3 * timings_median(seconds[2], reps), triad_gbs, "-", "100%");
    printf("summary: naive_gbs=%.2f fast_gbs=%.2f triad_gbs=%.2f "
           "fast_of_triad=%.2f\n", gbs[0], gbs[1], triad_gbs,
           gbs[1] / triad_gbs);

    triad_free(&triad);
    matrix_free(A);
    matrix_free(x);
    matrix_free(y);
    matrix_free(expected);
    matrix_free(bound);
    return 0;
}
