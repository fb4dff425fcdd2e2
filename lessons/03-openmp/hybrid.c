/* Lesson 03, hybrid MPI + OpenMP y = Ax: the ranks split the rows of A, as
 * in lesson 02, and the OpenMP threads of each rank split its rows again.
 * You write: starting MPI in a program that has threads (TODO 5), and the
 * local product on this rank's threads (TODO 6).
 * Given: the flags, the partition, each rank's rows of A and all of x, the
 * assembly of y, the check, the timing, and the report for the tests.
 * Run: make check L=03, or
 *   OMP_NUM_THREADS=2 mpirun -np 2 --bind-to none build/student/03-openmp/hybrid
 * (the lesson text explains the placement flags). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>
#include <omp.h>

#include "check_mpi.h"
#include "cli.h"
#include "comm_ledger.h"
#include "compare.h"
#include "matrix.h"
#include "memory_ledger.h"
#include "not_done.h"
#include "omp_matvec.h"
#include "partition.h"
#include "reference.h"
#include "report.h"
#include "steps.h"
#include "timer.h"

/* MPI's four thread levels, weakest first, by name. */
static const char *thread_level_name(int level)
{
    if (level == MPI_THREAD_SINGLE)
        return "MPI_THREAD_SINGLE";
    if (level == MPI_THREAD_FUNNELED)
        return "MPI_THREAD_FUNNELED";
    if (level == MPI_THREAD_SERIALIZED)
        return "MPI_THREAD_SERIALIZED";
    if (level == MPI_THREAD_MULTIPLE)
        return "MPI_THREAD_MULTIPLE";
    return "an unknown thread level";
}

/* Starts MPI for a program whose threads never call MPI themselves: only
 * the thread that started MPI does. Returns the thread level MPI provides;
 * when that is less than the program needs, every rank stops with exit
 * status 2. */
static int start_mpi(int *argc, char ***argv)
{
    int provided = -1;
    /* TODO 5 start: start MPI, asking for MPI_THREAD_FUNNELED, and keep the
     * level MPI provides in `provided`; call mpi_check_init() right after,
     * as in lesson 00. MPI may provide less than you ask for, and the level
     * may differ from rank to rank. If it is below FUNNELED on any rank,
     * every rank must end with exit status 2 (mpi_exit_all), and rank 0
     * alone says why, in one line (thread_level_name names a level). A rank
     * that stopped on its own would leave the others waiting for it
     * forever, so the ranks decide together. */
    NOT_DONE();
    /* TODO 5 end */
    return provided;
}

/* y = A x for this rank's rows, on this rank's OpenMP threads.
 * block is (rows, n) row-major, x is (n), y is (rows). */
static void local_product(size_t rows, size_t n, const double *block,
                          const double *x, double *y)
{
    /* TODO 6 start: the product of this rank's rows with x, shared among
     * this rank's threads: your kernel from TODO 1 does exactly that.
     * Under MPI_THREAD_FUNNELED only the thread that started MPI may call
     * MPI, so no MPI call may sit inside a parallel region: the threads
     * compute, and the main thread communicates after they have finished. */
    NOT_DONE();
    /* TODO 6 end */
}

/* Writes this rank's report for the tests: the rows it owns, the OpenMP
 * threads it ran, the thread level MPI really provides (asked of MPI, not
 * taken from start_mpi), the ledgers, and the assembled y. */
