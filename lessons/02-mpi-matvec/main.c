/* Lesson 02's driver: y = Ax with A split across MPI ranks, by rows (the
 * default) or by columns (--columns). It calls your functions in the order
 * of the lesson, checks the result against A and x made again from the
 * seed (never against a rank's own copies), times the computation and the
 * communication apart, and with --out DIR reports to the tests what each
 * rank computed, held and sent. You do not need to change this file.
 *
 *   scripts/mpirun -np 4 build/student/02-mpi-matvec/matvec_mpi --m 4096 --n 4096 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>

#include <mpi.h>

#include "boundary.h"
#include "check_mpi.h"
#include "cli.h"
#include "comm_ledger.h"
#include "compare.h"
#include "kernels.h"
#include "matrix.h"
#include "matvec_mpi.h"
#include "memory_ledger.h"
#include "reference.h"
#include "report.h"
#include "steps.h"
#include "timer.h"

typedef struct {
    size_t m, n;
    uint64_t seed;
    int reps;
    bool columns;
    const char *out;
    FILE *report;       /* OUT/rank-R.txt, opened before any work */
    int rank, ranks;
} run_config;

/* What a guard element holds: the one double after every buffer your code
 * writes (x, y). No entry of A, x or y comes near it, so a write past the
 * end shows. */
static const double guard = -0x1.5ca1ab1ep+900;

/* What one rank ends with: its block of y and where it sits in y. */
typedef struct {
    unsigned long long peak_before;  /* peak resident bytes before TODO 2 */
    double *y;          /* rows: all of y (m); columns: my block of rows;
                           then the guard */
    double *x;          /* rows: x as share_x left it (n), then the guard;
                           columns: NULL */
    size_t y_offset, y_count;
    double compute_s, comm_s;  /* medians over the timed repetitions */
} split_run;

/* The blocks of block_range must tile [0, total) in rank order: the rest
 * of the driver relies on it, so it is checked first, by every rank alike
 * (no communication needed), and a broken partition stops every rank with
 * a message that says what is wrong. */
static void check_partition(const run_config *c, size_t total,
                            const char *items)
{
    size_t next = 0;
    for (int r = 0; r < c->ranks; r++) {
        size_t begin, end;
        block_range(total, (size_t)c->ranks, (size_t)r, &begin, &end);
        if (begin != next || end < begin || end > total) {
            if (c->rank == 0)
                fprintf(stderr, "matvec_mpi: block_range(%zu, %d, %d) gives "
                        "[%zu, %zu), but rank %d's %s should start at %zu "
                        "and end by %zu: the blocks must tile [0, %zu) in "
                        "rank order (TODO 1)\n", total, c->ranks, r, begin,
                        end, r, items, next, total, total);
            mpi_exit_all(1);
        }
        next = end;
    }
    if (next != total) {
        if (c->rank == 0)
            fprintf(stderr, "matvec_mpi: block_range's blocks end at %zu, so "
                    "%s %zu..%zu belong to no rank (TODO 1)\n", next, items,
                    next, total - 1);
        mpi_exit_all(1);
    }
}

/* The most memory this process has held so far, in bytes (its peak
 * resident set). The memory ledger sees only what goes through
 * matrix_alloc_or_exit; this sees everything, however it was allocated. */
static unsigned long long peak_resident_bytes(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) != 0)
        return 0;
#ifdef __APPLE__
    return (unsigned long long)usage.ru_maxrss;          /* bytes */
#else
    return (unsigned long long)usage.ru_maxrss * 1024u;  /* KiB */
#endif
}

/* Writes this rank's report: its blocks, the memory and communication
 * ledgers as they stand after your code ran, and the buffers your code
 * wrote, each with its guard: y, and x in the row split. */
