/* Lesson 03's tests: the three threaded products for 1 to 4 threads, against
 * the serial kernel (rows, triangular: the same bits) or a reference within
 * an error bound (columns); a count of the threads that really ran; the
 * padded counters' addresses; and the hybrid program under mpirun. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counters.h"
#include "harness.h"
#include "kernels.h"
#include "matrix.h"
#include "omp_matvec.h"
#include "reference.h"

enum { MAX_TEST_THREADS = 4 };

typedef struct {
    size_t m, n;
    const char *why;  /* what the shape catches */
} shape;

/* Shapes for the row split and the column split. */
static const shape shapes[] = {
    { 1, 1, "one row for many threads" },
    { 7, 13, "fewer rows than blocks of 4 per thread" },
    { 100, 37, "rows not a multiple of the threads" },
    { 257, 300, "a larger, ragged product" },
};
enum { shape_count = sizeof shapes / sizeof shapes[0] };

/* Exactly `threads` threads for the regions that follow: with dynamic
 * adjustment (OMP_DYNAMIC=true in someone's environment) the runtime could
 * give a region fewer, and the thread count below would mislead. */
static void use_threads(int threads)
{
    omp_set_dynamic(0);
    omp_set_num_threads(threads);
}

/* Generated inputs; A is (m, n), x is (n). */
static void fill(size_t m, size_t n, double *A, double *x)
{
    matrix_fill_random(A, m, n, 0, 0, 2025);
    vector_fill_random(x, n, 0, 2025);
}

static void fill_nan(double *v, size_t count)
{
    for (size_t k = 0; k < count; k++)
        v[k] = NAN;
}

/* The threads this process has now: one entry each in /proc/self/task
 * (Linux); -1 where that folder does not exist (macOS, the BSDs). */
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

/* Proves that a call ran on `threads` threads. Each test runs in a fresh
 * process (Check forks one per test) that starts with one thread, and
 * OpenMP keeps the threads of a parallel region alive afterwards, waiting
 * for the next one; so a call that used T threads leaves at least T - 1
 * more than there were before it. Where threads cannot be counted, the
 * test ends as skipped, saying so: not passed. */
static void expect_threads_used(int before, int threads, const char *what,
                                const char *todo)
{
    if (threads == 1)
        return;
    int after = threads_alive();
    if (before < 0 || after < 0)
        ck_abort_msg("skipped: %s: the result is right, but this system has "
                     "no /proc/self/task, so the test cannot count the "
                     "threads that ran", what);
    ck_assert_msg(after - before >= threads - 1, "%s: the result is right, "
                  "but the work was not spread over threads: %d threads "
                  "were asked for (omp_set_num_threads), and the process "
                  "has %d thread%s after the call, %d before. Hint: %s: is "
                  "there a parallel loop (#pragma omp parallel for) around "
                  "the rows?", what, threads, after, after == 1 ? "" : "s",
                  before, todo);
}

/* Fails with the comparison's words, and for a NaN a word about it. */
static void expect_comparison(const comparison_t *c, const char *what,
                              const char *hint)
{
    if (comparison_ok(c))
        return;
    char text[512];
    comparison_describe(c, "y", text, sizeof text);
    if (isnan(c->got))
        ck_abort_msg("%s: %s. Hint: y[%zu] is NaN: no thread wrote it (the "
                     "test fills y with NaN first), or it was computed from "
                     "something never written; %s", what, text, c->first,
                     hint);
    ck_abort_msg("%s: %s. Hint: %s", what, text, hint);
}

/* ---- TODO 1: the row split ---------------------------------------------- */

