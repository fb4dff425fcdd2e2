/* Lesson 03's driver: generates A, a lower-triangular L and x from a seed,
 * checks your threaded products (TODO 1-3: the numbers, and for TODO 1-2
 * the row log of compute_rows.h: every row computed once, by a team of
 * the threads asked for) and padded counters (TODO 4), then times them
 * side by side with the serial kernel they share out.
 * You do not need to change this file.
 *
 *   OMP_NUM_THREADS=2 build/student/03-openmp/openmp
 *   build/student/03-openmp/openmp --threads 2 --m 4096 --n 4096 --reps 10 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <omp.h>

#include "cli.h"
#include "compare.h"
#include "compute_rows.h"
#include "counters.h"
#include "format_bytes.h"
#include "kernels.h"
#include "matrix.h"
#include "omp_matvec.h"
#include "reference.h"
#include "timer.h"

/* What the driver runs and times, in this order in each round. */
enum {
    SERIAL, ROWS, TRI_SERIAL, TRI_STATIC, TRI_DYNAMIC, TRI_GUIDED, COLUMNS,
    ADJACENT, PADDED, VARIANTS
};
static const char *const names[VARIANTS] = {
    "serial", "rows", "tri serial", "tri static", "tri dynamic",
    "tri guided", "columns", "adjacent", "padded"
};
/* The TODO each variant tests, for messages. */
static const char *const todos[VARIANTS] = {
    "", "TODO 1", "", "TODO 2", "TODO 2", "TODO 2", "TODO 3", "", "TODO 4"
};
static const omp_sched_t schedules[3] = { omp_sched_static, omp_sched_dynamic,
                                          omp_sched_guided };

/* Increments each thread makes in the false-sharing demo: enough for the
 * slow layout to take a visible time, few enough to repeat. */
enum { EVENTS = 1 << 21 };

typedef struct {
    size_t m, n;
    int threads;
    const double *A, *L, *x;  /* A is (m, n), L is (n, n), x is (n) */
    double *y, *partials;     /* y is (max(m, n)), partials (threads, m) */
    long *adjacent, *padded;  /* counters, one per thread */
} workload;

/* The triangular product on one thread, row by row, as TODO 2 must
 * compute each row. L is (n, n), x is (n), y is (n). */
static void triangular_serial(size_t n, const double *L, const double *x,
                              double *y)
{
    for (size_t i = 0; i < n; i++)
        matvec_rows(1, i + 1, &L[i * n], n, x, &y[i]);
}

/* Runs one variant once. */
static void run(const workload *w, int variant)
{
    switch (variant) {
    case SERIAL:
        matvec_rows(w->m, w->n, w->A, w->n, w->x, w->y);
        break;
    case ROWS:
        matvec_omp_rows(w->m, w->n, w->A, w->x, w->y);
        break;
    case COLUMNS:
        matvec_omp_columns(w->m, w->n, w->A, w->x, w->y, w->partials);
        break;
    case TRI_SERIAL:
        triangular_serial(w->n, w->L, w->x, w->y);
        break;
    case TRI_STATIC:
    case TRI_DYNAMIC:
    case TRI_GUIDED:
        /* Chunk 0: the schedule's default (static: one block per thread;
         * dynamic: one row at a time; guided: shrinking blocks). */
        omp_set_schedule(schedules[variant - TRI_STATIC], 0);
        matvec_omp_triangular(w->n, w->L, w->x, w->y);
        break;
    case ADJACENT:
        count_events(w->adjacent, adjacent_counter, w->threads, EVENTS);
        break;
    case PADDED:
        count_events(w->padded, padded_counter, w->threads, EVENTS);
        break;
    }
}

static void pause_ms(int ms)
{
    struct timespec pause = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&pause, NULL);
}

/* Stops the program when a variant is wrong: timing a wrong answer means
 * nothing. */