static void write_report(const run_config *c, const split_run *r,
                         size_t begin, size_t end)
{
    if (c->report == NULL)
        return;
    FILE *report = c->report;
    fprintf(report, "variant %s\nranks %d\n%s %zu %zu\ny %zu %zu\n",
            c->columns ? "columns" : "rows", c->ranks,
            c->columns ? "columns" : "rows", begin, end, r->y_offset,
            r->y_count);
    unsigned long long peak = peak_resident_bytes();
    fprintf(report, "peak_growth %llu\n",
            peak > r->peak_before ? peak - r->peak_before : 0);
    memory_ledger_write(report);
    comm_ledger_write(report);
    if (fclose(report) != 0 ||
        report_write_doubles(c->out, "y", c->rank, r->y, r->y_count + 1) != 0 ||
        (r->x != NULL &&
         report_write_doubles(c->out, "x", c->rank, r->x, c->n + 1) != 0))
        MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The first element where a and b differ in their bits; n if none. */
static size_t first_difference(const double *a, const double *b, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (memcmp(&a[k], &b[k], sizeof a[k]) != 0)
            return k;
    return n;
}

/* The line of a check that found something wrong, into `why`; returns
 * the TODO it names. */
__attribute__((format(printf, 4, 5)))
static int wrong(int todo, char *why, size_t why_len, const char *format,
                 ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(why, why_len, format, arguments);
    va_end(arguments);
    return todo;
}

/* Checks the row split against A and x made here again from the seed, not
 * against what this rank holds: a rank that never received x must not find
 * its y "right" because it used the same wrong x twice. Returns the TODO of
 * the first thing wrong on this rank, its line in `why`, or 0 when all is
 * right (report_first_wrong says it). */
static int check_rows(const run_config *c, const double *A,
                      const double *my_y, const split_run *r, size_t begin,
                      size_t end, char *why, size_t why_len)
{
    const size_t n = c->n;
    double *x = vector_alloc_or_exit(n, "x, made again");
    double *row = vector_alloc_or_exit(n, "a row of A, made again");
    vector_fill_random(x, n, 0, c->seed);
    int todo = 0;
    size_t k = first_difference(x, r->x, n);
    if (k < n)
        todo = wrong(3, why, why_len, "matvec_mpi: rank %d: after "
                     "share_x, x[%zu] is %.17g, not rank 0's %.17g: "
                     "every rank needs rank 0's x (TODO 3)", c->rank, k,
                     r->x[k], x[k]);
    else if (memcmp(&r->x[n], &guard, sizeof guard) != 0)
        todo = wrong(3, why, why_len, "matvec_mpi: rank %d: share_x wrote "
                     "past the end of x, into x[%zu] (TODO 3)", c->rank,
                     n);
    else {
        size_t i = begin;
        for (; i < end; i++) {
            matrix_fill_random(row, 1, n, i, 0, c->seed);
            if (first_difference(row, &A[(i - begin) * n], n) < n)
                break;
        }
        if (i < end)
            todo = wrong(2, why, why_len, "matvec_mpi: rank %d: row %zu "
                         "of the block generate_my_rows gave is not row "
                         "%zu of A: its first row is row begin (TODO 2)",
                         c->rank, i - begin, i);
        else if (memcmp(&r->y[c->m], &guard, sizeof guard) != 0)
            todo = wrong(4, why, why_len, "matvec_mpi: rank %d: assemble_y "
                         "wrote past the end of y, into y[%zu] (TODO 4)",
                         c->rank, c->m);
        else if ((k = first_difference(my_y, &r->y[begin], end - begin)) <
                 end - begin)
            todo = wrong(4, why, why_len, "matvec_mpi: rank %d: after "
                         "assemble_y, y[%zu] is not the value this rank "
                         "computed (TODO 4)", c->rank, begin + k);
        else {
            /* Every row of y, as one call over all rows would give it
             * (common/kernels.h: the same bits however rows are split). */
            double want = 0;
            for (i = 0; i < c->m; i++) {
                matrix_fill_random(row, 1, n, i, 0, c->seed);
                matvec_rows(1, n, row, n, x, &want);
                if (memcmp(&want, &r->y[i], sizeof want) != 0)
                    break;
            }
            if (i < c->m) {
                size_t owner = 0, owner_begin = 0, owner_end = 0;
                for (int o = 0; o < c->ranks; o++) {
                    block_range(c->m, (size_t)c->ranks, (size_t)o,
                                &owner_begin, &owner_end);
                    if (i >= owner_begin && i < owner_end)
                        owner = (size_t)o;
                }
                todo = 4;
                snprintf(why, why_len, "matvec_mpi: rank %d: y[%zu] is "
                         "%.17g, expected %.17g; row %zu is rank %zu's: every "
                         "rank needs every block of y at its rows' offset "
                         "(TODO 4)", c->rank, i, r->y[i], want, i, owner);
            }
        }
    }
    matrix_free(x);
    matrix_free(row);
    return todo;
}

/* After a split's checks on every rank: the first thing wrong in the
 * lesson's order, whichever rank found it. The ranks agree on the lowest
 * TODO any of them found wrong, and only those that found it say so, so
 * that the line a test reads does not depend on which rank spoke first (a
 * rank that never got x finds TODO 3, and rank 0, which had x all along,
 * the y that rank computed with it, TODO 4). Then every rank ends,
 * status 1. Nothing wrong anywhere: returns. */
static void report_first_wrong(int todo, const char *why)
{
    int first = todo > 0 ? todo : INT_MAX;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN,
                            MPI_COMM_WORLD));
    if (first == INT_MAX)
        return;
    if (todo == first)
        fprintf(stderr, "%s\n", why);
    mpi_exit_all(1);
}

