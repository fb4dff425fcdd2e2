/* Lesson 02's tests: the partition, run in the lesson's producer
 * (tests/producer/02-mpi-matvec.c), never in this program; then both splits
 * run under mpirun for P = 1..4. Each run's report says what every rank
 * computed, held and sent; the test checks it against a serial product of
 * the same generated A, the balanced partition, and the bytes the algorithm
 * needs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels.h"
#include "matrix.h"
#include "partition.h"
#include "reference.h"

/* ---- TODO 1, in the producer ---- */

static const struct {
    size_t total;
    int ranks;
    const char *why;
} partitions[] = {
    { 10, 3, "10 rows on 3 ranks: 4, 3, 3" },
    { 10, 4, "10 rows on 4 ranks: 3, 3, 2, 2" },
    { 7, 7, "one row each" },
    { 2, 3, "fewer rows than ranks: the last rank owns none" },
    { 1003, 4, "a remainder of 3" },
    { 5, 1, "one rank owns everything" },
};

/* Runs the producer's partition case: the student's block_range for every
 * rank of one partition, each pair of bounds set to SIZE_MAX before the
 * call (so a bound never written shows), written back as uint64. The
 * bounds are checked here against common's block_range, which this program
 * links (it links no lesson object). */
START_TEST(partition_case)
{
    size_t total = partitions[_i].total;
    int ranks = partitions[_i].ranks;
    uint64_t *rows = malloc(2 * (size_t)ranks * sizeof *rows);
    ck_assert_msg(rows != NULL, "out of memory for %d ranks' rows", ranks);
    char dir[HARNESS_PATH], args[64], what[96];
    snprintf(args, sizeof args, "%zu %d", total, ranks);
    snprintf(what, sizeof what, "block_range(%zu, %d, ...)", total, ranks);
    harness_out_dir(dir);
    /* It returns at once; a producer still running after 8 s loops. */
    run_result r = harness_produce("02-mpi-matvec", "partition", dir, args,
                                   NULL, 8);
    harness_expect_success(&r, what);
    run_result_free(&r);
    harness_read_output(dir, "rows", rows, sizeof *rows, 2 * (size_t)ranks);
    harness_remove_out_dir(dir);

    for (int rank = 0; rank < ranks; rank++) {
        uint64_t begin = rows[2 * rank], end = rows[2 * rank + 1];
        size_t want_begin, want_end;
        block_range(total, (size_t)ranks, (size_t)rank, &want_begin,
                    &want_end);
        ck_assert_msg(begin != (uint64_t)SIZE_MAX && end != (uint64_t)SIZE_MAX,
                      "block_range(%zu, %d, %d) never set *%s (expected "
                      "[%zu, %zu), %s). Hint: TODO 1: set both *begin and "
                      "*end, for every rank", total, ranks, rank,
                      begin == (uint64_t)SIZE_MAX ? "begin" : "end",
                      want_begin, want_end, partitions[_i].why);
        ck_assert_msg(begin == want_begin && end == want_end,
                      "block_range(%zu, %d, %d) gave [%llu, %llu), expected "
                      "[%zu, %zu) (%s). Hint: TODO 1: blocks in rank order, "
                      "sizes differing by at most one, and the first "
                      "total %% ranks ranks (here %zu) owning one row more",
                      total, ranks, rank, (unsigned long long)begin,
                      (unsigned long long)end, want_begin, want_end,
                      partitions[_i].why, total % (size_t)ranks);
    }
    free(rows);
}
END_TEST

/* ---- both splits, under mpirun ---- */

enum { SEED = 7 };

/* The guard the driver puts after every buffer your code writes
 * (lessons/02-mpi-matvec/main.c); it must come back unchanged. */
static const double guard = -0x1.5ca1ab1ep+900;

typedef struct {
    unsigned long long calls, sent, received;
} counted;