START_TEST(rows_case)
{
    int threads = _i / shape_count + 1;
    const shape *s = &shapes[_i % shape_count];
    char what[128];
    snprintf(what, sizeof what, "A is %zu x %zu, %d thread%s", s->m, s->n,
             threads, threads == 1 ? "" : "s");
    double *A = matrix_alloc(s->m, s->n, "A");
    double *A_copy = matrix_alloc(s->m, s->n, "copy of A");
    double *x = vector_alloc(s->n, "x"), *x_copy = vector_alloc(s->n, "x");
    double *y = vector_alloc(s->m, "y"), *expected = vector_alloc(s->m, "y");
    fill(s->m, s->n, A, x);
    fill(s->m, s->n, A_copy, x_copy);
    matvec_rows(s->m, s->n, A, s->n, x, expected);
    fill_nan(y, s->m);
    use_threads(threads);
    int before = threads_alive();

    matvec_omp_rows(s->m, s->n, A, x, y);

    comparison_t c = compare_bitwise(expected, y, s->m);
    expect_comparison(&c, what, "TODO 1: every row, including the last few "
                      "when m is not a multiple of ROWS_PER_TASK, goes whole "
                      "to one call of matvec_rows, which writes y[i] for "
                      "row i: the same bits as the serial call");
    c = compare_bitwise(A_copy, A, s->m * s->n);
    ck_assert_msg(comparison_ok(&c), "%s: A[%zu] changed: the product must "
                  "only read A (TODO 1)", what, c.first);
    c = compare_bitwise(x_copy, x, s->n);
    ck_assert_msg(comparison_ok(&c), "%s: x[%zu] changed: the product must "
                  "only read x (TODO 1)", what, c.first);
    expect_threads_used(before, threads, what, "TODO 1");
    matrix_free(A);
    matrix_free(A_copy);
    matrix_free(x);
    matrix_free(x_copy);
    matrix_free(y);
    matrix_free(expected);
}
END_TEST

/* ---- TODO 2: the triangular product under three schedules --------------- */

static const struct {
    omp_sched_t kind;
    const char *name;
} schedules[] = {
    { omp_sched_static, "static" },
    { omp_sched_dynamic, "dynamic" },
    { omp_sched_guided, "guided" },
};
enum { schedule_count = sizeof schedules / sizeof schedules[0] };

/* Orders of L, from one row to more rows than any chunk size. */
static const size_t triangular_orders[] = { 1, 2, 5, 64, 301 };
enum { order_count = sizeof triangular_orders / sizeof triangular_orders[0] };

START_TEST(triangular_case)
{
    int threads = _i / schedule_count + 1;
    int schedule = _i % schedule_count;
    use_threads(threads);
    /* Chunk 0: each schedule's default chunk. */
    omp_set_schedule(schedules[schedule].kind, 0);
    int before = threads_alive();
    char what[128] = "";
    for (int k = 0; k < order_count; k++) {
        size_t n = triangular_orders[k];
        snprintf(what, sizeof what, "L is %zu x %zu, %d thread%s, schedule "
                 "%s", n, n, threads, threads == 1 ? "" : "s",
                 schedules[schedule].name);
        double *L = matrix_alloc(n, n, "L");
        double *x = vector_alloc(n, "x");
        double *y = vector_alloc(n, "y"), *expected = vector_alloc(n, "y");
        fill(n, n, L, x);
        /* NaN above the diagonal: a product that reads there cannot pass. */
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                L[i * n + j] = NAN;
        for (size_t i = 0; i < n; i++)
            matvec_rows(1, i + 1, &L[i * n], n, x, &expected[i]);
        fill_nan(y, n);

        matvec_omp_triangular(n, L, x, y);

        comparison_t c = compare_bitwise(expected, y, n);
        expect_comparison(&c, what, "TODO 2: row i has i + 1 entries, "
                          "columns 0 .. i, starting at &L[i*n]; one call of "
                          "matvec_rows for one row computes y[i], every row "
                          "once, whatever thread it falls to");
        matrix_free(L);
        matrix_free(x);
        matrix_free(y);
        matrix_free(expected);
    }
    snprintf(what, sizeof what, "triangular products, %d thread%s, schedule "
             "%s", threads, threads == 1 ? "" : "s",
             schedules[schedule].name);
    expect_threads_used(before, threads, what, "TODO 2");
}
END_TEST

/* ---- TODO 3: the column split -------------------------------------------- */

/* The row split's shapes, two with fewer rows than threads or fewer
 * columns than threads, and one where every thread's partial results land
 * on the same few elements of y: that is where threads that add into
 * shared memory collide most. */
static const shape column_shapes[] = {
    { 1, 1, "one element" },
    { 7, 13, "small" },
    { 100, 37, "rows not a multiple of the threads" },
    { 257, 300, "larger, ragged" },
    { 3, 1000, "fewer rows than threads" },
    { 300, 2, "fewer columns than threads" },
    { 16, 200000, "every thread on the same 16 elements of y" },
};
enum { column_shape_count = sizeof column_shapes / sizeof column_shapes[0] };

/* Calls of the same product on the same input. Why three: a correct column
 * split adds each y[i]'s partial results in thread order, so every call
 * gives the same bits. Threads that add into shared y without a reduction
 * or synchronisation race: two of them read y[i], both add, both store,
 * and one addition is lost; and the order of the additions changes from
 * call to call. When 4 threads add every product of a 16 x 200000 matrix
 * into the same 16 elements of y, at least one of three calls shows a
 * wrong or a different result with overwhelming probability (200 trials of
 * 200 on a 2-core machine; with 2 threads, 193 of 200). A race shows only
 * when the threads overlap in time, and on a machine busy with other work
 * they may not; so the test also checks what TODO 3 promises, which does
 * not depend on timing: every thread's partial y is in its own row of
 * partials. */
