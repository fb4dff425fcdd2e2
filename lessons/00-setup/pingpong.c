/* Lesson 00's second measuring tool: MPI ping-pong between ranks 0 and 1.
 * A message of each size goes 0 -> 1 -> 0 many times; half the round trip
 * is the one-way time. Small messages measure latency (alpha), large ones
 * bandwidth (1/beta): the two numbers of the cost model
 * time(bytes) = alpha + bytes * beta used in every later lesson.
 * You do not need to change this file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check_mpi.h"
#include "cli.h"
#include "timer.h"

int main(int argc, char **argv)
{
    size_t max_bytes = (size_t)1 << 24;
    int reps = 100;
    int rank, ranks;
    const cli_option options[] = {
        { "max-bytes", CLI_SIZE, &max_bytes, "largest message, in bytes "
          "(sizes double from 1)", 1, 1u << 30 },
        { "reps", CLI_INT, &reps, "round trips per size", 1, 100000 },
    };
    const cli_spec spec = { "pingpong", "lesson 00: MPI latency and "
                            "bandwidth between ranks 0 and 1 (run on 2 ranks)",
                            options, sizeof options / sizeof options[0] };

    mpi_start_or_exit(&argc, &argv, &spec, &rank, &ranks);
    if (ranks != 2) {
        if (rank == 0)
            fprintf(stderr, "pingpong: needs exactly 2 ranks, got %d (mpirun "
                    "-np 2 ...)\n", ranks);
        mpi_exit_all(2);
    }

    /* A --max-bytes this rank cannot hold is bad input: every rank ends
     * together, with status 2, rather than one aborting the others. */
    char *buffer = malloc(max_bytes);
    char why[96];
    snprintf(why, sizeof why, "cannot allocate %zu bytes for --max-bytes",
             max_bytes);
    mpi_exit_if_any(buffer == NULL, "pingpong", why);
    memset(buffer, 1, max_bytes);

    int peer = 1 - rank;
    double latency_us = 0.0, best_gbs = 0.0;
    if (rank == 0)
        printf("pingpong: %d round trips per size, one-way time = half a "
               "round trip\n  %12s %12s %10s\n", reps, "bytes", "time (us)",
               "GB/s");
    for (size_t bytes = 1; bytes <= max_bytes; bytes *= 2) {
        /* A few untimed trips first: the first message of a size sets up
         * buffers and connections. */
        int count = (int)bytes;
        double start = 0.0;
        for (int trip = -20; trip < reps; trip++) {
            if (trip == 0) {
                MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
                start = timer_now();
            }
            if (rank == 0) {
                MPI_CHECK(MPI_Send(buffer, count, MPI_BYTE, peer, 0,
                                   MPI_COMM_WORLD));
                MPI_CHECK(MPI_Recv(buffer, count, MPI_BYTE, peer, 0,
                                   MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            } else {
                MPI_CHECK(MPI_Recv(buffer, count, MPI_BYTE, peer, 0,
                                   MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                MPI_CHECK(MPI_Send(buffer, count, MPI_BYTE, peer, 0,
                                   MPI_COMM_WORLD));
            }
        }
        double one_way = (timer_now() - start) / reps / 2.0;
        double gbs = (double)bytes / one_way / 1e9;
        /* Latency: the best small-message time, where bandwidth plays no
         * part. */
        if (bytes <= 64 && (latency_us == 0.0 || 1e6 * one_way < latency_us))
            latency_us = 1e6 * one_way;
        if (gbs > best_gbs)
            best_gbs = gbs;
        if (rank == 0)
            printf("  %12zu %12.2f %10.3f\n", bytes, 1e6 * one_way, gbs);
    }
    if (rank == 0)
        printf("summary: latency_us=%.2f bandwidth_gbs=%.2f\n", latency_us,
               best_gbs);
    free(buffer);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