static void write_report(const char *out, int rank, int ranks, size_t row0,
                         size_t row1, const double *y, size_t m)
{
    int level = -1;
    MPI_CHECK(MPI_Query_thread(&level));
    FILE *report = report_open(out, rank);
    if (report == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    fprintf(report, "ranks %d\nthreads %d\nrows %zu %zu\n", ranks,
            omp_get_max_threads(), row0, row1);
    /* The level and FUNNELED as this MPI numbers them (the standard fixes
     * their order, not their values), then the name for people. */
    fprintf(report, "thread_level %d %d %s\n", level,
            (int)MPI_THREAD_FUNNELED, thread_level_name(level));
    memory_ledger_write(report);
    comm_ledger_write(report);
    if (fclose(report) != 0 ||
        report_write_doubles(out, "y", rank, y, m) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    size_t m = 4096, n = 4096;
    uint64_t seed = 1;
    int reps = 5;
    const char *out = NULL;
    const cli_option options[] = {
        { "m", CLI_SIZE, &m, "rows of A", 1, 1u << 30 },
        { "n", CLI_SIZE, &n, "columns of A", 1, 1u << 30 },
        { "seed", CLI_SEED, &seed, "seed that A and x are generated from",
          0, 0 },
        { "reps", CLI_INT, &reps, "timed repetitions of the local product",
          1, 1000 },
        { "out", CLI_STRING, &out, "folder for each rank's report (the "
          "tests read it)", 0, 0 },
    };
    const cli_spec spec = { "hybrid", "lesson 03: y = Ax on MPI ranks, "
                            "each with OpenMP threads", options,
                            sizeof options / sizeof options[0] };

    int provided = start_mpi(&argc, &argv);
    int rank, ranks;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    steps_open(rank);

    /* Every rank parses the same flags and reaches the same verdict, so all
     * of them exit together; only rank 0 speaks. */
    char error[256];
    int status = cli_report(&spec, cli_parse(&spec, argc, argv, error,
                                             sizeof error),
                            error, rank != 0);
    if (status >= 0)
        mpi_exit_all(status);

    /* My rows of A, generated here: no rank ever holds the whole matrix. */
    steps_enter("generate my rows of A, and x");
    size_t row0, row1;
    block_range(m, (size_t)ranks, (size_t)rank, &row0, &row1);
    size_t my_rows = row1 - row0;
    double *block = matrix_alloc(my_rows, n, "my rows of A");
    matrix_fill_random(block, my_rows, n, row0, 0, seed);
    double *x = vector_alloc(n, "x");
    vector_fill_random(x, n, 0, seed);
    double *my_y = vector_alloc(my_rows, "my rows of y");
    double *y = vector_alloc(m, "y");
    int *counts = malloc((size_t)ranks * sizeof *counts);
    int *offsets = malloc((size_t)ranks * sizeof *offsets);
    if (counts == NULL || offsets == NULL) {
        fprintf(stderr, "hybrid: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int r = 0; r < ranks; r++) {
        size_t begin, end;
        block_range(m, (size_t)ranks, (size_t)r, &begin, &end);
        counts[r] = (int)(end - begin); /* m <= 2^30 fits an int */
        offsets[r] = (int)begin;
    }

    steps_enter("TODO 6: the local product, on this rank's threads");
    local_product(my_rows, n, block, x, my_y);

    /* Only the assembly's messages in the ledger: the product sends none. */
    steps_enter("assemble y");
    comm_ledger_reset();
    MPI_CHECK(MPI_Allgatherv(my_y, counts[rank], MPI_DOUBLE, y, counts,
                             offsets, MPI_DOUBLE, MPI_COMM_WORLD));
    if (out != NULL) {
        steps_enter("report");
        write_report(out, rank, ranks, row0, row1, y, m);
    }

    /* Each rank checks its own rows of the assembled y against a
     * reference; all stop together if any is wrong. */
    steps_enter("check");
    double *expected = vector_alloc(my_rows, "reference");
    double *bound = vector_alloc(my_rows, "error bounds");
    reference_matvec(my_rows, n, block, x, expected, bound);
    comparison_t c = compare_within(expected, &y[row0], bound, my_rows);
    if (!comparison_ok(&c)) {
        char text[512];
        c.first += row0; /* the index in all of y, not in my rows */
        comparison_describe(&c, "y", text, sizeof text);
        fprintf(stderr, "hybrid: rank %d, rows %zu .. %zu: %s (TODO 6)\n",
                rank, row0, row1 - 1, text);
    }
    int failed = !comparison_ok(&c);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (failed)
        mpi_exit_all(1);

    /* Timing: the local product alone, started together; the slowest rank
     * sets the pace. */
    steps_enter("timing");
    double seconds[1000];
    for (int k = 0; k < reps; k++) {
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double start = timer_now();
        local_product(my_rows, n, block, x, my_y);
        seconds[k] = timer_now() - start;
    }
    double mine = timings_median(seconds, reps), slowest = 0.0;
    MPI_CHECK(MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0,
                         MPI_COMM_WORLD));
    if (rank == 0) {
        double gbs = 8.0 * (double)m * (double)n / slowest / 1e9;
        printf("hybrid: y = Ax, A is %zu x %zu, %d rank%s x %d OpenMP "
               "thread%s, %s\n", m, n, ranks, ranks == 1 ? "" : "s",
               omp_get_max_threads(), omp_get_max_threads() == 1 ? "" : "s",
               thread_level_name(provided));
        printf("  right: every y[i] within its error bound\n");
        printf("  local product: %.3f ms (slowest rank, median of %d), "
               "%.2f GB/s of A in all\n", 1e3 * slowest, reps, gbs);
        printf("summary: ranks=%d threads=%d product_ms=%.3f gbs=%.2f\n",
               ranks, omp_get_max_threads(), 1e3 * slowest, gbs);
    }

    free(counts);
    free(offsets);
    matrix_free(expected);
    matrix_free(bound);
    matrix_free(y);
    matrix_free(my_y);
    matrix_free(x);
    matrix_free(block);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