/* Adds up every "comm" line of a report; `only` names one call or NULL. */
static counted comm_in(const char *report, const char *only)
{
    counted total = { 0, 0, 0 };
    for (const char *line = report; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char call[64];
        unsigned long long calls, sent, received;
        if (sscanf(line, "comm %63s %llu %llu %llu", call, &calls, &sent,
                   &received) != 4)
            continue;
        if (only != NULL && strcmp(call, only) != 0)
            continue;
        total.calls += calls;
        total.sent += sent;
        total.received += received;
    }
    return total;
}

/* The serial product of the whole generated A: the reference, computed
 * here, independently of the student's code. matvec_rows gives any row the
 * same bits however rows are split (common/kernels.h), so the row split
 * must match it exactly. */
static void serial_y(size_t m, size_t n, double *y, double *bound)
{
    double *A = matrix_alloc_or_exit(m, n, "A");
    double *x = vector_alloc_or_exit(n, "x");
    double *ignored = vector_alloc_or_exit(m, "reference");
    matrix_fill_random(A, m, n, 0, 0, SEED);
    vector_fill_random(x, n, 0, SEED);
    matvec_rows(m, n, A, n, x, y);
    reference_matvec(m, n, A, x, ignored, bound);
    matrix_free(A);
    matrix_free(x);
    matrix_free(ignored);
}

static run_result run_driver(int ranks, size_t m, size_t n, bool columns,
                             const char *out)
{
    char m_text[32], n_text[32], seed_text[32];
    snprintf(m_text, sizeof m_text, "%zu", m);
    snprintf(n_text, sizeof n_text, "%zu", n);
    snprintf(seed_text, sizeof seed_text, "%d", SEED);
    char *args[] = { "--m", m_text, "--n", n_text, "--seed", seed_text,
                     "--reps", "1", "--out", (char *)out,
                     columns ? "--columns" : NULL, NULL };
    /* A run takes a second or two even on 4 ranks of 2 cores; 10 s is a
     * deadlock. */
    return harness_run_mpi("02-mpi-matvec", "matvec_mpi", ranks, args, NULL,
                           10);
}

static unsigned long long report_value(const char *report, const char *key,
                                       int index, int rank)
{
    unsigned long long values[4] = { 0 };
    ck_assert_msg(harness_report_values(report, key, values, 4) > index,
                  "rank %d's report has no \"%s\" line", rank, key);
    return values[index];
}

/* The communication ledger's count of requests this rank started and
 * never completed (common/comm_ledger.h). */
static void expect_requests_completed(const char *report, int rank,
                                      const char *todos)
{
    unsigned long long open = report_value(report, "requests_open", 0, rank);
    char call[64] = "?";
    const char *line = strstr(report, "requests_open ");
    if (open > 0 && line != NULL)
        sscanf(line, "requests_open %*u %63s", call);
    ck_assert_msg(open == 0, "rank %d: %llu MPI request%s never completed "
                  "(the oldest started by %s). Hint: %s: complete every "
                  "request you start (MPI_Wait, MPI_Waitall) before your "
                  "function returns: until then its data may not have "
                  "arrived", rank, open, open == 1 ? "" : "s", call, todos);
}

/* What the rank held, as its own report says (the memory ledger) and as
 * the kernel says from outside its process (the watch): the second is
 * what counts, for memory that no ledger saw (a static array, the stack,
 * malloc). `allowed`: what the rank may hold after its boundary. Under a
 * sanitizer (whose shadow memory and quarantine the kernel counts too)
 * and where nothing is measured outside, the report's own peak. */
static void expect_memory_held(const run_result *r, const char *report,
                               int rank, unsigned long long allowed)
{
    (void)r; /* unused under the sanitizers */
#ifndef HARNESS_SHADOW_MEMORY
    watch_report w = harness_read_watch(r, rank);
    if (w.found || harness_outside_measures()) {
        harness_expect_memory(&w, rank, allowed, "matvec_mpi",
                              "TODO 2: a rank generates only its own rows "
                              "(TODO 5: columns), never all of A");
        return;
    }
#endif
    unsigned long long growth = report_value(report, "peak_growth", 0, rank);
    ck_assert_msg(growth <= allowed + allowed / 4 + (8ull << 20), "rank %d's "
                  "memory grew by %llu bytes while it built its rows and y: "
                  "more than its share of A allows (%llu). Hint: TODO 2: a "
                  "rank generates only its own rows, never all of A", rank,
                  growth, allowed);
}