/* The row split: TODO 1-4. */
static split_run run_rows(const run_config *c)
{
    split_run r = { 0 };
    size_t begin, end;

    steps_enter("TODO 1: block_range");
    check_partition(c, c->m, "rows");
    block_range(c->m, (size_t)c->ranks, (size_t)c->rank, &begin, &end);
    size_t my_rows = end - begin;

    steps_enter("TODO 2: generate_my_rows");
    r.peak_before = peak_resident_bytes();
    double *A = generate_my_rows(c->n, begin, end, c->seed);
    r.x = vector_alloc_or_exit(c->n + 1, "x");
    r.x[c->n] = guard;
    if (c->rank == 0)
        vector_fill_random(r.x, c->n, 0, c->seed);

    steps_enter("TODO 3: share_x");
    share_x(r.x, c->n, MPI_COMM_WORLD);

    steps_enter("local product");
    double *my_y = vector_alloc_or_exit(my_rows, "my rows of y");
    matvec_rows(my_rows, c->n, A, c->n, r.x, my_y);

    steps_enter("TODO 4: assemble_y");
    r.y = vector_alloc_or_exit(c->m + 1, "y");
    r.y[c->m] = guard;
    assemble_y(my_y, r.y, c->m, MPI_COMM_WORLD);
    r.y_offset = 0;
    r.y_count = c->m;
    steps_enter("report");
    mpi_mark_done();
    write_report(c, &r, begin, end);

    steps_enter("check");
    char why[512] = "";
    report_first_wrong(check_rows(c, A, my_y, &r, begin, end, why,
                                  sizeof why), why);

    /* Timing: the product and the assembly of y, apart. */
    steps_enter("timing");
    double compute[TIMINGS_MAX], comm[TIMINGS_MAX];
    for (int k = 0; k < c->reps; k++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double start = timer_now();
        matvec_rows(my_rows, c->n, A, c->n, r.x, my_y);
        double middle = timer_now();
        assemble_y(my_y, r.y, c->m, MPI_COMM_WORLD);
        comm[k] = timer_now() - middle;
        compute[k] = middle - start;
    }
    r.compute_s = timings_median(compute, c->reps);
    r.comm_s = timings_median(comm, c->reps);

    matrix_free(my_y);
    matrix_free(A);
    return r;
}

