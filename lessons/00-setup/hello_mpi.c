/* Lesson 00, hello from every MPI rank.
 * You write: start MPI and learn who you are (TODO 1); collect every rank's
 * greeting on rank 0 and print them in rank order (TODO 2); end MPI (TODO 3).
 * Given: the greeting itself, and refusing flags (it takes none).
 * Run: make check L=00, or
 *   scripts/mpirun -np 4 build/student/00-setup/hello_mpi */
#include <stdio.h>
#include <stdlib.h>

#include <mpi.h>

#include "check_mpi.h"
#include "not_done.h"

/* Every greeting takes exactly this many chars, so that rank 0 knows where
 * each one starts when they arrive side by side. */
enum { GREETING_LEN = 64 + MPI_MAX_PROCESSOR_NAME };

/* "hello from rank R of P on HOST", padded with NULs to GREETING_LEN. */
static void make_greeting(char greeting[GREETING_LEN], int rank, int ranks)
{
    char host[MPI_MAX_PROCESSOR_NAME] = "";
    int host_len = 0;
    MPI_CHECK(MPI_Get_processor_name(host, &host_len));
    for (int k = 0; k < GREETING_LEN; k++)
        greeting[k] = '\0';
    snprintf(greeting, GREETING_LEN, "hello from rank %d of %d on %s", rank,
             ranks, host);
}

int main(int argc, char **argv)
{
    int rank = -1, ranks = 0;

    /* Anything on the command line ends every rank with status 2 before
     * your code runs: this program takes no flags. */
    mpi_no_flags_or_exit("hello_mpi", "lesson 00: hello from every MPI rank",
                         argc, argv);

    /* TODO 1 start: start MPI; then set `rank` to this process's number
     * and `ranks` to the number of processes, both in MPI_COMM_WORLD.
     * Call mpi_check_init() right after MPI starts, and wrap every MPI call
     * in MPI_CHECK(...) so that a failure names its line. */
    NOT_DONE();
    /* TODO 1 end */

    char greeting[GREETING_LEN];
    make_greeting(greeting, rank, ranks);

    /* TODO 2 start: rank 0 prints every rank's greeting, one per line, in
     * rank order (0, 1, 2, ...); no other rank prints. Ranks printing for
     * themselves would not do: their lines reach the terminal in whatever
     * order they arrive (try it). So bring all the greetings to rank 0 in
     * one collective call: each is GREETING_LEN chars long. */
    NOT_DONE();
    /* TODO 2 end */

    /* TODO 3 start: end MPI, on every rank. */
    NOT_DONE();
    /* TODO 3 end */
    return 0;
}