/* What the ranks' sockets carried, by the kernel's count, against what
 * their MPI calls counted, over all the ranks together: how MPI's
 * broadcast, gather and reduce-scatter spread their bytes over the ranks
 * is the library's business (a tree broadcast forwards x through ranks
 * other than 0), but what crosses in all is what must. */
static void expect_traffic_seen(const run_result *r, const char *out,
                                int ranks, const char *what,
                                const char *hint)
{
    ledger_traffic by_rank[4];
    ck_assert(ranks <= 4);
    for (int rank = 0; rank < ranks; rank++) {
        char *report = harness_read_report(out, rank);
        by_rank[rank] = harness_ledger_traffic(report, ranks);
        free(report);
    }
    harness_expect_traffic_totals(r, ranks, by_rank, what, hint);
}

/* DIR/NAME-rank-R.bin holds `count` values and then the guard; reads the
 * values into `values` and fails, naming `todo`, when the guard changed. */
static void read_guarded(const char *dir, const char *name, int rank,
                         double *values, size_t count, const char *todo)
{
    harness_read_doubles(dir, name, rank, values, count + 1);
    ck_assert_msg(memcmp(&values[count], &guard, sizeof guard) == 0,
                  "rank %d: the double after %s's %zu elements changed (to "
                  "%.17g): your code wrote past the end of %s. Hint: %s",
                  rank, name, count, values[count], name, todo);
}

/* The row split (TODO 1-4) on P ranks: M and N not multiples of P, and
 * blocks of y larger than MPI's eager limit (4 KiB in Open MPI's shared
 * memory transport, and in its TCP one as the harness sets it), so that a
 * send that waits for its receive blocks. */