/* Checks the column split against rows of A and x made here from the seed.
 * Returns whether all is right; says the first thing wrong otherwise. */
static int check_columns(const run_config *c, const double *A,
                         const split_run *r, size_t begin, size_t end,
                         char *why, size_t why_len)
{
    const size_t width = end - begin;
    double *row = vector_alloc_or_exit(c->n, "a row of A, made again");
    double *x = vector_alloc_or_exit(c->n, "x, made again");
    vector_fill_random(x, c->n, 0, c->seed);
    int todo = 0;
    size_t i = 0;
    for (; i < c->m; i++) {
        matrix_fill_random(row, 1, width, i, begin, c->seed);
        if (first_difference(row, &A[i * width], width) < width)
            break;
    }
    if (i < c->m)
        todo = wrong(5, why, why_len, "matvec_mpi: rank %d: row %zu of the "
                     "block generate_my_columns gave is not columns "
                     "%zu..%zu of A: its first column is column begin "
                     "(TODO 5)", c->rank, i, begin, end - 1);
    else if (memcmp(&r->y[r->y_count], &guard, sizeof guard) != 0)
        todo = wrong(6, why, why_len, "matvec_mpi: rank %d: "
                     "reduce_scatter_y wrote past the end of its %zu "
                     "rows of y (TODO 6)", c->rank, r->y_count);
    else {
        /* Each y[i] is a sum of the same n products as one dot product's,
         * in another order: reference.h's bound for length n holds. */
        comparison_t mismatch = { 0 };
        for (size_t k = 0; k < r->y_count && comparison_ok(&mismatch); k++) {
            double want, bound;
            matrix_fill_random(row, 1, c->n, r->y_offset + k, 0, c->seed);
            reference_matvec(1, c->n, row, x, &want, &bound);
            mismatch = compare_within(&want, &r->y[k], &bound, 1);
            mismatch.first = k;
        }
        if (!comparison_ok(&mismatch))
            todo = wrong(6, why, why_len, "matvec_mpi: rank %d: y[%zu] is "
                         "%.17g, expected %.17g: the sum over every "
                         "rank's partial y, for this rank's rows "
                         "(TODO 6)", c->rank, r->y_offset + mismatch.first,
                         mismatch.got, mismatch.expected);
    }
    matrix_free(row);
    matrix_free(x);
    return todo;
}

/* The column split: TODO 5-6. */
static split_run run_columns(const run_config *c)
{
    split_run r = { 0 };
    size_t begin, end, row_begin, row_end;

    steps_enter("TODO 1: block_range (over columns)");
    check_partition(c, c->n, "columns");
    check_partition(c, c->m, "rows");
    block_range(c->n, (size_t)c->ranks, (size_t)c->rank, &begin, &end);
    block_range(c->m, (size_t)c->ranks, (size_t)c->rank, &row_begin,
                &row_end);
    size_t width = end - begin;

    steps_enter("TODO 5: generate_my_columns");
    r.peak_before = peak_resident_bytes();
    double *A = generate_my_columns(c->m, begin, end, c->seed);
    /* My slice of x: the entries that meet my columns. */
    double *x_slice = vector_alloc_or_exit(width, "my slice of x");
    vector_fill_random(x_slice, width, begin, c->seed);

    steps_enter("local product");
    double *partial_y = vector_alloc_or_exit(c->m, "partial y");
    matvec_rows(c->m, width, A, width, x_slice, partial_y);

    steps_enter("TODO 6: reduce_scatter_y");
    r.y_offset = row_begin;
    r.y_count = row_end - row_begin;
    r.y = vector_alloc_or_exit(r.y_count + 1, "my rows of y");
    r.y[r.y_count] = guard;
    reduce_scatter_y(partial_y, r.y, c->m, MPI_COMM_WORLD);
    steps_enter("report");
    mpi_mark_done();
    write_report(c, &r, begin, end);

    /* Checking is not part of the algorithm's memory: it comes after the
     * report, one row at a time. */
    steps_enter("check");
    char why[512] = "";
    report_first_wrong(check_columns(c, A, &r, begin, end, why, sizeof why),
                       why);

    steps_enter("timing");
    double compute[TIMINGS_MAX], comm[TIMINGS_MAX];
    for (int k = 0; k < c->reps; k++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double start = timer_now();
        matvec_rows(c->m, width, A, width, x_slice, partial_y);
        double middle = timer_now();
        reduce_scatter_y(partial_y, r.y, c->m, MPI_COMM_WORLD);
        comm[k] = timer_now() - middle;
        compute[k] = middle - start;
    }
    r.compute_s = timings_median(compute, c->reps);
    r.comm_s = timings_median(comm, c->reps);

    matrix_free(partial_y);
    matrix_free(x_slice);
    matrix_free(A);
    return r;
}

