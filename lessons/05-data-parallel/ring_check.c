/* Lesson 05's second program: runs your ring allreduce (or your average of
 * gradients) on data generated from a seed, once for each length asked
 * for, and reports to the tests what every rank got and what it sent. Each
 * rank's element k is a function of (seed, rank, k) (ring_data.h), so a
 * test can compute the exact sum by itself.
 *
 *   mpirun -np 4 build/student/05-data-parallel/ring_check --counts 0,1,3,1003
 * You do not need to change this file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "check_mpi.h"
#include "cli.h"
#include "comm_ledger.h"
#include "data_parallel.h"
#include "matrix.h"
#include "memory_ledger.h"
#include "report.h"
#include "ring_data.h"
#include "steps.h"
#include "timer.h"

enum { MAX_COUNTS = 32 };

/* "0,1,3,1003" into counts; the number of them, or -1 if malformed. */
static int parse_counts(const char *text, size_t counts[MAX_COUNTS])
{
    int n = 0;
    const char *at = text;
    while (*at) {
        char *end;
        if (*at < '0' || *at > '9' || n == MAX_COUNTS)
            return -1;
        errno = 0;
        unsigned long long value = strtoull(at, &end, 10);
        if (errno != 0 || value > (1ull << 28))
            return -1;
        counts[n++] = (size_t)value;
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return -1;
        at = end;
    }
    return n;
}

/* One call of the student's code on `count` fresh floats; the report for
 * that length goes to OUT/rank-R.txt as "count N ..." lines and to
 * OUT/result-N-rank-R.bin. */
static void run_once(size_t count, int ring, uint64_t seed, int rank,
                     const char *out, FILE *report)
{
    /* One float more than asked, never touched: writing past the end of
     * the data shows as a changed guard. */
    float *data = (float *)ledger_alloc(MEMORY_VECTOR,
                                        (count + 1) * sizeof *data);
    if (data == NULL) {
        fprintf(stderr, "ring_check: rank %d: no memory for %zu floats\n",
                rank, count);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ring_data_fill(data, count, seed, rank);
    const float guard = 12345.0f;
    data[count] = guard;

    comm_ledger_reset();
    if (ring) {
        steps_enter("TODO 3: ring_allreduce");
        ring_allreduce(data, count, MPI_COMM_WORLD);
    } else {
        steps_enter("TODO 2: average_gradients");
        average_gradients(data, count, MPI_COMM_WORLD);
    }
    steps_enter("report");
    if (report != NULL) {
        comm_counts all = comm_ledger_total();
        comm_counts ring_calls = comm_ledger_of("MPI_Sendrecv");
        fprintf(report, "count %zu guard %s sendrecv_sent %llu "
                "all_sent %llu all_received %llu\n", count,
                data[count] == guard ? "intact" : "overwritten",
                (unsigned long long)ring_calls.bytes_sent,
                (unsigned long long)all.bytes_sent,
                (unsigned long long)all.bytes_received);
        /* As doubles: every float converts exactly. */
        double *copy = vector_alloc(count, "result");
        for (size_t k = 0; k < count; k++)
            copy[k] = data[k];
        char name[64];
        snprintf(name, sizeof name, "result-%zu", count);
        if (report_write_doubles(out, name, rank, copy, count) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        matrix_free(copy);
    }
    ledger_free(data);
}

int main(int argc, char **argv)
{
    uint64_t seed = 5;
    const char *counts_text = "1003", *mode = "ring", *out = NULL;
    int rank, ranks;
    const cli_option options[] = {
        { "counts", CLI_STRING, &counts_text, "lengths to run, in floats, "
          "comma-separated", 0, 0 },
        { "seed", CLI_SEED, &seed, "seed the data is generated from", 0, 0 },
        { "mode", CLI_STRING, &mode, "ring (TODO 3) or average (TODO 2)",
          0, 0 },
        { "out", CLI_STRING, &out, "folder for the report to the tests",
          0, 0 },
    };
    const cli_spec spec = { "ring_check", "lesson 05: your allreduce on "
                            "generated data, once per length", options,
                            sizeof options / sizeof options[0] };

    mpi_start(&argc, &argv, &spec, &rank, &ranks);
    size_t counts[MAX_COUNTS];
    int how_many = parse_counts(counts_text, counts);
    int ring = strcmp(mode, "ring") == 0;
    const char *problem = how_many <= 0 ? "--counts needs lengths like "
                                          "0,1,1003 (at most 32, each at "
                                          "most 2^28)"
                          : !ring && strcmp(mode, "average") != 0
                              ? "--mode must be ring or average"
                          : out != NULL && access(out, W_OK) != 0
                              ? "--out: cannot write to that folder"
                              : NULL;
    if (problem != NULL) {
        if (rank == 0)
            fprintf(stderr, "ring_check: %s\n", problem);
        mpi_exit_all(2);
    }

    FILE *report = out != NULL ? report_open(out, rank) : NULL;
    if (out != NULL && report == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (report != NULL)
        fprintf(report, "ranks %d\n", ranks);
    double start = timer_now();
    for (int k = 0; k < how_many; k++)
        run_once(counts[k], ring, seed, rank, out, report);
    if (report != NULL)
        fclose(report);
    if (rank == 0)
        printf("ring_check: %s of %d length%s on %d rank%s in %.3f ms\n",
               ring ? "ring allreduce" : "average", how_many,
               how_many == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s",
               1e3 * (timer_now() - start));
    MPI_CHECK(MPI_Finalize());
    return 0;
}
