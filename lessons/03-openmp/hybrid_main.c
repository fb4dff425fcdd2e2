/* Lesson 03's hybrid driver: the ranks split the rows of A, as in lesson
 * 02, and the OpenMP threads of each rank split its rows again. Your part
 * is in hybrid.c: starting MPI (TODO 5) and the local product (TODO 6).
 * You do not need to change this file.
 *
 * It refuses bad input on every rank together, before any work: a bad
 * flag, an --out that is not a folder it can write to, more threads than
 * MAX_THREADS, a thread level below MPI_THREAD_FUNNELED. Then each rank
 * generates its own rows of A and all of x, runs your local product once
 * with the row log on (compute_rows.h: which thread of which team computed
 * each row), assembles y, checks it, times the local product, and, with
 * --out, writes its report for the tests.
 *
 *   OMP_NUM_THREADS=2 scripts/mpirun -np 2 --bind-to none build/student/03-openmp/hybrid */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>
#include <omp.h>

#include "check_mpi.h"
#include "cli.h"
#include "comm_ledger.h"
#include "compare.h"
#include "compute_rows.h"
#include "hybrid.h"
#include "matrix.h"
#include "memory_ledger.h"
#include "omp_matvec.h"
#include "partition.h"
#include "reference.h"
#include "report.h"
#include "stack.h"
#include "steps.h"
#include "timer.h"

/* ---- For the tests: an MPI that provides less on one rank ----------------
 * With ZZ_TEST_THREAD_SINGLE_RANK=R in the environment, MPI_Init_thread on
 * rank R answers MPI_THREAD_SINGLE, and so does MPI_Query_thread after it,
 * as an MPI built without thread support would. The tests use it to see
 * that one such rank stops every rank, together, with one message. These
 * two definitions stand in for MPI's own in this program; they reach the
 * real ones through MPI's profiling names (PMPI_). Without the variable
 * they change nothing. */
static bool pretend_single;

/* The rank that ZZ_TEST_THREAD_SINGLE_RANK names, or -1. */
static int pretend_rank(void)
{
    const char *text = getenv("ZZ_TEST_THREAD_SINGLE_RANK");
    if (text == NULL || *text == '\0')
        return -1;
    char *end;
    errno = 0;
    long rank = strtol(text, &end, 10);
    return errno == 0 && *end == '\0' && rank >= 0 && rank < 1 << 30
               ? (int)rank : -1;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int status = PMPI_Init_thread(argc, argv, required, provided);
    stack_find_main(); /* as the communication ledger's MPI_Init does */
    int rank = -1, target = pretend_rank();
    if (status == MPI_SUCCESS && target >= 0 &&
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS &&
        rank == target) {
        pretend_single = true;
        *provided = MPI_THREAD_SINGLE;
    }
    return status;
}

int MPI_Query_thread(int *provided)
{
    int status = PMPI_Query_thread(provided);
    if (status == MPI_SUCCESS && pretend_single)
        *provided = MPI_THREAD_SINGLE;
    return status;
}

/* ---- The driver ------------------------------------------------------- */

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

/* Ends every rank with `status` when any rank `failed` (each failing rank
 * has already said why): all ranks call it together, so none is left
 * waiting for another. */
static void stop_all_if(bool failed, int status)
{
    int any = failed;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (any)
        mpi_exit_all(status);
}

/* How the checked local product computed this rank's rows, from the row
 * log: the fewest and most times any row was computed, the first row (in
 * this rank's numbering) computed other than once, and the smallest and
 * largest team that computed a row (0 when no row was computed). */
typedef struct {
    int fewest, most;
    size_t first_not_once;   /* rows when every row was computed once */
    int smallest_team, largest_team;
    size_t outside;          /* rows computed that this rank does not own */
} rows_seen;

static rows_seen summarise(size_t rows, const int *times, const int *team,
                           size_t outside)
{
    rows_seen seen = { rows > 0 ? times[0] : 1, rows > 0 ? times[0] : 1,
                       rows, 0, 0, outside };
    for (size_t r = 0; r < rows; r++) {
        if (times[r] < seen.fewest)
            seen.fewest = times[r];
        if (times[r] > seen.most)
            seen.most = times[r];
        if (times[r] != 1 && seen.first_not_once == rows)
            seen.first_not_once = r;
        if (team[r] > 0 && (seen.smallest_team == 0 ||
                            team[r] < seen.smallest_team))
            seen.smallest_team = team[r];
        if (team[r] > seen.largest_team)
            seen.largest_team = team[r];
    }
    return seen;
}

/* Tells a person running the program what the row log saw, when it is not
 * one computation of every row, each by a team of `threads`. The tests
 * read the same from the report and decide there. */
