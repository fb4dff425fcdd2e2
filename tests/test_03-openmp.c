/* Lesson 03's tests: the three threaded products for 1 to 4 threads, against
 * the serial kernel (rows, triangular: the same bits) or a reference within
 * an error bound (columns); the row log of compute_rows (every row computed
 * once, by a team of the threads asked for, and under OMP_SCHEDULE=static,3
 * by the thread that schedule deals it to); a count of the threads that
 * ran the column split; the padded counters' addresses; and the hybrid
 * program under mpirun, including its refusals of bad input on every rank
 * together. The products and the counters run in the lesson's producer
 * (tests/producer/03-openmp.c), never in this program: it writes their
 * inputs, reads what they computed and what given code saw of how they ran
 * (the row log, threads, addresses), and decides here. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute_rows.h"
#include "counters.h"
#include "harness.h"
#include "kernels.h"
#include "matrix.h"
#include "omp_matvec.h"
#include "producer/03-openmp.h"
#include "reference.h"

static const char LESSON[] = "03-openmp";

/* Generated inputs; A is (m, n), x is (n). The producer's columns case
 * generates its own the same way (03-openmp.h). */
static void fill(size_t m, size_t n, double *A, double *x)
{
    matrix_fill_random(A, m, n, 0, 0, CASE_SEED);
    vector_fill_random(x, n, 0, CASE_SEED);
}

/* Proves that the producer's calls ran on `threads` threads, from the
 * threads its process had before the first call and after the last
 * (`seen`, counted by the producer's given code in /proc/self/task). The
 * producer starts with one thread, and OpenMP keeps the threads of a
 * parallel region alive afterwards, waiting for the next one; so calls
 * that used T threads leave at least T - 1 more than there were before
 * them. Where threads cannot be counted (-1), the test ends as skipped,
 * saying so: not passed. For the column split, which does not compute
 * through compute_rows and so has no row log. */
