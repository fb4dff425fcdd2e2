/* Lesson 03's producer (tests/harness/producer.h): runs your threaded
 * products and padded counters on the tests' cases, and writes what they
 * computed together with what the given code saw of how they ran. It
 * decides nothing; the tests (tests/test_03-openmp.c) do. The tables of
 * shapes, orders and schedules are in 03-openmp.h.
 *   rows THREADS SHAPE   matvec_omp_rows on shapes[SHAPE], A and x from
 *                        A.bin and x.bin; writes y.bin, and A.bin and x.bin
 *                        again as the product left them (it must only read
 *                        them), and the row log (below)
 *   triangular THREADS SCHEDULE
 *                        matvec_omp_triangular under the schedule the
 *                        tests set in OMP_SCHEDULE (schedules[SCHEDULE]),
 *                        on each order K of triangular_orders, L and x from
 *                        L-K.bin and x-K.bin; writes y-K.bin and the row log
 *                        of that call with the suffix -K; and schedule.bin:
 *                        the kind and chunk omp_get_schedule() reports, two
 *                        ints, to show that the setting arrived
 *   columns THREADS      matvec_omp_columns COLUMN_CALLS times on each
 *                        column shape K, A and x generated here from
 *                        CASE_SEED as the tests generate them; after call C
 *                        writes y-K-C.bin and partials-K-C.bin (the rows of
 *                        partials of THREADS threads)
 *   counters THREADS     padded_counters_alloc(THREADS): writes block.bin
 *                        (its address as a uintptr_t, 0 for NULL); then
 *                        addresses.bin (padded_counter of each thread, as
 *                        uintptr_t), and after count_events, counts.bin (the
 *                        long at each of those addresses)
 * The three products run on exactly THREADS threads (omp_set_num_threads,
 * dynamic adjustment off: with OMP_DYNAMIC=true in someone's environment
 * the runtime could give a region fewer). The row log (compute_rows.h) of
 * a call of the row or triangular product is three files of one int per
 * row: times.bin (how many times compute_rows computed the row), thread.bin
 * and team.bin (the thread number and team size that computed it, -1 for
 * none), and outside.bin, one size_t: rows computed beyond the last. The
 * column split does not go through compute_rows; it writes threads.bin:
 * two ints, the threads this process had before the first call and after
 * the last, or -1 where they cannot be counted. Every y and every row of
 * partials starts as NaN, so an element never written shows. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "03-openmp.h"
#include "compute_rows.h"
#include "counters.h"
#include "matrix.h"
#include "omp_matvec.h"
#include "producer.h"

_Static_assert(omp_sched_static == 1 && omp_sched_dynamic == 2 &&
               omp_sched_guided == 3, "the kinds in 03-openmp.h are the "
               "OpenMP standard's");

/* ARG k, which must be at least `low` and below `high`; a bad command line
 * exits with status 2, as producer_main does for its own checks. */
static size_t arg_in(int k, size_t low, size_t high, const char *what)
{
    size_t value = producer_arg(k);
    if (value < low || value >= high) {
        fprintf(stderr, "producer: %s %zu is not in %zu .. %zu\n", what,
                value, low, high - 1);
        exit(2);
    }
    return value;
}

static void use_threads(int threads)
{
    omp_set_dynamic(0);
    omp_set_num_threads(threads);
}

static void fill_nan(double *v, size_t count)
{
    for (size_t k = 0; k < count; k++)
        v[k] = NAN;
}

/* The threads this process has now: one entry each in /proc/self/task
 * (Linux); -1 where that folder does not exist (macOS, the BSDs). The
 * process starts with one thread, and OpenMP keeps the threads of a
 * parallel region alive afterwards, waiting for the next one; so the count
 * after a call tells the tests how many threads the call started. */
static int threads_alive(void)
{
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL)
        return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(tasks)) != NULL)
        if (entry->d_name[0] != '.')
            count++;
    closedir(tasks);
    return count;
}

static void produce_threads(int before)
{
    int seen[2] = { before, threads_alive() };
    produce("threads", seen, sizeof seen[0], 2);
}

static void start_row_log(size_t rows)
{
    if (!row_log_start(rows)) {
        fprintf(stderr, "producer: out of memory for the row log\n");
        exit(1);
    }
}

/* Arms the hold for a product of `rows` rows on `threads` threads where
 * every thread has rows (03-openmp.h's HOLD_MIN_ROWS). */
static void arm_hold(size_t rows, int threads)
{
    if (threads >= 2 && rows >= HOLD_MIN_ROWS)
        row_log_hold_first(HOLD_MS);
}

/* Stops the row log of `rows` rows and writes it, each name followed by
 * `suffix` ("" or "-K"), with what the hold saw (hold: two ints, the
 * outcome and how long it held, ROW_LOG_HOLD_OFF when not armed). */
static void produce_row_log(size_t rows, const char *suffix)
{
    int hold[2];
    hold[0] = row_log_hold_outcome(&hold[1]);
    int *times = producer_alloc(rows, sizeof *times, "row log");
    int *thread = producer_alloc(rows, sizeof *thread, "row log");
    int *team = producer_alloc(rows, sizeof *team, "row log");
    size_t outside = row_log_stop(times, thread, team);
    char name[48];
    snprintf(name, sizeof name, "times%s", suffix);
    produce(name, times, sizeof *times, rows);
    snprintf(name, sizeof name, "thread%s", suffix);
    produce(name, thread, sizeof *thread, rows);
    snprintf(name, sizeof name, "team%s", suffix);
    produce(name, team, sizeof *team, rows);
    snprintf(name, sizeof name, "outside%s", suffix);
    produce(name, &outside, sizeof outside, 1);
    snprintf(name, sizeof name, "hold%s", suffix);
    produce(name, hold, sizeof hold[0], 2);
    free(times);
    free(thread);
    free(team);
}

