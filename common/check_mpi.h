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

#include <stdbool.h>
#include <stdio.h>

#include <mpi.h>

#include "cli.h"

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

/* Starts an MPI program the toolkit's way: MPI_Init, errors returned to
 * MPI_CHECK, this process's rank and the number of ranks, its steps file
 * (common/steps.h), and then the flags of `spec`, parsed by every rank
 * alike: on --help or a bad flag every rank ends together (status 0 or 2)
 * and rank 0 alone says why. Returns only when the flags are good. */
void mpi_start_or_exit(int *argc, char ***argv, const cli_spec *spec,
                       int *rank, int *ranks);

/* Ends the job at once, from one rank, on an error that rank alone meets:
 * prints `message` and a newline on stderr, and MPI_Abort(1), which has
 * the launcher kill every rank. */
_Noreturn void mpi_abort_exit(const char *message);

/* Ends the program on every rank with `status` (2 for bad input): all ranks
 * call it together, so MPI is finalized cleanly and mpirun returns `status`.
 * For errors that every rank detects in the same way, such as a bad flag. */
_Noreturn void mpi_exit_all(int status);

/* For bad input that each rank judges for itself, such as a folder it must
 * write to (report_check_dir) or memory it must get: every rank calls this
 * together, with its own verdict. When no rank's `bad` is true it returns.
 * Otherwise every rank ends with status 2, and the lowest bad rank alone
 * prints "PROGRAM: WHY" ("PROGRAM: rank R: WHY" when that is not rank 0),
 * so the reason appears once, not once per rank. */
void mpi_exit_if_any(bool bad, const char *program, const char *why);

/* For a refusal that each rank meets for itself and says in its own words
 * (the memory it asked for and what was free): every rank calls this
 * together, with its own verdict. When no rank's `bad` is true it returns.
 * Otherwise every bad rank prints "PROGRAM: WHY" on a line of its own and
 * every rank ends with status 2. */
void mpi_exit_if_any_each_says(bool bad, const char *program,
                               const char *why);

/* Opens OUT/rank-RANK.txt for this rank's report, before any work (NULL
 * when `out` is NULL). A folder that does not exist, a file, or a place
 * nothing may be written (/proc/self) is bad input, found at once by every
 * rank, not after the run: every rank ends with status 2 and rank 0 says
 * why, once ("PROGRAM: --out: cannot write to 'OUT': WHY"). The report's
 * first line names the machine the rank runs on: "host NAME" (MPI's
 * processor name, the host name on Linux). */
FILE *mpi_report_open_or_exit(const char *program, const char *out, int rank);

/* Before a driver runs any of the student's code: wires every pair of
 * ranks (a byte each way, so that every TCP connection MPI will use exists
 * before the boundary refuses new ones), then enters the run-time boundary
 * (boundary.h) with OUT/NAME-rank-RANK.bin writable for each of
 * `report_names` (NULL-terminated; may be NULL) and marks "boundary" for
 * the watch. `report` (may be NULL) gets the boundary's line. If the
 * boundary the grader asked for cannot be installed, every rank stops
 * (status 1) with the reason: no student code runs outside it. Without
 * the grader (no ZZ_BOUNDARY) it only wires the ranks. */
void mpi_enter_boundary_or_exit(const char *program, FILE *report,
                                const char *out, int rank,
                                const char *const *report_names);

/* After the student's code, on every rank together: the ranks meet, then
 * mark "done" for the watch, which reads what each rank's sockets carried.
 * A rank's last sends can still sit in its kernel's socket buffer when its
 * own code returns (MPI hands them over; the wire takes them once the
 * receiver reads); once every rank has left the student's code, every byte
 * the student sent has been received, so the count is whole. The meeting
 * is the profiling interface's (PMPI_Barrier): given code, not counted in
 * the comm ledger. */
void mpi_mark_done(void);

/* For an MPI program that takes no flags and starts MPI in its own code
 * (lesson 00's hello_mpi), called first thing in main. With nothing on the
 * command line it returns at once and leaves MPI alone. Otherwise it starts
 * MPI only to end every rank together: status 0 after --help, 2 after
 * anything else, rank 0 alone saying why (with the usage line).
 * It is inline because the file that calls it is a student's, and the
 * lesson's rules (tests/symbols) let such a file call only what they list:
 * this way the call brings in only MPI's own functions and the shared
 * library's. */
static inline void mpi_no_flags_or_exit(const char *program,
                                        const char *summary, int argc,
                                        char **argv)
{
    const cli_spec spec = { program, summary, NULL, 0 };
    char error[256];
    int result = cli_parse(&spec, argc, argv, error, sizeof error);
    if (result == CLI_OK)
        return;
    int rank = 0;
    MPI_CHECK(MPI_Init(NULL, NULL));
    mpi_check_init();
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    mpi_exit_all(cli_report(&spec, result, error, rank != 0));
}

#endif
