/* Checking every MPI call. */
#include "check_mpi.h"

#include "cli.h"
#include "steps.h"

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

void mpi_start(int *argc, char ***argv, const struct cli_spec_s *spec,
               int *rank, int *ranks)
{
    MPI_CHECK(MPI_Init(argc, argv));
    mpi_check_init();
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, ranks));
    steps_open(*rank);
    /* Every rank reaches the same verdict on the same flags, so all of
     * them end together; only rank 0 speaks. */
    char error[256];
    int status = cli_report(spec, cli_parse(spec, *argc, *argv, error,
                                            sizeof error),
                            error, *rank != 0);
    if (status >= 0)
        mpi_exit_all(status);
}