enum { COLUMN_CALLS = 3 };

START_TEST(columns_case)
{
    int threads = _i + 1;
    use_threads(threads);
    int before = threads_alive();
    char what[160] = "";
    for (int k = 0; k < column_shape_count; k++) {
        const shape *s = &column_shapes[k];
        snprintf(what, sizeof what, "A is %zu x %zu (%s), %d thread%s",
                 s->m, s->n, s->why, threads, threads == 1 ? "" : "s");
        double *A = matrix_alloc(s->m, s->n, "A");
        double *x = vector_alloc(s->n, "x");
        double *expected = vector_alloc(s->m, "reference y");
        double *bound = vector_alloc(s->m, "bounds");
        double *y[COLUMN_CALLS];
        /* Room for as many rows as the product may use threads; NaN, so a
         * row read before it was written shows. */
        double *partials = matrix_alloc((size_t)omp_get_max_threads(), s->m,
                                        "partials");
        fill(s->m, s->n, A, x);
        /* One bound serves every order of additions. The error bound of a
         * dot product, gamma_n * sum_j |A[i][j] x[j]| (common/reference.h),
         * holds for the n products added in ANY order and grouping: each
         * product is rounded once, then takes part in at most n - 1
         * additions, each rounding once, so no term suffers more than n
         * roundings (Higham, section 3.1). Thread t's partial sum of its
         * columns, then the partial sums added across threads in order, is
         * one such grouping, so the same bound covers it, for every thread
         * count. */
        reference_matvec(s->m, s->n, A, x, expected, bound);
        for (int call = 0; call < COLUMN_CALLS; call++) {
            y[call] = vector_alloc(s->m, "y");
            fill_nan(y[call], s->m);
            fill_nan(partials, (size_t)omp_get_max_threads() * s->m);

            matvec_omp_columns(s->m, s->n, A, x, y[call], partials);

            char call_what[200];
            snprintf(call_what, sizeof call_what, "%s, call %d of %d", what,
                     call + 1, COLUMN_CALLS);
            comparison_t c = compare_within(expected, y[call], bound, s->m);
            expect_comparison(&c, call_what, "TODO 3: more error than any "
                              "order of additions can make. If it changes "
                              "from run to run, suspect a data race: threads "
                              "adding into the same y[i] at once lose "
                              "additions. Each thread writes only its own row "
                              "of partials; y is summed from them after a "
                              "barrier. Also check each thread's column "
                              "block and its slice of x");
            /* The contract of TODO 3: thread t's partial y in row t. */
            size_t unwritten = 0, held = (size_t)threads * s->m;
            while (unwritten < held && !isnan(partials[unwritten]))
                unwritten++;
            ck_assert_msg(unwritten == held, "%s: row %zu of partials was "
                          "never written (it still holds the NaN the test "
                          "put there, at column %zu). Hint: TODO 3: each "
                          "thread (%d here) computes its partial y into its "
                          "own row of partials, and y is summed from those "
                          "rows after a barrier; threads that add into the "
                          "shared y directly make a data race, which loses "
                          "additions", call_what, unwritten / s->m,
                          unwritten % s->m, threads);
            if (call > 0) {
                c = compare_bitwise(y[0], y[call], s->m);
                ck_assert_msg(comparison_ok(&c), "%s: the same input gave "
                              "different results: y[%zu] was %.17g in call 1 "
                              "and %.17g in call %d. Hint: TODO 3: a possible "
                              "data race: threads adding into shared memory "
                              "at the same time, or in an order that changes "
                              "from call to call. Sum each y[i] from the "
                              "rows of partials in thread order, after a "
                              "barrier", what, c.first, c.expected, c.got,
                              call + 1);
            }
        }
        for (int call = 0; call < COLUMN_CALLS; call++)
            matrix_free(y[call]);
        matrix_free(A);
        matrix_free(x);
        matrix_free(expected);
        matrix_free(bound);
        matrix_free(partials);
    }
    snprintf(what, sizeof what, "column split, %d thread%s", threads,
             threads == 1 ? "" : "s");
    expect_threads_used(before, threads, what, "TODO 3");
}
END_TEST

/* ---- TODO 4: padded counters --------------------------------------------- */

