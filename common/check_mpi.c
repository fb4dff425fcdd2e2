/* Checking every MPI call. */
#include "check_mpi.h"

#include <stdio.h>
#include <stdlib.h>

void mpi_check_init(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

_Noreturn void mpi_check_failed(int error, const char *call, const char *file,
                                int line)
{
    char explanation[MPI_MAX_ERROR_STRING];
    int length = 0, rank = -1;
    MPI_Error_string(error, explanation, &length);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "%s:%d: rank %d: %s failed: %s\n", file, line, rank, call,
            explanation);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort does not return; this tells the compiler so */
}

_Noreturn void mpi_exit_all(int status)
{
    MPI_Finalize();
    exit(status);
}
