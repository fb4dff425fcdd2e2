/* Lesson 00, hello from every OpenMP thread: reference solution.
 * You write: a parallel region in which every thread records its greeting
 * (TODO 1), then the greetings printed in thread order (TODO 2).
 * Given: the storage for the greetings, and refusing flags (it takes
 * none). Run: make check L=00, or
 *   OMP_NUM_THREADS=4 build/student/00-setup/hello_omp */
#include <stdio.h>

#include <omp.h>

#include "cli.h"
#include "not_done.h"

enum { MAX_THREADS = 1024, GREETING_LEN = 64 };

/* Thread t writes only greetings[t]: no two threads touch the same bytes. */
static char greetings[MAX_THREADS][GREETING_LEN];

int main(int argc, char **argv)
{
    int threads = 0;

    /* This program takes no flags: anything on the command line is refused
     * with status 2 before your code runs. */
    cli_no_flags_or_exit("hello_omp", "lesson 00: hello from every OpenMP "
                         "thread", argc, argv);

    if (omp_get_max_threads() > MAX_THREADS) {
        fprintf(stderr, "hello_omp: at most %d threads; set OMP_NUM_THREADS "
                "lower\n", MAX_THREADS);
        return 2;
    }

    /* TODO 1 start */
    #pragma omp parallel
    {
        int thread = omp_get_thread_num();
        int team = omp_get_num_threads();
        snprintf(greetings[thread], GREETING_LEN,
                 "hello from thread %d of %d", thread, team);
        #pragma omp single
        threads = team;
    }
    /* TODO 1 end */

    /* TODO 2 start */
    for (int t = 0; t < threads; t++)
        printf("%s\n", greetings[t]);
    /* TODO 2 end */
    return 0;
}