int main(int argc, char **argv)
{
    run_config c = { .m = 4096, .n = 4096, .seed = 1, .reps = 10 };
    const cli_option options[] = {
        { "m", CLI_SIZE, &c.m, "rows of A", 1, 1u << 27 },
        { "n", CLI_SIZE, &c.n, "columns of A", 1, 1u << 27 },
        { "seed", CLI_SEED, &c.seed, "seed that A and x are generated from",
          0, 0 },
        { "reps", CLI_INT, &c.reps, "timed repetitions", 1, TIMINGS_MAX },
        { "columns", CLI_FLAG, &c.columns, "split the columns, not the rows",
          0, 0 },
        { "out", CLI_STRING, &c.out, "folder for the report to the tests",
          0, 0 },
    };
    const cli_spec spec = { "matvec_mpi", "lesson 02: y = Ax with A split "
                            "across MPI ranks, by rows or by columns",
                            options, sizeof options / sizeof options[0] };

    mpi_start_or_exit(&argc, &argv, &spec, &c.rank, &c.ranks);
    size_t split = c.columns ? c.n : c.m;
    if ((size_t)c.ranks > split) {
        if (c.rank == 0)
            fprintf(stderr, "matvec_mpi: more ranks (%d) than %s (%zu): some "
                    "ranks would have nothing to do; use at most %zu ranks\n",
                    c.ranks, c.columns ? "columns" : "rows", split, split);
        mpi_exit_all(2);
    }

    c.report = mpi_report_open_or_exit("matvec_mpi", c.out, c.rank);
    /* From here on your code runs: behind the boundary when graded. */
    const char *const reports[] = { "y", c.columns ? NULL : "x", NULL };
    mpi_enter_boundary_or_exit("matvec_mpi", c.report, c.out, c.rank,
                               reports);

    comm_ledger_reset();
    split_run r = c.columns ? run_columns(&c) : run_rows(&c);

    /* The slowest rank decides how long the product took. */
    double times[2] = { r.compute_s, r.comm_s };
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, times, 2, MPI_DOUBLE, MPI_MAX,
                            MPI_COMM_WORLD));
    if (c.rank == 0) {
        double total = times[0] + times[1];
        double bytes = 8.0 * (double)c.m * (double)c.n;
        printf("matvec_mpi: y = Ax, A is %zu x %zu, split by %s over %d "
               "rank%s: right\n", c.m, c.n, c.columns ? "columns" : "rows",
               c.ranks, c.ranks == 1 ? "" : "s");
        printf("  compute %.3f ms, communicate %.3f ms, total %.3f ms "
               "(slowest rank, medians of %d); A streamed at %.2f GB/s\n",
               1e3 * times[0], 1e3 * times[1], 1e3 * total, c.reps,
               bytes / total / 1e9);
        printf("summary: variant=%s ranks=%d compute_ms=%.3f comm_ms=%.3f "
               "total_ms=%.3f\n", c.columns ? "columns" : "rows", c.ranks,
               1e3 * times[0], 1e3 * times[1], 1e3 * total);
    }
    matrix_free(r.y);
    matrix_free(r.x);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