static void warn_rows(const rows_seen *seen, int rank, size_t row0,
                      int threads, const int *times)
{
    if (seen->first_not_once == 0 && seen->most == 0)
        fprintf(stderr, "hybrid: rank %d: no row was computed through "
                "compute_rows: the local product must be your TODO 1 kernel "
                "(TODO 6)\n", rank);
    else if (seen->fewest != 1 || seen->most != 1)
        fprintf(stderr, "hybrid: rank %d: row %zu was computed %d times, "
                "not once (TODO 6)\n", rank, row0 + seen->first_not_once,
                times[seen->first_not_once]);
    if (seen->outside > 0)
        fprintf(stderr, "hybrid: rank %d: %zu rows beyond its own were "
                "computed (TODO 6)\n", rank, seen->outside);
    if (seen->largest_team > 0 && (seen->smallest_team != threads ||
                                   seen->largest_team != threads))
        fprintf(stderr, "hybrid: rank %d: rows were computed by teams of %d "
                "to %d threads, not %d (OMP_NUM_THREADS; TODO 6)\n", rank,
                seen->smallest_team, seen->largest_team, threads);
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
          1, TIMINGS_MAX },
        { "out", CLI_STRING, &out, "folder for each rank's report (the "
          "tests read it)", 0, 0 },
    };
    const cli_spec spec = { "hybrid", "lesson 03: y = Ax on MPI ranks, "
                            "each with OpenMP threads (OMP_NUM_THREADS, at "
                            "most 256)", options,
                            sizeof options / sizeof options[0] };

    start_mpi(&argc, &argv);   /* TODO 5, in hybrid.c */
    int started = 0;
    MPI_Initialized(&started);
    if (!started) {
        fprintf(stderr, "hybrid: start_mpi returned without starting MPI "
                "(TODO 5)\n");
        return 1;
    }
    mpi_check_init();
    int rank, ranks;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    steps_open(rank);

    /* Bad input, before any work. Every rank parses the same flags and
     * reaches the same verdict; the other checks each rank makes for
     * itself, and all of them stop together if any rank objects, the
     * lowest such rank alone saying why. */
    char why[512] = "";
    int status = cli_report(&spec, cli_parse(&spec, argc, argv, why,
                                             sizeof why),
                            why, rank != 0);
    if (status >= 0)
        mpi_exit_all(status);
    bool bad = out != NULL && report_check_dir(out, why, sizeof why) != 0;
    mpi_exit_if_any(bad, "hybrid", why);
    /* Every region gets OMP_NUM_THREADS threads: with OMP_DYNAMIC=true the
     * runtime could give fewer, and the row log would blame TODO 6. */
    omp_set_dynamic(0);
    int threads = omp_get_max_threads();
    bad = threads > MAX_THREADS;
    snprintf(why, sizeof why, "OMP_NUM_THREADS asks for %d threads a "
             "rank, more than this program's maximum of %d", threads,
             MAX_THREADS);
    mpi_exit_if_any(bad, "hybrid", why);

    /* The thread level: asked of MPI, on every rank, whatever start_mpi
     * thought it got. Each rank notes it in its report first, so the tests
     * can see that every rank came here to decide. */
    FILE *report = NULL;
    if (out != NULL) {
        report = report_open(out, rank);
        stop_all_if(report == NULL, 1);
    }
    int level = -1;
    MPI_CHECK(MPI_Query_thread(&level));
    if (report != NULL) {
        /* The level and FUNNELED as this MPI numbers them (the standard
         * fixes their order, not their values), then the name for people. */
        fprintf(report, "thread_level %d %d %s\n", level,
                (int)MPI_THREAD_FUNNELED, thread_level_name(level));
        fflush(report);
    }
    bad = level < MPI_THREAD_FUNNELED;
    snprintf(why, sizeof why, "MPI provides only %s, and the threads of "
             "this program need MPI_THREAD_FUNNELED (TODO 5: start MPI with "
             "MPI_Init_thread, asking for it)", thread_level_name(level));
    mpi_exit_if_any(bad, "hybrid", why);

    /* My rows of A, generated here: no rank ever holds the whole matrix.
     * Memory that one rank cannot get stops every rank, like bad input. */
    steps_enter("generate my rows of A, and x");
    size_t row0, row1;
    block_range(m, (size_t)ranks, (size_t)rank, &row0, &row1);
    size_t my_rows = row1 - row0;
    why[0] = '\0';
    double *block = matrix_try_alloc(my_rows, n, "my rows of A", why,
                                     sizeof why);
    double *x = block ? vector_try_alloc(n, "x", why, sizeof why) : NULL;
    double *my_y = x ? vector_try_alloc(my_rows, "my rows of y", why,
                                        sizeof why) : NULL;
    double *y = my_y ? vector_try_alloc(m, "y", why, sizeof why) : NULL;
    double *expected = y ? vector_try_alloc(my_rows, "reference", why,
                                            sizeof why) : NULL;
    double *bound = expected ? vector_try_alloc(my_rows, "error bounds", why,
                                                sizeof why) : NULL;
    /* How the local product computed each of my rows (the row log), as
     * doubles for the report. */
    double *times_seen = bound ? vector_try_alloc(my_rows, "row counts", why,
                                                  sizeof why) : NULL;
    size_t log_rows = my_rows > 0 ? my_rows : 1;
    int *times = malloc(log_rows * sizeof *times);
    int *team = malloc(log_rows * sizeof *team);
    int *counts = malloc((size_t)ranks * sizeof *counts);
    int *offsets = malloc((size_t)ranks * sizeof *offsets);
    bad = times_seen == NULL || times == NULL || team == NULL ||
          counts == NULL || offsets == NULL;
    if (bad && why[0] == '\0')
        snprintf(why, sizeof why, "out of memory");
    mpi_exit_if_any(bad, "hybrid", why);
    matrix_fill_random(block, my_rows, n, row0, 0, seed);
    vector_fill_random(x, n, 0, seed);
    for (int r = 0; r < ranks; r++) {
        size_t begin, end;
        block_range(m, (size_t)ranks, (size_t)r, &begin, &end);
        counts[r] = (int)(end - begin); /* m <= 2^30 fits an int */
        offsets[r] = (int)begin;
    }

    /* The local product once, with the row log on: which thread of which
     * team computed each row, and how many times. */
    steps_enter("TODO 6: the local product, on this rank's threads");
    bool logging = row_log_start(my_rows);
    stop_all_if(!logging, 1);
    local_product(my_rows, n, block, x, my_y);
    size_t outside = row_log_stop(times, NULL, team);
    rows_seen seen = summarise(my_rows, times, team, outside);
    warn_rows(&seen, rank, row0, threads, times);
    for (size_t r = 0; r < my_rows; r++)
        times_seen[r] = times[r];

    /* Only the assembly's messages in the ledger: the product sends none. */
    steps_enter("assemble y");
    comm_ledger_reset();
    MPI_CHECK(MPI_Allgatherv(my_y, counts[rank], MPI_DOUBLE, y, counts,
                             offsets, MPI_DOUBLE, MPI_COMM_WORLD));
    if (report != NULL) {
        steps_enter("report");
        fprintf(report, "ranks %d\nthreads %d\nrows %zu %zu\n", ranks,
                threads, row0, row1);
        /* The teams that computed my rows, and rows computed that are not
         * mine: given code's observation, for the tests. */
        fprintf(report, "team %d %d\noutside %zu\n", seen.smallest_team,
                seen.largest_team, seen.outside);
        memory_ledger_write(report);
        comm_ledger_write(report);
        bool failed = fclose(report) != 0 ||
                      report_write_doubles(out, "times", rank, times_seen,
                                           my_rows) != 0 ||
                      report_write_doubles(out, "y", rank, y, m) != 0;
        if (failed)
            fprintf(stderr, "hybrid: rank %d: cannot write its report to "
                    "'%s'\n", rank, out);
        stop_all_if(failed, 1);
    }

    /* Each rank checks its own rows of the assembled y against a
     * reference; all stop together if any is wrong. */
    steps_enter("check");
    reference_matvec(my_rows, n, block, x, expected, bound);
    comparison_t c = compare_within(expected, &y[row0], bound, my_rows);
    if (!comparison_ok(&c)) {
        char text[512];
        c.first += row0; /* the index in all of y, not in my rows */
        comparison_describe(&c, "y", text, sizeof text);
        fprintf(stderr, "hybrid: rank %d, rows %zu .. %zu: %s (TODO 6)\n",
                rank, row0, row1 - 1, text);
    }
    stop_all_if(!comparison_ok(&c), 1);

    /* Timing: the local product alone, started together; the slowest rank
     * sets the pace. */
    steps_enter("timing");
    double seconds[TIMINGS_MAX];
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
               "thread%s, %s\n", m, n, ranks, ranks == 1 ? "" : "s", threads,
               threads == 1 ? "" : "s", thread_level_name(level));
        printf("  right: every y[i] within its error bound\n");
        printf("  local product: %.3f ms (slowest rank, median of %d), "
               "%.2f GB/s of A in all\n", 1e3 * slowest, reps, gbs);
        printf("summary: ranks=%d threads=%d product_ms=%.3f gbs=%.2f\n",
               ranks, threads, 1e3 * slowest, gbs);
    }

    free(times);
    free(team);
    free(counts);
    free(offsets);
    matrix_free(times_seen);
    matrix_free(expected);
    matrix_free(bound);
    matrix_free(y);
    matrix_free(my_y);
    matrix_free(x);
    matrix_free(block);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
