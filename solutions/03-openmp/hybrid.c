/* Lesson 03, hybrid MPI + OpenMP y = Ax: reference solution.
 * The ranks split the rows of A, as in lesson 02, and the OpenMP threads of
 * each rank split its rows again.
 * You write: starting MPI in a program that has threads (TODO 5), and the
 * local product on this rank's threads (TODO 6).
 * Given (hybrid_main.c): the flags and their checks, the check of the
 * thread level MPI provides, each rank's rows of A and all of x, the
 * assembly of y, the check, the timing, and the report for the tests. */
#include "hybrid.h"

#include <mpi.h>

#include "check_mpi.h"
#include "not_done.h"
#include "omp_matvec.h"

void start_mpi(int *argc, char ***argv)
{
    /* TODO 5 start */
    /* MPI says here which level it provides; the driver asks MPI again
     * (MPI_Query_thread) and decides on every rank together. */
    int provided = MPI_THREAD_SINGLE;
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    /* TODO 5 end */
}

void local_product(size_t rows, size_t n, const double *block,
                   const double *x, double *y)
{
    /* TODO 6 start */
    /* The parallel region opens and closes inside the kernel: when it
     * returns, the other threads are idle and the main thread is alone. */
    matvec_omp_rows(rows, n, block, x, y);
    /* TODO 6 end */
}
