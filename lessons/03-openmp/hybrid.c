/* Lesson 03, hybrid MPI + OpenMP y = Ax: the ranks split the rows of A, as
 * in lesson 02, and the OpenMP threads of each rank split its rows again.
 * You write: starting MPI in a program that has threads (TODO 5), and the
 * local product on this rank's threads (TODO 6).
 * Given (hybrid_main.c): the flags and their checks, the check of the
 * thread level MPI provides, each rank's rows of A and all of x, the
 * assembly of y, the check, the timing, and the report for the tests.
 * Run: make check L=03, or
 *   OMP_NUM_THREADS=2 scripts/mpirun -np 2 --bind-to none build/student/03-openmp/hybrid
 * (the lesson text explains the placement flags). */
#include "hybrid.h"

#include <mpi.h>

#include "check_mpi.h"
#include "not_done.h"
#include "omp_matvec.h"

void start_mpi(int *argc, char ***argv)
{
    /* TODO 5 start: start MPI, asking for MPI_THREAD_FUNNELED: this
     * program's threads never call MPI, only the thread that started it
     * does. MPI answers with the level it provides, which may be less than
     * you asked for and may differ from rank to rank; you need not check
     * it here. The driver does, on every rank, and stops all of them
     * together when any rank got less: a rank that stopped on its own
     * would leave the others waiting for it in their next collective. */
    NOT_DONE();
    /* TODO 5 end */
}

void local_product(size_t rows, size_t n, const double *block,
                   const double *x, double *y)
{
    /* TODO 6 start: the product of this rank's rows with x, shared among
     * this rank's threads: your kernel from TODO 1 does exactly that.
     * Under MPI_THREAD_FUNNELED only the thread that started MPI may call
     * MPI, so no MPI call may sit inside a parallel region: the threads
     * compute, and the main thread communicates after they have finished. */
    NOT_DONE();
    /* TODO 6 end */
}
