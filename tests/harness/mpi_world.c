/* Launcher check: `mpirun -np N mpi_world N` exits 0 only when the program
 * it started sees a world of N ranks. The launcher of another MPI than the
 * one this was built with starts N programs of 1 rank each, and correct code
 * then fails in ways that point elsewhere; make runs this first. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int ranks, rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int expected = argc == 2 ? atoi(argv[1]) : -1;
    if (ranks != expected)
        printf("mpi_world: rank %d of a world of %d, not of %d\n", rank, ranks,
               expected);
    MPI_Finalize();
    return ranks == expected ? 0 : 1;
}