START_TEST(rows_on_ranks)
{
    const int P = _i;
    const size_t M = 4001, N = 2048; /* A is 65.5 MB: big enough that a
                                        rank holding all of it shows */
    char out[HARNESS_PATH], what[64];
    harness_out_dir(out);
    snprintf(what, sizeof what, "matvec_mpi on %d rank%s", P, P > 1 ? "s" : "");
    run_result r = run_driver(P, M, N, false, out);
    harness_expect_success(&r, what);

    double *expected = vector_alloc_or_exit(M, "y");
    double *bound = vector_alloc_or_exit(M, "b");
    double *y = vector_alloc_or_exit(M + 1, "y from a rank");
    double *x = vector_alloc_or_exit(N, "x");
    double *x_got = vector_alloc_or_exit(N + 1, "x got");
    serial_y(M, N, expected, bound);
    vector_fill_random(x, N, 0, SEED);
    for (int rank = 0; rank < P; rank++) {
        char *report = harness_read_report(out, rank);
        size_t begin, end;
        block_range(M, (size_t)P, (size_t)rank, &begin, &end);
        size_t own = end - begin;

        /* x first: a y made with a wrong x is TODO 3's fault, not 4's. */
        read_guarded(out, "x", rank, x_got, N, "TODO 3");
        comparison_t same_x = compare_bitwise(x, x_got, N);
        if (!comparison_ok(&same_x)) {
            char text[512];
            comparison_describe(&same_x, "x", text, sizeof text);
            ck_abort_msg("rank %d's x after share_x: %s (rank 0's x, made "
                         "here from the seed). Hint: TODO 3: every rank "
                         "needs rank 0's x", rank, text);
        }
        expect_requests_completed(report, rank, "TODO 3 and 4");

        /* Memory: only my rows of A, ever. */
        unsigned long long held = report_value(report, "memory matrix", 1,
                                               rank);
        unsigned long long share = (M + (size_t)P - 1) / (size_t)P * N * 8;
        ck_assert_msg(held <= share, "rank %d held %llu bytes of A at once; "
                      "its share is at most ceil(M/P)*N*8 = %llu. Hint: TODO "
                      "2: a rank generates only its own rows, never all of A",
                      rank, held, share);
        /* The same, whatever allocated it, as the kernel counts it from
         * outside the rank: its rows of A, x, y and its block of y. */
        expect_memory_held(&r, report, rank, share + (N + M + own + 3) * 8);

        /* The partition. */
        unsigned long long b = report_value(report, "rows", 0, rank);
        unsigned long long e = report_value(report, "rows", 1, rank);
        ck_assert_msg(b == begin && e == end, "rank %d of %d owned rows [%llu,"
                      " %llu); the balanced partition gives it [%zu, %zu). "
                      "Hint: TODO 1", rank, P, b, e, begin, end);

        /* y, whole, on every rank. */
        read_guarded(out, "y", rank, y, M, "TODO 4");
        comparison_t c = compare_bitwise(expected, y, M);
        if (!comparison_ok(&c)) {
            char text[512];
            comparison_describe(&c, "y", text, sizeof text);
            ck_abort_msg("rank %d's y: %s; y[%zu] belongs to rank %zu. Hint: "
                         "TODO 4 gives every rank all of y, each block at "
                         "its rows' offset", rank, text, c.first,
                         block_owner(M, (size_t)P, c.first));
        }

        /* Communication: x once, and the rows of y this rank lacks. */
        counted bcast = comm_in(report, "MPI_Bcast");
        counted gather = comm_in(report, "MPI_Allgatherv");
        counted all = comm_in(report, NULL);
        unsigned long long x_in = rank == 0 ? 0 : N * 8;
        unsigned long long x_out = rank == 0 ? (unsigned long long)(P - 1) *
                                   N * 8 : 0;
        ck_assert_msg(P == 1 || (bcast.received == x_in &&
                                 bcast.sent == x_out),
                      "rank %d: x should come from rank 0 by MPI_Bcast (rank "
                      "0 sends %d copies of %zu bytes, the others receive "
                      "one); counted sent %llu, received %llu. Hint: TODO 3",
                      rank, P - 1, N * 8, bcast.sent, bcast.received);
        ck_assert_msg(P == 1 || gather.received == (M - own) * 8,
                      "rank %d should receive exactly the rows of y it does "
                      "not own, (M - %zu)*8 = %zu bytes, through "
                      "MPI_Allgatherv; it received %llu that way. Hint: TODO "
                      "4", rank, own, (M - own) * 8, gather.received);
        ck_assert_msg(all.received == x_in + (M - own) * 8 &&
                      all.sent == x_out + (unsigned long long)(P - 1) * own * 8,
                      "rank %d moved more than the algorithm needs: sent "
                      "%llu bytes and received %llu in all, where x and the "
                      "missing rows of y take %llu and %llu. Its calls:\n%s",
                      rank, all.sent, all.received,
                      x_out + (unsigned long long)(P - 1) * own * 8,
                      x_in + (M - own) * 8, strstr(report, "comm ")
                      ? strstr(report, "comm ") : "(none)");
        free(report);
    }
    matrix_free(expected);
    matrix_free(bound);
    matrix_free(y);
    matrix_free(x);
    matrix_free(x_got);
    expect_traffic_seen(&r, out, P, what, "TODO 3 and 4");
    run_result_free(&r);
    harness_remove_out_dir(out);
}
END_TEST

/* The column split (TODO 5-6). Each y[i] is now a sum of P partial sums:
 * still a sum of the same N products, in another order, so the error bound
 * of a length-N dot product (common/reference.h) still applies. */
