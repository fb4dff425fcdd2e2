/* Lesson 02's driver: y = Ax with A split across MPI ranks, by rows (the
 * default) or by columns (--columns). It calls your functions in the order
 * of the lesson, checks the result, times the computation and the
 * communication apart, and with --out DIR reports to the tests what each
 * rank computed, held and sent. You do not need to change this file.
 *
 *   mpirun -np 4 build/student/02-mpi-matvec/matvec_mpi --m 4096 --n 4096 */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <sys/resource.h>

#include <mpi.h>

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
    int rank, ranks;
} run_config;

/* What one rank ends with: its block of y and where it sits in y. */
typedef struct {
    unsigned long long peak_before;  /* peak resident bytes before TODO 2 */
    double *y;          /* rows: all of y (m); columns: my block of rows */
    size_t y_offset, y_count;
    double compute_s, comm_s;  /* medians over the timed repetitions */
} run_result;

/* The blocks of rows_of_rank must tile [0, total) in rank order: the rest
 * of the driver relies on it, so it is checked first, by every rank alike
 * (no communication needed), and a broken partition stops every rank with
 * a message that says what is wrong. */
static void check_partition(const run_config *c, size_t total,
                            const char *items)
{
    size_t next = 0;
    for (int r = 0; r < c->ranks; r++) {
        size_t begin, end;
        rows_of_rank(total, c->ranks, r, &begin, &end);
        if (begin != next || end < begin || end > total) {
            if (c->rank == 0)
                fprintf(stderr, "matvec_mpi: rows_of_rank(%zu, %d, %d) gives "
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
            fprintf(stderr, "matvec_mpi: rows_of_rank's blocks end at %zu, so "
                    "%s %zu..%zu belong to no rank (TODO 1)\n", next, items,
                    next, total - 1);
        mpi_exit_all(1);
    }
}

/* The most memory this process has held so far, in bytes (its peak
 * resident set). The memory ledger sees only what goes through
 * matrix_alloc; this sees everything, however it was allocated. */
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
 * ledgers as they stand after your code ran, and its y. */
static void write_report(const run_config *c, const run_result *r,
                         size_t begin, size_t end)
{
    if (c->out == NULL)
        return;
    FILE *report = report_open(c->out, c->rank);
    if (report == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    fprintf(report, "variant %s\nranks %d\n%s %zu %zu\ny %zu %zu\n",
            c->columns ? "columns" : "rows", c->ranks,
            c->columns ? "columns" : "rows", begin, end, r->y_offset,
            r->y_count);
    unsigned long long peak = peak_resident_bytes();
    fprintf(report, "peak_growth %llu\n",
            peak > r->peak_before ? peak - r->peak_before : 0);
    memory_ledger_write(report);
    comm_ledger_write(report);
    fclose(report);
    if (report_write_doubles(c->out, "y", c->rank, r->y, r->y_count) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
}

/* The row split: TODO 1-4. */
static run_result run_rows(const run_config *c)
{
    run_result r = { 0 };
    size_t begin, end;

    steps_enter("TODO 1: rows_of_rank");
    check_partition(c, c->m, "rows");
    rows_of_rank(c->m, c->ranks, c->rank, &begin, &end);
    size_t my_rows = end - begin;

    steps_enter("TODO 2: generate_my_rows");
    r.peak_before = peak_resident_bytes();
    double *A = generate_my_rows(c->n, begin, end, c->seed);
    double *x = vector_alloc(c->n, "x");
    if (c->rank == 0)
        vector_fill_random(x, c->n, 0, c->seed);

    steps_enter("TODO 3: share_x");
    share_x(x, c->n, MPI_COMM_WORLD);

    steps_enter("local product");
    double *my_y = vector_alloc(my_rows, "my rows of y");
    matvec_rows(my_rows, c->n, A, c->n, x, my_y);

    steps_enter("TODO 4: assemble_y");
    r.y = vector_alloc(c->m, "y");
    assemble_y(my_y, r.y, c->m, MPI_COMM_WORLD);
    r.y_offset = 0;
    r.y_count = c->m;
    steps_enter("report");
    write_report(c, &r, begin, end);

    /* Check: my rows of the assembled y are the ones I computed, and they
     * are right (each rank checks its own rows against a reference). */
    steps_enter("check");
    double *expected = vector_alloc(my_rows, "reference");
    double *bound = vector_alloc(my_rows, "bounds");
    reference_matvec(my_rows, c->n, A, x, expected, bound);
    comparison_t mine = compare_bitwise(my_y, &r.y[begin], my_rows);
    comparison_t right = compare_within(expected, my_y, bound, my_rows);
    if (!comparison_ok(&mine))
        fprintf(stderr, "matvec_mpi: rank %d: after assemble_y, y[%zu] is "
                "not the value this rank computed (TODO 4)\n", c->rank,
                begin + mine.first);
    else if (!comparison_ok(&right))
        fprintf(stderr, "matvec_mpi: rank %d: y[%zu] is wrong: are x and the "
                "rows right? (TODO 2, 3)\n", c->rank, begin + right.first);
    int failed = !comparison_ok(&mine) || !comparison_ok(&right);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (failed)
        mpi_exit_all(1);

    /* Timing: the product and the assembly of y, apart. */
    steps_enter("timing");
    double compute[1000], comm[1000];
    for (int k = 0; k < c->reps; k++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double start = timer_now();
        matvec_rows(my_rows, c->n, A, c->n, x, my_y);
        double middle = timer_now();
        assemble_y(my_y, r.y, c->m, MPI_COMM_WORLD);
        comm[k] = timer_now() - middle;
        compute[k] = middle - start;
    }
    r.compute_s = timings_median(compute, c->reps);
    r.comm_s = timings_median(comm, c->reps);

    matrix_free(expected);
    matrix_free(bound);
    matrix_free(my_y);
    matrix_free(x);
    matrix_free(A);
    return r;
}

/* The column split: TODO 5-6. */
static run_result run_columns(const run_config *c)
{
    run_result r = { 0 };
    size_t begin, end, row_begin, row_end;

    steps_enter("TODO 1: rows_of_rank (over columns)");
    check_partition(c, c->n, "columns");
    check_partition(c, c->m, "rows");
    rows_of_rank(c->n, c->ranks, c->rank, &begin, &end);
    rows_of_rank(c->m, c->ranks, c->rank, &row_begin, &row_end);
    size_t width = end - begin;

    steps_enter("TODO 5: generate_my_columns");
    r.peak_before = peak_resident_bytes();
    double *A = generate_my_columns(c->m, begin, end, c->seed);
    /* My slice of x: the entries that meet my columns. */
    double *x_slice = vector_alloc(width, "my slice of x");
    vector_fill_random(x_slice, width, begin, c->seed);

    steps_enter("local product");
    double *partial_y = vector_alloc(c->m, "partial y");
    matvec_rows(c->m, width, A, width, x_slice, partial_y);

    steps_enter("TODO 6: reduce_scatter_y");
    r.y_offset = row_begin;
    r.y_count = row_end - row_begin;
    r.y = vector_alloc(r.y_count, "my rows of y");
    reduce_scatter_y(partial_y, r.y, c->m, MPI_COMM_WORLD);
    steps_enter("report");
    write_report(c, &r, begin, end);

    /* Check my rows of y against whole rows of A, generated only now, after
     * the report: checking is not part of the algorithm's memory. */
    steps_enter("check");
    double *rows = matrix_alloc(r.y_count, c->n, "reference rows");
    double *x = vector_alloc(c->n, "x");
    double *expected = vector_alloc(r.y_count, "reference");
    double *bound = vector_alloc(r.y_count, "bounds");
    matrix_fill_random(rows, r.y_count, c->n, row_begin, 0, c->seed);
    vector_fill_random(x, c->n, 0, c->seed);
    reference_matvec(r.y_count, c->n, rows, x, expected, bound);
    comparison_t right = compare_within(expected, r.y, bound, r.y_count);
    if (!comparison_ok(&right))
        fprintf(stderr, "matvec_mpi: rank %d: y[%zu] is wrong (TODO 5, 6)\n",
                c->rank, row_begin + right.first);
    int failed = !comparison_ok(&right);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (failed)
        mpi_exit_all(1);
    matrix_free(rows);
    matrix_free(x);
    matrix_free(expected);
    matrix_free(bound);

    steps_enter("timing");
    double compute[1000], comm[1000];
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
        { "reps", CLI_INT, &c.reps, "timed repetitions", 1, 1000 },
        { "columns", CLI_FLAG, &c.columns, "split the columns, not the rows",
          0, 0 },
        { "out", CLI_STRING, &c.out, "folder for the report to the tests",
          0, 0 },
    };
    const cli_spec spec = { "matvec_mpi", "lesson 02: y = Ax with A split "
                            "across MPI ranks, by rows or by columns",
                            options, sizeof options / sizeof options[0] };

    mpi_start(&argc, &argv, &spec, &c.rank, &c.ranks);
    size_t split = c.columns ? c.n : c.m;
    if ((size_t)c.ranks > split) {
        if (c.rank == 0)
            fprintf(stderr, "matvec_mpi: more ranks (%d) than %s (%zu): some "
                    "ranks would have nothing to do; use at most %zu ranks\n",
                    c.ranks, c.columns ? "columns" : "rows", split, split);
        mpi_exit_all(2);
    }

    /* A report folder that cannot be written is bad input too: found now,
     * not after the work is done. */
    int unwritable = c.out != NULL && access(c.out, W_OK) != 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &unwritable, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (unwritable) {
        if (c.rank == 0)
            fprintf(stderr, "matvec_mpi: --out: cannot write to '%s'\n",
                    c.out);
        mpi_exit_all(2);
    }

    comm_ledger_reset();
    run_result r = c.columns ? run_columns(&c) : run_rows(&c);

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
    MPI_CHECK(MPI_Finalize());
    return 0;
}
