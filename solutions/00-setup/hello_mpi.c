/* Lesson 00, hello from every MPI rank: reference solution.
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

    /* TODO 1 start */
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_init();
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    /* TODO 1 end */

    char greeting[GREETING_LEN];
    make_greeting(greeting, rank, ranks);

    /* TODO 2 start */
    char *all = NULL;
    if (rank == 0) {
        all = malloc((size_t)ranks * GREETING_LEN);
        if (all == NULL) {
            fprintf(stderr, "hello_mpi: out of memory for %d greetings\n",
                    ranks);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    MPI_CHECK(MPI_Gather(greeting, GREETING_LEN, MPI_CHAR, all, GREETING_LEN,
                         MPI_CHAR, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        for (int r = 0; r < ranks; r++)
            printf("%s\n", &all[(size_t)r * GREETING_LEN]);
        free(all);
    }
    /* TODO 2 end */

    /* TODO 3 start */
    MPI_CHECK(MPI_Finalize());
    /* TODO 3 end */
    return 0;
}