START_TEST(columns_on_ranks)
{
    const int P = _i;
    const size_t M = 1201, N = 1001;
    char out[HARNESS_PATH], what[64];
    harness_out_dir(out);
    snprintf(what, sizeof what, "matvec_mpi --columns on %d rank%s", P,
             P > 1 ? "s" : "");
    run_result r = run_driver(P, M, N, true, out);
    harness_expect_success(&r, what);

    double *expected = vector_alloc_or_exit(M, "y");
    double *bound = vector_alloc_or_exit(M, "b");
    double *y = vector_alloc_or_exit(M + 1, "y from a rank");
    serial_y(M, N, expected, bound);
    for (int rank = 0; rank < P; rank++) {
        char *report = harness_read_report(out, rank);
        expect_requests_completed(report, rank, "TODO 6");
        size_t begin, end, row_begin, row_end;
        block_range(N, (size_t)P, (size_t)rank, &begin, &end);
        block_range(M, (size_t)P, (size_t)rank, &row_begin, &row_end);
        size_t own = row_end - row_begin;

        unsigned long long held = report_value(report, "memory matrix", 1,
                                               rank);
        unsigned long long share = M * ((N + (size_t)P - 1) / (size_t)P) * 8;
        ck_assert_msg(held <= share, "rank %d held %llu bytes of A at once; "
                      "its columns take at most M*ceil(N/P)*8 = %llu. Hint: "
                      "TODO 5: only this rank's columns", rank, held, share);

        read_guarded(out, "y", rank, y, own, "TODO 6");
        comparison_t c = compare_within(&expected[row_begin], y,
                                        &bound[row_begin], own);
        if (!comparison_ok(&c)) {
            char text[512];
            comparison_describe(&c, "my block of y", text, sizeof text);
            ck_abort_msg("rank %d (rows %zu..%zu): %s. Hint: TODO 5 (the "
                         "block's first column is column %zu) and TODO 6 "
                         "(sum every rank's partial y; keep your rows)",
                         rank, row_begin, row_end, text, begin);
        }

        counted scatter = comm_in(report, "MPI_Reduce_scatter");
        counted all = comm_in(report, NULL);
        ck_assert_msg(P == 1 || scatter.sent == (M - own) * 8,
                      "rank %d should send only the parts of its partial y "
                      "that other ranks own, (M - %zu)*8 = %zu bytes, through "
                      "MPI_Reduce_scatter; it sent %llu that way. Hint: TODO "
                      "6", rank, own, (M - own) * 8, scatter.sent);
        ck_assert_msg(all.sent == (M - own) * 8 &&
                      all.received == (unsigned long long)(P - 1) * own * 8,
                      "rank %d moved more than the algorithm needs: sent %llu "
                      "and received %llu bytes in all, expected %zu and "
                      "%zu. Its calls:\n%s", rank, all.sent, all.received,
                      (M - own) * 8, (size_t)(P - 1) * own * 8,
                      strstr(report, "comm ") ? strstr(report, "comm ")
                                              : "(none)");
        expect_memory_held(&r, report, rank,
                           share + (M + 2 * ((N + (size_t)P - 1) / (size_t)P)
                                    + own + 3) * 8);
        free(report);
    }
    matrix_free(expected);
    matrix_free(bound);
    matrix_free(y);
    expect_traffic_seen(&r, out, P, what, "TODO 6");
    run_result_free(&r);
    harness_remove_out_dir(out);
}
END_TEST

Suite *lesson_suite(void)
{
    /* The names made here: one per partition case, rows and columns on
     * 1..4 ranks each. */
    enum { partition_count = sizeof partitions / sizeof partitions[0] };
    static char names[partition_count + 2 * 4][96];
    int k = 0;
    Suite *suite = suite_create("02-mpi-matvec");
    for (size_t c = 0; c < partition_count; c++) {
        snprintf(names[k], sizeof names[k], "partition: %s",
                 partitions[c].why);
        harness_add(suite, names[k++], partition_case, (int)c, 10);
    }
    for (int P = 1; P <= 4; P++) {
        snprintf(names[k], sizeof names[k], "rows on %d rank%s", P,
                 P > 1 ? "s" : "");
        harness_add(suite, names[k++], rows_on_ranks, P, 20);
    }
    for (int P = 1; P <= 4; P++) {
        snprintf(names[k], sizeof names[k], "columns on %d rank%s", P,
                 P > 1 ? "s" : "");
        harness_add(suite, names[k++], columns_on_ranks, P, 20);
    }
    return suite;
}