static void run_rows(void)
{
    int threads = (int)arg_in(0, 1, MAX_TEST_THREADS + 1, "THREADS");
    const shape *s = &shapes[arg_in(1, 0, shape_count, "SHAPE")];
    double *A = producer_input("A", sizeof *A, s->m * s->n);
    double *x = producer_input("x", sizeof *x, s->n);
    double *y = producer_alloc(s->m, sizeof *y, "y");
    fill_nan(y, s->m);
    use_threads(threads);
    start_row_log(s->m);
    arm_hold(s->m, threads);

    matvec_omp_rows(s->m, s->n, A, x, y);

    produce_row_log(s->m, "");
    produce("y", y, sizeof *y, s->m);
    produce("A", A, sizeof *A, s->m * s->n);
    produce("x", x, sizeof *x, s->n);
    free(A);
    free(x);
    free(y);
}

static void run_triangular(void)
{
    int threads = (int)arg_in(0, 1, MAX_TEST_THREADS + 1, "THREADS");
    (void)arg_in(1, 0, schedule_count, "SCHEDULE");
    use_threads(threads);
    /* The schedule is the tests' OMP_SCHEDULE, untouched here: what the
     * runtime made of it goes to the tests. */
    omp_sched_t kind;
    int chunk;
    omp_get_schedule(&kind, &chunk);
    /* OpenMP 5 may add the monotonic modifier, the kind's top bit. */
    int schedule[2] = { (int)((unsigned)kind & 0x7fffffffu), chunk };
    produce("schedule", schedule, sizeof schedule[0], 2);
    for (int k = 0; k < order_count; k++) {
        size_t n = triangular_orders[k];
        char name[48];
        snprintf(name, sizeof name, "L-%d", k);
        double *L = producer_input(name, sizeof *L, n * n);
        snprintf(name, sizeof name, "x-%d", k);
        double *x = producer_input(name, sizeof *x, n);
        double *y = producer_alloc(n, sizeof *y, "y");
        fill_nan(y, n);
        start_row_log(n);
        arm_hold(n, threads);

        matvec_omp_triangular(n, L, x, y);

        snprintf(name, sizeof name, "-%d", k);
        produce_row_log(n, name);
        snprintf(name, sizeof name, "y-%d", k);
        produce(name, y, sizeof *y, n);
        free(L);
        free(x);
        free(y);
    }
}

static void run_columns(void)
{
    int threads = (int)arg_in(0, 1, MAX_TEST_THREADS + 1, "THREADS");
    use_threads(threads);
    /* The product may use omp_get_max_threads() rows of partials
     * (omp_matvec.h); the tests read the first `threads`. */
    size_t partial_rows = (size_t)omp_get_max_threads();
    if (partial_rows < (size_t)threads)
        partial_rows = (size_t)threads;
    int before = threads_alive();
    for (int k = 0; k < column_shape_count; k++) {
        const shape *s = &column_shapes[k];
        double *A = producer_alloc(s->m * s->n, sizeof *A, "A");
        double *x = producer_alloc(s->n, sizeof *x, "x");
        double *y = producer_alloc(s->m, sizeof *y, "y");
        double *partials = producer_alloc(partial_rows * s->m,
                                          sizeof *partials, "partials");
        matrix_fill_random(A, s->m, s->n, 0, 0, CASE_SEED);
        vector_fill_random(x, s->n, 0, CASE_SEED);
        for (int call = 0; call < COLUMN_CALLS; call++) {
            fill_nan(y, s->m);
            fill_nan(partials, partial_rows * s->m);

            matvec_omp_columns(s->m, s->n, A, x, y, partials);

            char name[48];
            snprintf(name, sizeof name, "y-%d-%d", k, call);
            produce(name, y, sizeof *y, s->m);
            snprintf(name, sizeof name, "partials-%d-%d", k, call);
            produce(name, partials, sizeof *partials,
                    (size_t)threads * s->m);
        }
        free(A);
        free(x);
        free(y);
        free(partials);
    }
    produce_threads(before);
}

static void run_counters(void)
{
    int threads = (int)arg_in(0, 1, MAX_COUNTER_THREADS + 1, "THREADS");
    /* count_events asks for `threads` threads (num_threads); dynamic
     * adjustment off, so that it gets them. */
    omp_set_dynamic(0);
    long *block = padded_counters_alloc(threads);
    uintptr_t where = (uintptr_t)block;
    produce("block", &where, sizeof where, 1);
    if (block == NULL)
        return;
    uintptr_t addresses[MAX_COUNTER_THREADS];
    long counts[MAX_COUNTER_THREADS];
    for (int t = 0; t < threads; t++)
        addresses[t] = (uintptr_t)padded_counter(block, t);
    produce("addresses", addresses, sizeof addresses[0], (size_t)threads);
    count_events(block, padded_counter, threads, COUNTER_EVENTS);
    /* Read where the addresses above said each counter is: the tests judge
     * those addresses, so the counts must come from the same places. */
    for (int t = 0; t < threads; t++)
        counts[t] = *(const long *)addresses[t];
    produce("counts", counts, sizeof counts[0], (size_t)threads);
    free(block);
}

int main(int argc, char **argv)
{
    static const producer_case cases[] = {
        { "rows", 2, run_rows, false },
        { "triangular", 2, run_triangular, false },
        { "columns", 1, run_columns, false },
        { "counters", 1, run_counters, false },
    };
    return producer_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