static void expect_threads_used(const int seen[2], int threads,
                                const char *what, const char *todo)
{
    if (threads == 1)
        return;
    int before = seen[0], after = seen[1];
    if (before < 0 || after < 0)
        ck_abort_msg("skipped: %s: the result is right, but this system has "
                     "no /proc/self/task, so the test cannot count the "
                     "threads that ran", what);
    ck_assert_msg(after - before >= threads - 1, "%s: the result is right, "
                  "but the work was not spread over threads: %d threads "
                  "were asked for (omp_set_num_threads), and the process "
                  "that ran it has %d thread%s after the call, %d before. "
                  "Hint: %s: is the work inside a parallel region "
                  "(#pragma omp parallel)?", what, threads, after,
                  after == 1 ? "" : "s", before, todo);
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

/* ---- The row log (compute_rows.h), as the producer wrote it ------------- */

typedef struct {
    int *times, *thread, *team;  /* one per row */
    size_t outside;              /* rows computed beyond the last */
    int hold[2];                 /* the hold's outcome, how long it held */
} row_log;

/* DIR/{times,thread,team,outside}SUFFIX.bin, for `rows` rows. */
static row_log read_row_log(const char *dir, const char *suffix,
                            size_t rows)
{
    row_log log;
    size_t count = rows > 0 ? rows : 1;
    log.times = malloc(count * sizeof *log.times);
    log.thread = malloc(count * sizeof *log.thread);
    log.team = malloc(count * sizeof *log.team);
    ck_assert_msg(log.times != NULL && log.thread != NULL && log.team != NULL,
                  "out of memory for the row log of %zu rows", rows);
    char name[48];
    snprintf(name, sizeof name, "times%s", suffix);
    harness_read_output(dir, name, log.times, sizeof *log.times, rows);
    snprintf(name, sizeof name, "thread%s", suffix);
    harness_read_output(dir, name, log.thread, sizeof *log.thread, rows);
    snprintf(name, sizeof name, "team%s", suffix);
    harness_read_output(dir, name, log.team, sizeof *log.team, rows);
    snprintf(name, sizeof name, "outside%s", suffix);
    harness_read_output(dir, name, &log.outside, sizeof log.outside, 1);
    snprintf(name, sizeof name, "hold%s", suffix);
    harness_read_output(dir, name, log.hold, sizeof log.hold[0], 2);
    return log;
}

static void row_log_free(row_log *log)
{
    free(log->times);
    free(log->thread);
    free(log->team);
}

/* What the row log must show of a product of `rows` rows asked to run on
 * `threads` threads: every row computed through compute_rows exactly once
 * (nothing beyond the last), each by a team of `threads`; and, when
 * `dealt_in_chunks` > 0 (OMP_SCHEDULE=static,CHUNK), row i by thread
 * (i / CHUNK) % threads. `todo` names the TODO for the hints. */
static void expect_row_log(const row_log *log, size_t rows, int threads,
                           int dealt_in_chunks, const char *what,
                           const char *todo)
{
    ck_assert_msg(log->outside == 0, "%s: compute_rows computed %zu rows "
                  "beyond the last one (row %zu): rows that do not exist. "
                  "Hint: %s: the last iteration takes only the rows that are "
                  "left", what, log->outside, rows - 1, todo);
    for (size_t r = 0; r < rows; r++) {
        int times = log->times[r];
        ck_assert_msg(times != 0, "%s: row %zu was never computed through "
                      "compute_rows. The tests count, for every row, the "
                      "calls of compute_rows (compute_rows.h) that computed "
                      "it; a row computed some other way, or not at all, "
                      "counts 0. Hint: %s: compute every row with "
                      "compute_rows", what, r, todo);
        ck_assert_msg(times == 1, "%s: row %zu was computed %d times, not "
                      "once: threads did the same work again (y is still "
                      "right, since every copy has the same bits, but the "
                      "time is wasted, and two threads writing the same "
                      "y[%zu] at once are a data race). Hint: %s: do the "
                      "blocks of rows overlap? Each row belongs to exactly "
                      "one iteration of one loop", what, r, times, r, todo);
        ck_assert_msg(log->team[r] == threads, "%s: the result is right, "
                      "but the work was not spread over threads: row %zu "
                      "was computed by a team of %d thread%s, and %d were "
                      "asked for (omp_set_num_threads). Hint: %s: is there "
                      "a parallel loop (#pragma omp parallel for) around the "
                      "rows?", what, r, log->team[r],
                      log->team[r] == 1 ? "" : "s", threads, todo);
        if (dealt_in_chunks > 0) {
            int chunk = dealt_in_chunks;
            int owner = (int)((r / (size_t)chunk) % (size_t)threads);
            ck_assert_msg(log->thread[r] == owner, "%s: row %zu was computed "
                          "by thread %d, but OMP_SCHEDULE=static,%d deals it "
                          "to thread %d: chunks of %d rows go to the threads "
                          "in turn (rows 0-%d to thread 0, rows %d-%d to "
                          "thread 1, ...), the same on every run. Hint: %s: "
                          "is the schedule written into the pragma? "
                          "schedule(runtime) takes it from OMP_SCHEDULE or "
                          "omp_set_schedule(), so that one binary can run "
                          "them all; and one loop iteration per row", what,
                          r, log->thread[r], chunk, owner, chunk, chunk - 1,
                          chunk, 2 * chunk - 1, todo);
        }
    }
    /* The hold (compute_rows.h, armed by the producer on the largest
     * products): one thread held inside compute_rows, and no other thread
     * reached it. */
    ck_assert_msg(log->hold[0] != ROW_LOG_HOLD_ALONE, "%s: the threads "
                  "never computed rows at the same time. The tests held the "
                  "first thread to call compute_rows inside it for %.1f s, "
                  "and in that time no other thread called it: each waited "
                  "for the one before it to finish. Hint: %s: the threads "
                  "compute their rows side by side; a #pragma omp critical, "
                  "ordered or single, or a lock, around the work makes them "
                  "take turns (each row is written by one thread only: "
                  "nothing needs one)", what, log->hold[1] / 1e3, todo);
}

/* ---- TODO 1: the row split ---------------------------------------------- */

enum { ROWS_TIMEOUT_S = 6 };

START_TEST(rows_case)
{
    int threads = _i / shape_count + 1;
    const shape *s = &shapes[_i % shape_count];
    char what[128], dir[HARNESS_PATH], args[32], run_what[160];
    snprintf(what, sizeof what, "A is %zu x %zu, %d thread%s", s->m, s->n,
             threads, threads == 1 ? "" : "s");
    double *A = matrix_alloc_or_exit(s->m, s->n, "A");
    double *A_after = matrix_alloc_or_exit(s->m, s->n, "A after");
    double *x = vector_alloc_or_exit(s->n, "x");
    double *x_after = vector_alloc_or_exit(s->n, "x");
    double *y = vector_alloc_or_exit(s->m, "y");
    double *expected = vector_alloc_or_exit(s->m, "y");
    fill(s->m, s->n, A, x);
    matvec_rows(s->m, s->n, A, s->n, x, expected);

    harness_out_dir(dir);
    harness_write_input(dir, "A", A, sizeof *A, s->m * s->n);
    harness_write_input(dir, "x", x, sizeof *x, s->n);
    snprintf(args, sizeof args, "%d %d", threads, _i % shape_count);
    snprintf(run_what, sizeof run_what, "matvec_omp_rows (%s)", what);
    harness_produce_case(LESSON, "rows", dir, args, NULL, ROWS_TIMEOUT_S,
                         run_what);
    harness_read_output(dir, "y", y, sizeof *y, s->m);
    harness_read_output(dir, "A", A_after, sizeof *A_after, s->m * s->n);
    harness_read_output(dir, "x", x_after, sizeof *x_after, s->n);
    row_log log = read_row_log(dir, "", s->m);
    harness_remove_out_dir(dir);

    comparison_t c = compare_bitwise(expected, y, s->m);
    expect_comparison(&c, what, "TODO 1: every row, including the last few "
                      "when m is not a multiple of ROWS_PER_TASK, goes whole "
                      "to one call of compute_rows, which writes y[i] for "
                      "row i: the same bits as the serial call");
    c = compare_bitwise(A, A_after, s->m * s->n);
    ck_assert_msg(comparison_ok(&c), "%s: A[%zu] changed: the product must "
                  "only read A (TODO 1)", what, c.first);
    c = compare_bitwise(x, x_after, s->n);
    ck_assert_msg(comparison_ok(&c), "%s: x[%zu] changed: the product must "
                  "only read x (TODO 1)", what, c.first);
    expect_row_log(&log, s->m, threads, 0, what, "TODO 1");
    row_log_free(&log);
    matrix_free(A);
    matrix_free(A_after);
    matrix_free(x);
    matrix_free(x_after);
    matrix_free(y);
    matrix_free(expected);
}
END_TEST

/* ---- TODO 2: the triangular product under four schedules ---------------- */

enum { TRIANGULAR_TIMEOUT_S = 8 };

/* L and x of order n: L generated, with NaN above the diagonal, so that a
 * product that reads there cannot pass. */
static void triangular_inputs(size_t n, double *L, double *x)
{
    fill(n, n, L, x);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            L[i * n + j] = NAN;
}

START_TEST(triangular_case)
{
    int threads = _i / schedule_count + 1;
    const schedule_case *schedule = &schedules[_i % schedule_count];
    char what[160], dir[HARNESS_PATH], args[32], name[48], setting[64];
    harness_out_dir(dir);
    /* Every order's input, for one run of the producer that multiplies
     * them all in one process, as one program would. */
    for (int k = 0; k < order_count; k++) {
        size_t n = triangular_orders[k];
        double *L = matrix_alloc_or_exit(n, n, "L");
        double *x = vector_alloc_or_exit(n, "x");
        triangular_inputs(n, L, x);
        snprintf(name, sizeof name, "L-%d", k);
        harness_write_input(dir, name, L, sizeof *L, n * n);
        snprintf(name, sizeof name, "x-%d", k);
        harness_write_input(dir, name, x, sizeof *x, n);
        matrix_free(L);
        matrix_free(x);
    }
    /* The schedule as a user sets it: schedule(runtime) reads it. */
    snprintf(setting, sizeof setting, "OMP_SCHEDULE=%s",
             schedule->omp_schedule);
    char *env[] = { setting, NULL };
    snprintf(args, sizeof args, "%d %d", threads, _i % schedule_count);
    snprintf(what, sizeof what, "matvec_omp_triangular (%d thread%s, %s)",
             threads, threads == 1 ? "" : "s", setting);
    harness_produce_case(LESSON, "triangular", dir, args, env,
                         TRIANGULAR_TIMEOUT_S, what);
    /* The runtime's own reading of the setting, asked by given code: were
     * it not the one set here, a failure below would blame the student for
     * the machine. */
    int observed[2];
    harness_read_output(dir, "schedule", observed, sizeof observed[0], 2);
    ck_assert_msg(observed[0] == schedule->kind &&
                  (schedule->dealt_in_chunks == 0 ||
                   observed[1] == schedule->dealt_in_chunks),
                  "the test set %s, but the OpenMP runtime reports schedule "
                  "kind %d, chunk %d (omp_get_schedule): the setting did not "
                  "reach the program; this is the test machine's problem, "
                  "not your code's", setting, observed[0], observed[1]);

    for (int k = 0; k < order_count; k++) {
        size_t n = triangular_orders[k];
        snprintf(what, sizeof what, "L is %zu x %zu, %d thread%s, %s", n, n,
                 threads, threads == 1 ? "" : "s", setting);
        double *L = matrix_alloc_or_exit(n, n, "L");
        double *x = vector_alloc_or_exit(n, "x");
        double *y = vector_alloc_or_exit(n, "y");
        double *expected = vector_alloc_or_exit(n, "y");
        triangular_inputs(n, L, x);
        for (size_t i = 0; i < n; i++)
            matvec_rows(1, i + 1, &L[i * n], n, x, &expected[i]);
        snprintf(name, sizeof name, "y-%d", k);
        harness_read_output(dir, name, y, sizeof *y, n);
        snprintf(name, sizeof name, "-%d", k);
        row_log log = read_row_log(dir, name, n);

        comparison_t c = compare_bitwise(expected, y, n);
        expect_comparison(&c, what, "TODO 2: row i has i + 1 entries, "
                          "columns 0 .. i: compute_rows(i, 1, i + 1, L, n, x, "
                          "y) computes y[i]; every row once, whatever thread "
                          "it falls to");
        expect_row_log(&log, n, threads, schedule->dealt_in_chunks, what,
                       "TODO 2");
        row_log_free(&log);
        matrix_free(L);
        matrix_free(x);
        matrix_free(y);
        matrix_free(expected);
    }
    harness_remove_out_dir(dir);
}
END_TEST

/* ---- TODO 3: the column split -------------------------------------------- */

/* Seven shapes, one of them 25 MB, each multiplied three times, and the
 * references of all seven: more work than any other test here, so more
 * time. */
enum { COLUMNS_TIMEOUT_S = 15 };

/* Why COLUMN_CALLS (03-openmp.h) is three: a correct column split adds each
 * y[i]'s partial results in thread order, so every call gives the same
 * bits. Threads that add into shared y without a reduction or
 * synchronisation race: two of them read y[i], both add, both store, and
 * one addition is lost; and the order of the additions changes from call
 * to call. When 4 threads add every product of a 16 x 200000 matrix into
 * the same 16 elements of y, at least one of three calls shows a wrong or
 * a different result with overwhelming probability (200 trials of 200 on a
 * 2-core machine; with 2 threads, 193 of 200). A race shows only when the
 * threads overlap in time, and on a machine busy with other work they may
 * not; so the test also checks what TODO 3 promises, which does not depend
 * on timing: every thread's partial y is in its own row of partials. A race
 * that optimisation hides (a shared temporary that the compiler keeps in a
 * register) changes no result at all, here or anywhere: only a race
 * detector sees it, ThreadSanitizer in scripts/tsan.sh (make tsan L=03),
 * which cannot run under make grade's address-space limit. */

START_TEST(columns_case)
{
    int threads = _i + 1;
    char what[160] = "", dir[HARNESS_PATH], args[16], name[48];
    int seen[2];
    snprintf(what, sizeof what, "matvec_omp_columns (%d thread%s)", threads,
             threads == 1 ? "" : "s");
    /* The producer generates A and x itself, as fill() does here, and
     * calls the product COLUMN_CALLS times on each shape. */
    harness_out_dir(dir);
    snprintf(args, sizeof args, "%d", threads);
    harness_produce_case(LESSON, "columns", dir, args, NULL,
                         COLUMNS_TIMEOUT_S, what);
    harness_read_output(dir, "threads", seen, sizeof seen[0], 2);
    for (int k = 0; k < column_shape_count; k++) {
        const shape *s = &column_shapes[k];
        snprintf(what, sizeof what, "A is %zu x %zu (%s), %d thread%s",
                 s->m, s->n, s->why, threads, threads == 1 ? "" : "s");
        double *A = matrix_alloc_or_exit(s->m, s->n, "A");
        double *x = vector_alloc_or_exit(s->n, "x");
        double *expected = vector_alloc_or_exit(s->m, "reference y");
        double *bound = vector_alloc_or_exit(s->m, "bounds");
        double *y[COLUMN_CALLS];
        /* The rows of partials of the `threads` threads, as the product
         * left them; the producer filled them with NaN before each call,
         * so a row read before it was written shows. */
        size_t held = (size_t)threads * s->m;
        double *partials = matrix_alloc_or_exit((size_t)threads, s->m,
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
            y[call] = vector_alloc_or_exit(s->m, "y");
            snprintf(name, sizeof name, "y-%d-%d", k, call);
            harness_read_output(dir, name, y[call], sizeof *y[call], s->m);
            snprintf(name, sizeof name, "partials-%d-%d", k, call);
            harness_read_output(dir, name, partials, sizeof *partials, held);

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
                              "barrier (make tsan L=03 names the lines "
                              "that race). Also check each thread's column "
                              "block and its slice of x");
            /* The contract of TODO 3: thread t's partial y in row t. */
            size_t unwritten = 0;
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
                              "barrier (make tsan L=03 names the lines that "
                              "race)", what, c.first, c.expected, c.got,
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
    harness_remove_out_dir(dir);
    snprintf(what, sizeof what, "column split, %d thread%s", threads,
             threads == 1 ? "" : "s");
    expect_threads_used(seen, threads, what, "TODO 3");
}
END_TEST

/* ---- TODO 4: padded counters --------------------------------------------- */

enum { COUNTERS_TIMEOUT_S = 5 };

START_TEST(counters_case)
{
    int threads = _i;
    char dir[HARNESS_PATH], args[16], what[64];
    uintptr_t block, addresses[MAX_COUNTER_THREADS];
    long counts[MAX_COUNTER_THREADS];
    harness_out_dir(dir);
    snprintf(args, sizeof args, "%d", threads);
    snprintf(what, sizeof what, "the padded counters of %d thread%s",
             threads, threads == 1 ? "" : "s");
    harness_produce_case(LESSON, "counters", dir, args, NULL,
                         COUNTERS_TIMEOUT_S, what);
    harness_read_output(dir, "block", &block, sizeof block, 1);
    ck_assert_msg(block != 0, "padded_counters_alloc(%d) returned NULL "
                  "(TODO 4): aligned_alloc needs a size that is a multiple "
                  "of the alignment", threads);
    /* Where padded_counter put each thread's counter, and, after the
     * demo, what the producer read at those addresses. */
    harness_read_output(dir, "addresses", addresses, sizeof addresses[0],
                        (size_t)threads);
    harness_read_output(dir, "counts", counts, sizeof counts[0],
                        (size_t)threads);
    harness_remove_out_dir(dir);
    for (int t = 0; t < threads; t++) {
        uintptr_t address = addresses[t];
        ck_assert_msg(address % CACHE_LINE_BYTES == 0, "%d threads: thread "
                      "%d's counter is at an address %zu bytes past the "
                      "start of a 64-byte cache line. Hint: TODO 4: the "
                      "block must start on a line (malloc only promises 16 "
                      "bytes: allocate with an alignment), and counters must "
                      "be a whole line apart", threads, t,
                      (size_t)(address % CACHE_LINE_BYTES));
        for (int u = 0; u < t; u++) {
            uintptr_t other = addresses[u];
            ck_assert_msg(other / CACHE_LINE_BYTES !=
                          address / CACHE_LINE_BYTES, "%d threads: the "
                          "counters of threads %d and %d share a cache line "
                          "(%zu bytes apart). Hint: TODO 4: one counter per "
                          "64-byte line: thread t's is CACHE_LINE_BYTES / "
                          "sizeof(long) longs after thread t-1's", threads,
                          u, t, (size_t)(address - other));
        }
    }
    for (int t = 0; t < threads; t++)
        ck_assert_msg(counts[t] == COUNTER_EVENTS, "%d threads: thread %d's "
                      "counter holds %ld after the demo, expected %d. Hint: "
                      "TODO 4: do two threads' counters overlap, or lie "
                      "outside the block that padded_counters_alloc made?",
                      threads, t, counts[t], COUNTER_EVENTS);
}
END_TEST

/* ---- TODO 5-6: the hybrid program under mpirun --------------------------- */

static const struct {
    int ranks, threads;
} hybrid_runs[] = { { 1, 2 }, { 2, 2 } };
enum { hybrid_run_count = sizeof hybrid_runs / sizeof hybrid_runs[0] };

/* M not a multiple of the ranks or of the blocks of 4 rows; N ragged. */
enum { HYBRID_M = 101, HYBRID_N = 67, HYBRID_SEED = 3 };

/* Check's limit for a run of the hybrid program, and mpirun's, below it:
 * starting Open MPI takes a second or two, more on a loaded machine. */
enum { HYBRID_TIMEOUT_S = 40, HYBRID_MPIRUN_S = 34 };

/* The command line of a hybrid run of the test's product, writing its
 * reports to `out`: args points into the struct's own number texts, so
 * the struct must outlive the run. */
typedef struct {
    char m[16], n[16], seed[16];
    char *args[11];
} hybrid_args;

static void hybrid_command(hybrid_args *a, char *out)
{
    snprintf(a->m, sizeof a->m, "%d", HYBRID_M);
    snprintf(a->n, sizeof a->n, "%d", HYBRID_N);
    snprintf(a->seed, sizeof a->seed, "%d", HYBRID_SEED);
    char *args[] = { "--m", a->m, "--n", a->n, "--seed", a->seed, "--reps",
                     "1", "--out", out, NULL };
    _Static_assert(sizeof args == sizeof a->args,
                   "hybrid_args.args holds exactly this command line");
    memcpy(a->args, args, sizeof args);
}

/* The whole of `rank`'s report in `out`, or NULL if it wrote none. */
static char *report_if_any(const char *out, int rank)
{
    char path[HARNESS_PATH + 32];
    snprintf(path, sizeof path, "%s/rank-%d.txt", out, rank);
    return access(path, F_OK) == 0 ? harness_read_report(out, rank) : NULL;
}

START_TEST(hybrid_case)
{
    int ranks = hybrid_runs[_i].ranks, threads = hybrid_runs[_i].threads;
    char what[96], out[HARNESS_PATH], setting[32];
    snprintf(what, sizeof what, "hybrid on %d rank%s x %d threads", ranks,
             ranks == 1 ? "" : "s", threads);
    snprintf(setting, sizeof setting, "OMP_NUM_THREADS=%d", threads);
    harness_out_dir(out);
    hybrid_args a;
    hybrid_command(&a, out);
    char *env[] = { setting, NULL };

    run_result r = harness_run_mpi(LESSON, "hybrid", ranks, a.args, env,
                                   HYBRID_MPIRUN_S);
    harness_expect_success(&r, what);

    /* The whole product, here, on one thread: the hybrid split must give
     * the same bits, since every row is computed whole by matvec_rows. */
    double *A = matrix_alloc_or_exit(HYBRID_M, HYBRID_N, "A");
    double *x = vector_alloc_or_exit(HYBRID_N, "x");
    double *expected = vector_alloc_or_exit(HYBRID_M, "y");
    double *y = vector_alloc_or_exit(HYBRID_M, "y of a rank");
    double *times = vector_alloc_or_exit(HYBRID_M, "row counts of a rank");
    matrix_fill_random(A, HYBRID_M, HYBRID_N, 0, 0, HYBRID_SEED);
    vector_fill_random(x, HYBRID_N, 0, HYBRID_SEED);
    matvec_rows(HYBRID_M, HYBRID_N, A, HYBRID_N, x, expected);
    /* ceil(M/P) rows of N doubles: the most any rank may hold of A. */
    unsigned long long most_bytes =
        (unsigned long long)((HYBRID_M + ranks - 1) / ranks) * HYBRID_N * 8;

    for (int rank = 0; rank < ranks; rank++) {
        char *report = harness_read_report(out, rank);
        unsigned long long level[2] = { 0 }, memory[2] = { 0 }, team[2];
        unsigned long long rows[2], outside = 0;
        ck_assert_msg(harness_report_values(report, "thread_level", level,
                                            2) == 2, "%s: rank %d's report "
                      "has no thread level", what, rank);
        ck_assert_msg(level[0] >= level[1], "%s: rank %d: MPI provides "
                      "thread level %llu, below MPI_THREAD_FUNNELED (%llu): "
                      "threads are not allowed at all. Hint: TODO 5: start "
                      "MPI with MPI_Init_thread, asking for "
                      "MPI_THREAD_FUNNELED", what, rank, level[0], level[1]);
        ck_assert_msg(harness_report_values(report, "rows", rows, 2) == 2 &&
                      harness_report_values(report, "team", team, 2) == 2 &&
                      harness_report_values(report, "outside", &outside, 1)
                      == 1, "%s: rank %d's report has no rows, team or "
                      "outside line", what, rank);
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
        /* How the local product computed this rank's rows, as the driver's
         * row log saw it (given code: not what hybrid.c says of itself). */
        size_t my_rows = (size_t)(rows[1] - rows[0]);
        harness_read_doubles(out, "times", rank, times, my_rows);
        size_t row = 0;
        while (row < my_rows && times[row] == 0.0)
            row++;
        ck_assert_msg(my_rows == 0 || row < my_rows, "%s: rank %d's y is right, "
                      "but none of its rows was computed through compute_rows "
                      "(compute_rows.h), so nothing shows that this rank's "
                      "threads computed them. Hint: TODO 6: the local "
                      "product is your TODO 1 kernel, matvec_omp_rows, on "
                      "this rank's rows", what, rank);
        for (row = 0; row < my_rows; row++)
            ck_assert_msg(times[row] == 1.0, "%s: rank %d computed row %zu of A "
                          "%.0f times, not once. Hint: TODO 6: one call of "
                          "your TODO 1 kernel on this rank's rows (and TODO "
                          "1: do the blocks of rows overlap?)", what, rank,
                          (size_t)rows[0] + row, times[row]);
        ck_assert_msg(outside == 0, "%s: rank %d computed %llu rows beyond "
                      "its own. Hint: TODO 6: the local product has `rows` "
                      "rows", what, rank, outside);
        ck_assert_msg(my_rows == 0 || (team[0] == (unsigned long long)threads
                                       && team[1] == (unsigned long long)
                                       threads), "%s: rank %d's y is right, "
                      "but its rows were computed by teams of %llu to %llu "
                      "thread%s, and OMP_NUM_THREADS=%d: the local product "
                      "ran on one thread. Hint: TODO 6: the local product "
                      "shares this rank's rows among its threads: your TODO "
                      "1 kernel does that", what, rank, team[0], team[1],
                      team[1] == 1 ? "" : "s", threads);
        free(report);
    }
    harness_remove_out_dir(out);
    matrix_free(A);
    matrix_free(x);
    matrix_free(expected);
    matrix_free(y);
    matrix_free(times);
    run_result_free(&r);
}
END_TEST


/* Fails unless a run of the hybrid program that must be refused ended
 * with exit status 2 on every rank and `says` once in its error output,
 * before any work (nothing on standard output). A program that did not
 * start, hung or crashed fails with the harness's words for that. */
/* The program's own lines of `err` ("hybrid: ..."), without the banners
 * mpirun adds around them, joined by " / ". */
static const char *own_lines(const char *err, char *shown, size_t len)
{
    size_t used = 0;
    shown[0] = '\0';
    for (const char *at = err; *at && used + 1 < len;) {
        size_t n = strcspn(at, "\n");
        if (strncmp(at, "hybrid:", 7) == 0)
            used += (size_t)snprintf(shown + used, len - used, "%s%.*s",
                                     used ? " / " : "", (int)n, at);
        at += n + (at[n] == '\n');
    }
    return shown[0] ? shown : "(none)";
}

static void expect_refused(const run_result *r, const char *what,
                           const char *says, const char *hint)
{
    char shown[600];
    if (r->timed_out || r->signal != 0 || !r->started ||
        strstr(r->err, "not started") != NULL)
        harness_expect_success(r, what);
    ck_assert_msg(r->exit_status == 2, "%s: exit status %d, expected 2 (bad "
                  "input: every rank stops together). Its own error lines: "
                  "%s. Hint: %s", what, r->exit_status,
                  own_lines(r->err, shown, sizeof shown), hint);
    ck_assert_msg(harness_occurrences(r->err, says) == 1, "%s: the error output "
                  "should say \"%s\" once, from one rank; its own lines: "
                  "%s. Hint: %s", what, says,
                  own_lines(r->err, shown, sizeof shown), hint);
    ck_assert_msg(strstr(r->out, "hybrid: y = Ax") == NULL, "%s: the program "
                  "ran to its end, and then stopped with status 2", what);
}

/* One rank whose MPI provides only MPI_THREAD_SINGLE (the driver's test
 * setting ZZ_TEST_THREAD_SINGLE_RANK, hybrid_main.c): every rank must come
 * to the driver's check, which stops all of them together with one
 * message. A rank that stops on its own (MPI_Abort, exit) in start_mpi
 * ends the others abruptly, and never reaches the check. */
enum { LEVEL_TIMEOUT_S = 30, LEVEL_MPIRUN_S = 24, LEVEL_RANKS = 2 };

START_TEST(hybrid_thread_level_case)
{
    const char what[] = "hybrid on 2 ranks, rank 1's MPI providing only "
                        "MPI_THREAD_SINGLE";
    const char hint[] = "TODO 5: start MPI with MPI_Init_thread and return; "
                        "the driver asks MPI which level each rank got, and "
                        "stops every rank together. A rank that stops alone "
                        "(MPI_Abort, exit) in start_mpi leaves the others "
                        "behind";
    char out[HARNESS_PATH];
    harness_out_dir(out);
    hybrid_args a;
    hybrid_command(&a, out);
    char *env[] = { "OMP_NUM_THREADS=2", "ZZ_TEST_THREAD_SINGLE_RANK=1",
                    NULL };
    run_result r = harness_run_mpi(LESSON, "hybrid", LEVEL_RANKS, a.args, env,
                                   LEVEL_MPIRUN_S);
    /* Every rank, not only rank 1, short of threads: TODO 5 asked MPI for
     * too little (the 1- and 2-rank hybrid tests say so too). */
    ck_assert_msg(strstr(r.err, "hybrid: MPI provides only") == NULL,
                  "%s: every rank, not only rank 1, got a thread level too "
                  "low for its threads (\"hybrid: MPI provides only ...\"). "
                  "Hint: TODO 5: ask MPI_Init_thread for the level the "
                  "threads of this program need", what);
    expect_refused(&r, what, "hybrid: rank 1: MPI provides only "
                   "MPI_THREAD_SINGLE", hint);
    /* Every rank noted, in its report, the level it found, on its way to
     * the check that all of them make together. */
    for (int rank = 0; rank < LEVEL_RANKS; rank++) {
        char *report = report_if_any(out, rank);
        ck_assert_msg(report != NULL, "%s: rank %d never reached the "
                      "driver's check of the thread level (it wrote no "
                      "report): it stopped on its own before. Hint: %s",
                      what, rank, hint);
        unsigned long long level[2] = { 0 };
        ck_assert_msg(harness_report_values(report, "thread_level", level,
                                            2) == 2, "%s: rank %d's report "
                      "has no thread level", what, rank);
        free(report);
    }
    harness_remove_out_dir(out);
    run_result_free(&r);
}
END_TEST

/* Bad input that each rank finds for itself, refused before any work, on
 * every rank together: an --out that is not a folder the program can
 * write to (missing, a file, the kernel's /proc), more threads than
 * MAX_THREADS. Four runs of 2 ranks, each with mpirun's limit below. */
enum { BAD_INPUT_TIMEOUT_S = 50, BAD_INPUT_MPIRUN_S = 11 };

START_TEST(hybrid_bad_input_case)
{
    char scratch[HARNESS_PATH], missing[HARNESS_PATH + 16];
    char file[HARNESS_PATH + 16], proc_self[] = "/proc/self";
    harness_out_dir(scratch);
    snprintf(missing, sizeof missing, "%s/missing", scratch);
    snprintf(file, sizeof file, "%s/a-file", scratch);
    FILE *made = fopen(file, "w");
    ck_assert_msg(made != NULL && fclose(made) == 0, "cannot make %s", file);
    char too_many[32];
    snprintf(too_many, sizeof too_many, "OMP_NUM_THREADS=%d",
             MAX_THREADS + 1);
    char says_too_many[96];
    snprintf(says_too_many, sizeof says_too_many, "hybrid: OMP_NUM_THREADS "
             "asks for %d threads a rank", MAX_THREADS + 1);
    const struct {
        char *out;
        char *threads;
        const char *says;
    } runs[] = {
        { missing, "OMP_NUM_THREADS=2", "no such folder" },
        { file, "OMP_NUM_THREADS=2", "it is a file, not a folder" },
        { proc_self, "OMP_NUM_THREADS=2", "it is inside /proc" },
        { scratch, too_many, says_too_many },
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        char *args[] = { "--m", "64", "--n", "64", "--reps", "1", "--out",
                         runs[k].out, NULL };
        char *env[] = { runs[k].threads, NULL };
        char what[HARNESS_PATH + 96];
        snprintf(what, sizeof what, "hybrid on 2 ranks, %s, --out %s",
                 runs[k].threads, runs[k].out);
        run_result r = harness_run_mpi(LESSON, "hybrid", 2, args, env,
                                       BAD_INPUT_MPIRUN_S);
        expect_refused(&r, what, runs[k].says, "TODO 5: start MPI and "
                       "return; the driver checks its input on every rank "
                       "and refuses bad input together, before any work");
        run_result_free(&r);
    }
    harness_remove_out_dir(scratch);
}
END_TEST

Suite *lesson_suite(void)
{
    static char rows_names[MAX_TEST_THREADS * shape_count][96];
    static char triangular_names[MAX_TEST_THREADS * schedule_count][96];
    static char columns_names[MAX_TEST_THREADS][96];
    static char counters_names[MAX_COUNTER_THREADS][96];
    static char hybrid_names[hybrid_run_count][128];
    Suite *suite = suite_create("03-openmp");
    for (int k = 0; k < MAX_TEST_THREADS * shape_count; k++) {
        int threads = k / shape_count + 1;
        const shape *s = &shapes[k % shape_count];
        snprintf(rows_names[k], sizeof rows_names[k], "rows %zu x %zu, %d "
                 "thread%s: %s", s->m, s->n, threads, threads == 1 ? "" : "s",
                 s->why);
        harness_add(suite, rows_names[k], rows_case, k, ROWS_TIMEOUT_S);
    }
    for (int k = 0; k < MAX_TEST_THREADS * schedule_count; k++) {
        int threads = k / schedule_count + 1;
        snprintf(triangular_names[k], sizeof triangular_names[k],
                 "triangular, %d thread%s, OMP_SCHEDULE=%s", threads,
                 threads == 1 ? "" : "s",
                 schedules[k % schedule_count].omp_schedule);
        harness_add(suite, triangular_names[k], triangular_case, k,
                    TRIANGULAR_TIMEOUT_S);
    }
    for (int k = 0; k < MAX_TEST_THREADS; k++) {
        snprintf(columns_names[k], sizeof columns_names[k], "columns, %d "
                 "thread%s: within the bound, the same on every call", k + 1,
                 k == 0 ? "" : "s");
        harness_add(suite, columns_names[k], columns_case, k,
                    COLUMNS_TIMEOUT_S);
    }
    for (int threads = 1; threads <= MAX_COUNTER_THREADS; threads++) {
        snprintf(counters_names[threads - 1], sizeof counters_names[0],
                 "padded counters, %d thread%s: one cache line each",
                 threads, threads == 1 ? "" : "s");
        harness_add(suite, counters_names[threads - 1], counters_case,
                    threads, COUNTERS_TIMEOUT_S);
    }
    for (int k = 0; k < hybrid_run_count; k++) {
        snprintf(hybrid_names[k], sizeof hybrid_names[k], "hybrid, %d "
                 "rank%s x %d threads: same bits as serial, each row once "
                 "on %d threads, rows only", hybrid_runs[k].ranks,
                 hybrid_runs[k].ranks == 1 ? "" : "s", hybrid_runs[k].threads,
                 hybrid_runs[k].threads);
        harness_add(suite, hybrid_names[k], hybrid_case, k, HYBRID_TIMEOUT_S);
    }
    harness_add(suite, "hybrid, MPI_THREAD_SINGLE on rank 1 of 2: every rank "
                "stops together, one message", hybrid_thread_level_case, 0,
                LEVEL_TIMEOUT_S);
    harness_add(suite, "hybrid, --out not a folder or too many threads: "
                "refused on every rank before any work",
                hybrid_bad_input_case, 0, BAD_INPUT_TIMEOUT_S);
    return suite;
}
