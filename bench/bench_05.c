/* Lesson 05's benchmark: the reference solution's ring allreduce against
 * the MPI library's MPI_Allreduce, from 4 KB to 64 MB, on the ranks it is
 * started with. Bus bandwidth as nccl-tests defines it: algbw = bytes /
 * time, busbw = algbw * 2(P-1)/P, the rate each link must carry, which
 * does not depend on P for a bandwidth-optimal algorithm.
 *
 * For each size: both buffers allocated and written before any timing,
 * then repetitions of ring and MPI_Allreduce interleaved (which goes first
 * alternates), each timed from a barrier to the slowest rank's finish;
 * medians. Rank 0 prints the table and writes the CSV rows. Run by
 * bench/bench_05.sh under mpirun on 2 and 4 ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bench.h"
#include "check_mpi.h"
#include "cli.h"
#include "data_parallel.h"
#include "memory_ledger.h"
#include "timer.h"

enum { REPS = 15 };

/* Seconds for one allreduce, as the slowest rank saw it. */
static double timed(int ring, float *data, size_t count)
{
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    double start = timer_now();
    if (ring)
        ring_allreduce(data, count, MPI_COMM_WORLD);
    else
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, data, (int)count, MPI_FLOAT,
                                MPI_SUM, MPI_COMM_WORLD));
    double mine = timer_now() - start, slowest = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX,
                            MPI_COMM_WORLD));
    return slowest;
}

int main(int argc, char **argv)
{
    int rank, ranks;
    /* No options: --help explains, and anything else is refused (exit 2,
     * every rank), never ignored. */
    const cli_spec spec = { "bench_05", "lesson 05: the ring allreduce "
                            "against MPI_Allreduce, 4 KB to 64 MB, on the "
                            "ranks it is started with", NULL, 0 };
    mpi_start_or_exit(&argc, &argv, &spec, &rank, &ranks);
    FILE *csv = rank == 0 ? bench_csv_open() : NULL;
    double factor = 2.0 * (ranks - 1) / ranks;
    if (rank == 0)
        printf("lesson 05: allreduce of floats on %d ranks, busbw = bytes/time "
               "* 2(P-1)/P, medians of %d interleaved repetitions\n"
               "  %10s %14s %14s %8s\n", ranks, REPS, "bytes",
               "ring GB/s", "MPI GB/s", "ratio");
    double large_ratio_min = 1e30;
    for (size_t bytes = 4096; bytes <= ((size_t)64 << 20); bytes *= 4) {
        size_t count = bytes / sizeof(float);
        /* Zeros: sums stay zero however often they are repeated, and cost
         * the same as any other numbers. */
        float *ring_data = ledger_alloc(MEMORY_VECTOR, bytes);
        float *mpi_data = ledger_alloc(MEMORY_VECTOR, bytes);
        if (ring_data == NULL || mpi_data == NULL) {
            fprintf(stderr, "bench_05: out of memory for %zu bytes\n", bytes);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        memset(ring_data, 0, bytes);
        memset(mpi_data, 0, bytes);
        timed(1, ring_data, count);  /* warm-up: connections, buffers */
        timed(0, mpi_data, count);
        double ring_seconds[REPS], mpi_seconds[REPS];
        for (int r = 0; r < REPS; r++) {
            int ring_first = r % 2 == 0;
            if (ring_first)
                ring_seconds[r] = timed(1, ring_data, count);
            mpi_seconds[r] = timed(0, mpi_data, count);
            if (!ring_first)
                ring_seconds[r] = timed(1, ring_data, count);
        }
        double ring_busbw = (double)bytes / timings_median(ring_seconds, REPS)
                            / 1e9 * factor;
        double mpi_busbw = (double)bytes / timings_median(mpi_seconds, REPS)
                           / 1e9 * factor;
        if (bytes >= ((size_t)16 << 20) && ring_busbw / mpi_busbw <
                                               large_ratio_min)
            large_ratio_min = ring_busbw / mpi_busbw;
        if (rank == 0) {
            char size[32];
            snprintf(size, sizeof size, "%zu", bytes);
            printf("  %10zu %14.3f %14.3f %8.2f\n", bytes, ring_busbw,
                   mpi_busbw, ring_busbw / mpi_busbw);
            bench_row ring_row = { "05", "ring_allreduce", size, 1, ranks,
                                   "busbw", ring_busbw, "GB/s",
                                   "mpi_allreduce", mpi_busbw };
            bench_row mpi_row = { "05", "mpi_allreduce", size, 1, ranks,
                                  "busbw", mpi_busbw, "GB/s", NULL, 0 };
            bench_csv_row(csv, &ring_row);
            bench_csv_row(csv, &mpi_row);
        }
        ledger_free(ring_data);
        ledger_free(mpi_data);
    }
    if (rank == 0)
        printf("targets: ring / MPI_Allreduce busbw >= 0.9 from 16 MB on %d "
               "ranks: worst %.2f\n", ranks, large_ratio_min);
    if (csv != NULL)
        fclose(csv);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