START_TEST(counters_case)
{
    int threads = _i;
    long events = 100000;
    long *counters = padded_counters_alloc(threads);
    ck_assert_msg(counters != NULL, "padded_counters_alloc(%d) returned NULL "
                  "(TODO 4): aligned_alloc needs a size that is a multiple "
                  "of the alignment", threads);
    for (int t = 0; t < threads; t++) {
        uintptr_t address = (uintptr_t)padded_counter(counters, t);
        ck_assert_msg(address % CACHE_LINE_BYTES == 0, "%d threads: thread "
                      "%d's counter is at an address %zu bytes past the "
                      "start of a 64-byte cache line. Hint: TODO 4: the "
                      "block must start on a line (malloc only promises 16 "
                      "bytes: allocate with an alignment), and counters must "
                      "be a whole line apart", threads, t,
                      (size_t)(address % CACHE_LINE_BYTES));
        for (int u = 0; u < t; u++) {
            uintptr_t other = (uintptr_t)padded_counter(counters, u);
            ck_assert_msg(other / CACHE_LINE_BYTES !=
                          address / CACHE_LINE_BYTES, "%d threads: the "
                          "counters of threads %d and %d share a cache line "
                          "(%zu bytes apart). Hint: TODO 4: one counter per "
                          "64-byte line: thread t's is CACHE_LINE_BYTES / "
                          "sizeof(long) longs after thread t-1's", threads,
                          u, t, (size_t)(address - other));
        }
    }
    count_events(counters, padded_counter, threads, events);
    for (int t = 0; t < threads; t++) {
        long counted = *padded_counter(counters, t);
        ck_assert_msg(counted == events, "%d threads: thread %d's counter "
                      "holds %ld after the demo, expected %ld. Hint: TODO 4: "
                      "do two threads' counters overlap, or lie outside "
                      "the block that padded_counters_alloc made?", threads,
                      t, counted, events);
    }
    free(counters);
}
END_TEST

/* ---- TODO 5-6: the hybrid program under mpirun --------------------------- */

static const struct {
    int ranks, threads;
} hybrid_runs[] = { { 1, 2 }, { 2, 2 } };
enum { hybrid_run_count = sizeof hybrid_runs / sizeof hybrid_runs[0] };

/* M not a multiple of the ranks or of the blocks of 4 rows; N ragged. */
enum { HYBRID_M = 101, HYBRID_N = 67, HYBRID_SEED = 3 };

START_TEST(hybrid_case)
{
    int ranks = hybrid_runs[_i].ranks, threads = hybrid_runs[_i].threads;
    char what[96], out[HARNESS_PATH], setting[32];
    snprintf(what, sizeof what, "hybrid on %d rank%s x %d threads", ranks,
             ranks == 1 ? "" : "s", threads);
    snprintf(setting, sizeof setting, "OMP_NUM_THREADS=%d", threads);
    harness_out_dir(out);
    char m_text[16], n_text[16], seed_text[16];
    snprintf(m_text, sizeof m_text, "%d", HYBRID_M);
    snprintf(n_text, sizeof n_text, "%d", HYBRID_N);
    snprintf(seed_text, sizeof seed_text, "%d", HYBRID_SEED);
    char *args[] = { "--m", m_text, "--n", n_text, "--seed", seed_text,
                     "--reps", "1", "--out", out, NULL };
    char *env[] = { setting, NULL };

    run_result r = harness_run_mpi("03-openmp", "hybrid", ranks, args, env,
                                   60);
    harness_expect_success(&r, what);

    /* The whole product, here, on one thread: the hybrid split must give
     * the same bits, since every row is computed whole by matvec_rows. */
    double *A = matrix_alloc(HYBRID_M, HYBRID_N, "A");
    double *x = vector_alloc(HYBRID_N, "x");
    double *expected = vector_alloc(HYBRID_M, "y");
    double *y = vector_alloc(HYBRID_M, "y of a rank");
    matrix_fill_random(A, HYBRID_M, HYBRID_N, 0, 0, HYBRID_SEED);
    vector_fill_random(x, HYBRID_N, 0, HYBRID_SEED);
    matvec_rows(HYBRID_M, HYBRID_N, A, HYBRID_N, x, expected);
    /* ceil(M/P) rows of N doubles: the most any rank may hold of A. */
    unsigned long long most_bytes =
        (unsigned long long)((HYBRID_M + ranks - 1) / ranks) * HYBRID_N * 8;

    for (int rank = 0; rank < ranks; rank++) {
        char *report = harness_read_report(out, rank);
        unsigned long long level[2] = { 0 }, memory[2] = { 0 }, team = 0;
        ck_assert_msg(harness_report_values(report, "thread_level", level,
                                            2) == 2, "%s: rank %d's report "
                      "has no thread level", what, rank);
        ck_assert_msg(level[0] >= level[1], "%s: rank %d: MPI provides "
                      "thread level %llu, below MPI_THREAD_FUNNELED (%llu): "
                      "threads are not allowed at all. Hint: TODO 5: start "
                      "MPI with MPI_Init_thread, asking for "
                      "MPI_THREAD_FUNNELED", what, rank, level[0], level[1]);
        ck_assert_msg(harness_report_values(report, "threads", &team, 1) == 1
                      && team == (unsigned long long)threads, "%s: rank %d "
                      "ran %llu OpenMP threads, expected %d "
                      "(OMP_NUM_THREADS)", what, rank, team, threads);
        ck_assert_msg(harness_report_values(report, "memory matrix", memory,
                                            2) == 2, "%s: rank %d's report "
                      "has no memory ledger", what, rank);
        ck_assert_msg(memory[1] <= most_bytes, "%s: rank %d held %llu bytes "
                      "of matrix at its peak, more than its %llu bytes "
                      "(ceil(M/P) rows of N doubles): each rank must hold "
                      "only its own rows", what, rank, memory[1], most_bytes);
        harness_read_doubles(out, "y", rank, y, HYBRID_M);
        comparison_t c = compare_bitwise(expected, y, HYBRID_M);
        if (!comparison_ok(&c)) {
            char text[512];
            comparison_describe(&c, "y", text, sizeof text);
            ck_abort_msg("%s: rank %d's y: %s. Hint: TODO 6: the local "
                         "product is your TODO 1 kernel on this rank's rows "
                         "(%s)", what, rank, text, isnan(c.got) ?
                         "a NaN: that row of y was never computed" :
                         "it must give the same bits as the serial kernel");
        }
        free(report);
    }
    harness_remove_out_dir(out);
    matrix_free(A);
    matrix_free(x);
    matrix_free(expected);
    matrix_free(y);
    run_result_free(&r);
}
END_TEST

