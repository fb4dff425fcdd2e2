/* A test program for the communication ledger and the steps file: every
 * rank makes each counted MPI call with known sizes, then writes its ledger
 * to OUT_DIR/rank-R.txt. With --hang, rank 0 instead waits for a message
 * that never comes, inside a named step, so that the harness's deadlock
 * report and clean-up can be tested. Run on 3 ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check_mpi.h"
#include "comm_ledger.h"
#include "steps.h"

enum { N = 12 };

int main(int argc, char **argv)
{
    int rank, size;
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_init();
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    steps_open(rank);
    if (argc != 2 || size != 3) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 3 ledger_probe OUT_DIR|--hang\n");
        mpi_exit_all(2);
    }
    if (strcmp(argv[1], "--hang") == 0) {
        double x;
        steps_enter("probe: waiting forever");
        if (rank == 0)
            MPI_CHECK(MPI_Recv(&x, 1, MPI_DOUBLE, 1, 99, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        mpi_exit_all(0);
    }

    double a[3 * N], b[3 * N];
    int counts[3] = { 1, 2, 3 }, displs[3] = { 0, 1, 3 };
    memset(a, 0, sizeof a);
    comm_ledger_reset();

    /* Point to point: 0 sends N doubles to 1; 1 receives them. */
    if (rank == 0)
        MPI_CHECK(MPI_Send(a, N, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD));
    else if (rank == 1)
        MPI_CHECK(MPI_Recv(b, N, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    /* A ring of Sendrecv, N doubles each way. */
    MPI_CHECK(MPI_Sendrecv(a, N, MPI_DOUBLE, (rank + 1) % 3, 1, b, N,
                           MPI_DOUBLE, (rank + 2) % 3, 1, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    MPI_CHECK(MPI_Bcast(a, N, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allgatherv(a, counts[rank], MPI_DOUBLE, b, counts, displs,
                             MPI_DOUBLE, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Reduce_scatter(a, b, counts, MPI_DOUBLE, MPI_SUM,
                                 MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Gatherv(a, counts[rank], MPI_DOUBLE, b, counts, displs,
                          MPI_DOUBLE, 2, MPI_COMM_WORLD));
    /* A non-blocking broadcast from rank 1, and one double to each peer. */
    MPI_Request request;
    MPI_CHECK(MPI_Ibcast(a, N, MPI_DOUBLE, 1, MPI_COMM_WORLD, &request));
    MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    int ones[3] = { 1, 1, 1 }, offsets[3] = { 0, 1, 2 };
    MPI_CHECK(MPI_Alltoallv(a, ones, offsets, MPI_DOUBLE, b, ones, offsets,
                            MPI_DOUBLE, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));

    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.txt", argv[1], rank);
    FILE *out = fopen(path, "w");
    if (out == NULL) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    comm_ledger_write(out);
    fclose(out);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