static void expect_right(int variant, const comparison_t *c, const char *how)
{
    char text[512];
    if (comparison_ok(c)) {
        printf("  %-11s right: %s\n", names[variant], how);
        return;
    }
    comparison_describe(c, "y", text, sizeof text);
    fprintf(stderr, "openmp: %s (%s) is wrong: %s\n", names[variant],
            todos[variant], text);
    exit(1);
}

/* Stops the program unless the row log saw each of `rows` rows computed
 * once, by a team of w->threads threads (TODO 1-2). */
static void expect_rows_once(const workload *w, int variant, size_t rows)
{
    int *times = malloc((rows > 0 ? rows : 1) * sizeof *times);
    int *team = malloc((rows > 0 ? rows : 1) * sizeof *team);
    if (times == NULL || team == NULL) {
        fprintf(stderr, "openmp: out of memory for the row log\n");
        exit(1);
    }
    size_t outside = row_log_stop(times, NULL, team);
    bool once = outside == 0;
    for (size_t r = 0; r < rows && once; r++) {
        if (times[r] != 1) {
            fprintf(stderr, "openmp: %s (%s): row %zu was computed %d "
                    "times, not once%s\n", names[variant], todos[variant], r,
                    times[r], times[r] == 0 ? " (every row goes through "
                    "compute_rows)" : ": do two threads' rows overlap?");
            once = false;
        } else if (team[r] != w->threads) {
            fprintf(stderr, "openmp: %s (%s): row %zu was computed by a "
                    "team of %d thread%s, not %d: is there a parallel loop "
                    "around the rows?\n", names[variant], todos[variant], r,
                    team[r], team[r] == 1 ? "" : "s", w->threads);
            once = false;
        }
    }
    if (outside > 0)
        fprintf(stderr, "openmp: %s (%s): %zu rows beyond the last were "
                "computed\n", names[variant], todos[variant], outside);
    free(times);
    free(team);
    if (!once)
        exit(1);
}

/* Checks every product once against its standard (TODO 1-3), and for the
 * row and triangular products what the row log saw. */
static void check_products(const workload *w, const double *serial_y,
                           const double *triangular_y,
                           const double *reference_y, const double *bound)
{
    size_t m = w->m, n = w->n;
    for (int v = ROWS; v <= COLUMNS; v++) {
        if (v == TRI_SERIAL)
            continue;
        for (size_t i = 0; i < (m > n ? m : n); i++)
            w->y[i] = NAN; /* a y[i] nobody wrote cannot pass */
        size_t rows = v == ROWS ? m : n;
        if (v != COLUMNS && !row_log_start(rows)) {
            fprintf(stderr, "openmp: out of memory for the row log\n");
            exit(1);
        }
        run(w, v);
        if (v != COLUMNS)
            expect_rows_once(w, v, rows);
        comparison_t c;
        if (v == ROWS) {
            c = compare_bitwise(serial_y, w->y, m);
            expect_right(v, &c, "bitwise equal to the serial kernel, each "
                         "row once");
        } else if (v == COLUMNS) {
            c = compare_within(reference_y, w->y, bound, m);
            expect_right(v, &c, "every y[i] within its error bound");
        } else {
            c = compare_bitwise(triangular_y, w->y, n);
            expect_right(v, &c, "bitwise equal to the serial rows, each "
                         "row once");
        }
    }
}

/* Checks both counter layouts once: the demo's counts, and where the
 * padded counters sit (TODO 4). */
static void check_counters(const workload *w)
{
    for (int v = ADJACENT; v <= PADDED; v++) {
        long *counters = v == ADJACENT ? w->adjacent : w->padded;
        counter_slot_fn *slot = v == ADJACENT ? adjacent_counter
                                              : padded_counter;
        run(w, v);
        for (int t = 0; t < w->threads; t++) {
            long *counter = slot(counters, t);
            if (*counter != EVENTS) {
                fprintf(stderr, "openmp: %s counters (%s): thread %d counted "
                        "%ld, expected %d\n", names[v], todos[v], t, *counter,
                        EVENTS);
                exit(1);
            }
            if (v == PADDED && ((uintptr_t)counter % CACHE_LINE_BYTES != 0)) {
                fprintf(stderr, "openmp: padded counters (TODO 4): thread "
                        "%d's counter is not at the start of a cache line\n",
                        t);
                exit(1);
            }
        }
        printf("  %-11s right: every thread counted %d events\n", names[v],
               EVENTS);
    }
}

