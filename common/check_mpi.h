/* Checking every MPI call.
 *
 *     MPI_CHECK(MPI_Bcast(x, n, MPI_DOUBLE, 0, MPI_COMM_WORLD));
 *
 * MPI's default error handler aborts the job inside the library with a
 * message that does not say which line of yours failed. mpi_check_init()
 * makes MPI return errors instead, and MPI_CHECK reports the call, the file,
 * the line, the rank and MPI's own explanation, then aborts every rank (one
 * rank stopping alone would leave the others waiting for it forever). */
#ifndef ZZ_CHECK_MPI_H
#define ZZ_CHECK_MPI_H

#include <mpi.h>

#define MPI_CHECK(call)                                                     \
    do {                                                                    \
        int mpi_check_error_ = (call);                                      \
        if (mpi_check_error_ != MPI_SUCCESS)                                \
            mpi_check_failed(mpi_check_error_, #call, __FILE__, __LINE__);  \
    } while (0)

/* Call once, right after MPI_Init or MPI_Init_thread. */
void mpi_check_init(void);

_Noreturn void mpi_check_failed(int error, const char *call, const char *file,
                                int line);

struct cli_spec_s;

/* Starts an MPI program the toolkit's way: MPI_Init, errors returned to
 * MPI_CHECK, this process's rank and the number of ranks, its steps file
 * (common/steps.h), and then the flags of `spec`, parsed by every rank
 * alike: on --help or a bad flag every rank ends together (status 0 or 2)
 * and rank 0 alone says why. Returns only when the flags are good. */
void mpi_start(int *argc, char ***argv, const struct cli_spec_s *spec,
               int *rank, int *ranks);

/* Ends the program on every rank with `status` (2 for bad input): all ranks
 * call it together, so MPI is finalized cleanly and mpirun returns `status`.
 * For errors that every rank detects in the same way, such as a bad flag. */
_Noreturn void mpi_exit_all(int status);

#endif