Suite *lesson_suite(void)
{
    static char rows_names[MAX_TEST_THREADS * shape_count][96];
    static char triangular_names[MAX_TEST_THREADS * schedule_count][96];
    static char columns_names[MAX_TEST_THREADS][96];
    static char counters_names[8][96];
    static char hybrid_names[hybrid_run_count][96];
    Suite *suite = suite_create("03-openmp");
    for (int k = 0; k < MAX_TEST_THREADS * shape_count; k++) {
        int threads = k / shape_count + 1;
        const shape *s = &shapes[k % shape_count];
        snprintf(rows_names[k], sizeof rows_names[k], "rows %zu x %zu, %d "
                 "thread%s: %s", s->m, s->n, threads, threads == 1 ? "" : "s",
                 s->why);
        harness_add(suite, rows_names[k], rows_case, k, 10);
    }
    for (int k = 0; k < MAX_TEST_THREADS * schedule_count; k++) {
        int threads = k / schedule_count + 1;
        snprintf(triangular_names[k], sizeof triangular_names[k],
                 "triangular, %d thread%s, schedule %s", threads,
                 threads == 1 ? "" : "s", schedules[k % schedule_count].name);
        harness_add(suite, triangular_names[k], triangular_case, k, 10);
    }
    for (int k = 0; k < MAX_TEST_THREADS; k++) {
        snprintf(columns_names[k], sizeof columns_names[k], "columns, %d "
                 "thread%s: within the bound, the same on every call", k + 1,
                 k == 0 ? "" : "s");
        harness_add(suite, columns_names[k], columns_case, k, 20);
    }
    for (int threads = 1; threads <= 8; threads++) {
        snprintf(counters_names[threads - 1], sizeof counters_names[0],
                 "padded counters, %d thread%s: one cache line each",
                 threads, threads == 1 ? "" : "s");
        harness_add(suite, counters_names[threads - 1], counters_case,
                    threads, 10);
    }
    for (int k = 0; k < hybrid_run_count; k++) {
        snprintf(hybrid_names[k], sizeof hybrid_names[k], "hybrid, %d "
                 "rank%s x %d threads: same bits as serial, rows only",
                 hybrid_runs[k].ranks, hybrid_runs[k].ranks == 1 ? "" : "s",
                 hybrid_runs[k].threads);
        harness_add(suite, hybrid_names[k], hybrid_case, k, 70);
    }
    return suite;
}