int main(int argc, char **argv)
{
    size_t m = 4096, n = 4096;
    uint64_t seed = 1;
    /* One thread per core unless OMP_NUM_THREADS says otherwise; a machine
     * with more cores than MAX_THREADS gets MAX_THREADS, but asking for
     * more is bad input (below). */
    int threads = omp_get_max_threads();
    bool threads_from_environment = getenv("OMP_NUM_THREADS") != NULL;
    if (threads > MAX_THREADS && !threads_from_environment)
        threads = MAX_THREADS;
    int reps = 10;
    const cli_option options[] = {
        { "m", CLI_SIZE, &m, "rows of A", 1, 1u << 30 },
        { "n", CLI_SIZE, &n, "columns of A, and rows and columns of L", 1,
          1u << 30 },
        { "seed", CLI_SEED, &seed, "seed that A, L and x are generated from",
          0, 0 },
        { "threads", CLI_INT, &threads, "OpenMP threads (the default "
          "comes from OMP_NUM_THREADS, else one per core)", 1, MAX_THREADS },
        { "reps", CLI_INT, &reps, "timed repetitions of each variant", 1,
          TIMINGS_MAX },
    };
    const cli_spec spec = { "openmp", "lesson 03: y = Ax on OpenMP threads: "
                            "rows, a triangular product under three "
                            "schedules, columns; false sharing", options,
                            sizeof options / sizeof options[0] };
    cli_parse_or_exit(&spec, argc, argv, false);
    if (threads > MAX_THREADS) {
        /* Only OMP_NUM_THREADS gets here: --threads is checked above. */
        fprintf(stderr, "openmp: OMP_NUM_THREADS asks for %d threads, more "
                "than this program's maximum of %d (--threads)\n", threads,
                MAX_THREADS);
        cli_print_usage(&spec, stderr);
        return 2;
    }
    /* Exactly that many: with OMP_DYNAMIC=true the runtime could give a
     * region fewer, and the row log's check would blame your code. */
    omp_set_dynamic(0);
    omp_set_num_threads(threads);

    size_t bytes_a, bytes_l, bytes_partials;
    if (!matrix_bytes(m, n, &bytes_a) || !matrix_bytes(n, n, &bytes_l) ||
        !matrix_bytes((size_t)threads, m, &bytes_partials)) {
        fprintf(stderr, "openmp: A of %zu x %zu doubles, L of %zu x %zu or "
                "the partial results are too large\n", m, n, n, n);
        return 2;
    }
    char human_a[32], human_l[32];
    format_bytes((double)bytes_a, human_a, sizeof human_a);
    format_bytes((double)bytes_l, human_l, sizeof human_l);
    printf("openmp: y = Ax, A is %zu x %zu (%s); y = Lx, L is %zu x %zu "
           "lower-triangular (%s); %d thread%s, seed %" PRIu64 "\n", m, n,
           human_a, n, n, human_l, threads, threads == 1 ? "" : "s", seed);

    double *A = matrix_alloc_or_exit(m, n, "A");
    double *L = matrix_alloc_or_exit(n, n, "L");
    double *x = vector_alloc_or_exit(n, "x");
    double *y = vector_alloc_or_exit(m > n ? m : n, "y");
    double *serial_y = vector_alloc_or_exit(m, "serial y");
    double *triangular_y = vector_alloc_or_exit(n, "serial triangular y");
    double *reference_y = vector_alloc_or_exit(m, "reference y");
    double *bound = vector_alloc_or_exit(m, "error bounds");
    double *partials = matrix_alloc_or_exit((size_t)threads, m, "partial ys");
    matrix_fill_random(A, m, n, 0, 0, seed);
    matrix_fill_random(L, n, n, 0, 0, seed + 1);
    /* Above the diagonal, NaN: a product that reads there shows it. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            L[i * n + j] = NAN;
    vector_fill_random(x, n, 0, seed);
    matvec_rows(m, n, A, n, x, serial_y);
    triangular_serial(n, L, x, triangular_y);
    reference_matvec(m, n, A, x, reference_y, bound);

    workload w = { m, n, threads, A, L, x, y, partials, NULL, NULL };
    check_products(&w, serial_y, triangular_y, reference_y, bound);
    w.adjacent = adjacent_counters_alloc(threads);
    w.padded = padded_counters_alloc(threads);
    if (w.adjacent == NULL || w.padded == NULL) {
        fprintf(stderr, "openmp: cannot allocate the counters%s\n",
                w.padded == NULL && w.adjacent != NULL ? " (TODO 4)" : "");
        return 2;
    }
    check_counters(&w);

    /* Repetitions interleaved, the order rotated each round, so that
     * whatever else the machine does slows every variant alike; medians
     * reported. OpenMP's idle threads spin for a few milliseconds after a
     * region before they sleep, and a spinning thread holds a core (on a
     * virtual machine, perhaps the other half of the same physical core);
     * so each timing starts after a pause in which they go to sleep, and
     * one untimed call of the same variant, which wakes its own threads. */
    enum { PAUSE_MS = 20 };
    static double seconds[VARIANTS][TIMINGS_MAX];
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < VARIANTS; k++) {
            int v = (r + k) % VARIANTS;
            pause_ms(PAUSE_MS);
            run(&w, v);
            double start = timer_now();
            run(&w, v);
            seconds[v][r] = timer_now() - start;
        }

    double median[VARIANTS];
    for (int v = 0; v < VARIANTS; v++)
        median[v] = timings_median(seconds[v], reps);
    /* Bytes each product must move: A (or L's lower triangle) once, x
     * once, y once. */
    double full_bytes = 8.0 * ((double)m * (double)n + (double)m + (double)n);
    double tri_bytes = 8.0 * ((double)n * ((double)n + 1.0) / 2.0 +
                              2.0 * (double)n);
    printf("\n  %-11s %10s %8s %10s   (%d thread%s, medians of %d)\n",
           "variant", "time (ms)", "GB/s", "speed-up", threads,
           threads == 1 ? "" : "s", reps);
    for (int v = 0; v < VARIANTS; v++) {
        if (v >= ADJACENT) {
            /* Speed-up here is padded over adjacent: the cost of sharing. */
            printf("  %-11s %10.3f %8s %9.2fx   (%d increments per thread)\n",
                   names[v], 1e3 * median[v], "-",
                   median[ADJACENT] / median[v], EVENTS);
            continue;
        }
        bool triangular = v >= TRI_SERIAL && v <= TRI_GUIDED;
        double base = median[triangular ? TRI_SERIAL : SERIAL];
        printf("  %-11s %10.3f %8.2f %9.2fx\n", names[v], 1e3 * median[v],
               (triangular ? tri_bytes : full_bytes) / median[v] / 1e9,
               base / median[v]);
    }
    printf("summary: threads=%d rows_speedup=%.2f columns_speedup=%.2f "
           "static_speedup=%.2f dynamic_speedup=%.2f guided_speedup=%.2f "
           "false_sharing_slowdown=%.2f\n", threads,
           median[SERIAL] / median[ROWS], median[SERIAL] / median[COLUMNS],
           median[TRI_SERIAL] / median[TRI_STATIC],
           median[TRI_SERIAL] / median[TRI_DYNAMIC],
           median[TRI_SERIAL] / median[TRI_GUIDED],
           median[ADJACENT] / median[PADDED]);

    free(w.adjacent);
    free(w.padded);
    matrix_free(A);
    matrix_free(L);
    matrix_free(x);
    matrix_free(y);
    matrix_free(serial_y);
    matrix_free(triangular_y);
    matrix_free(reference_y);
    matrix_free(bound);
    matrix_free(partials);
    return 0;
}
