/* Lesson 02, the second split: each MPI rank owns a block of columns of A
 * and the matching slice of x.
 * You write: a rank's own columns of A (TODO 5), and the sum of every
 * rank's partial y, each rank keeping its block of rows (TODO 6).
 * Given: the slice of x, the local product, the driver (main.c). */
#include <stdio.h>
#include <stdlib.h>

#include "check_mpi.h"
#include "matrix.h"
#include "matvec_mpi.h"
#include "not_done.h"

double *generate_my_columns(size_t m, size_t begin, size_t end,
                            uint64_t seed)
{
    /* TODO 5 start: allocate an (m, end - begin) block with
     * matrix_alloc_or_exit, row-major, and fill it with matrix_fill_random so that its first
     * column is column `begin` of the whole matrix. */
    NOT_DONE();
    /* TODO 5 end */
}

void reduce_scatter_y(const double *partial_y, double *my_y, size_t m,
                      MPI_Comm comm)
{
    /* TODO 6 start: partial_y holds this rank's columns' contribution to
     * every y[i]; y is the sum of all ranks' partial_y. Each rank needs only
     * its own block of rows of that sum (block_range over m). One
     * collective call does the sum and hands out the blocks. */
    NOT_DONE();
    /* TODO 6 end */
}
