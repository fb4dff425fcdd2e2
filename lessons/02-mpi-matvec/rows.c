/* Lesson 02, y = Ax with the rows of A split across MPI ranks.
 * You write: which rows each rank owns (TODO 1), a rank's own rows of A and
 * no others (TODO 2), x for every rank (TODO 3), y for every rank (TODO 4).
 * Given: the local product (common/kernels.h) and the driver (main.c),
 * which checks you and reports to the tests. */
#include <stdio.h>
#include <stdlib.h>

#include "check_mpi.h"
#include "matrix.h"
#include "matvec_mpi.h"
#include "not_done.h"

void block_range(size_t total, size_t parts, size_t index, size_t *begin,
                 size_t *end)
{
    /* TODO 1 start: part `index` of `parts` owns items [*begin, *end) of
     * `total`. Blocks are contiguous and in order; their sizes differ by at
     * most one: the first total % parts parts own one more. Check your
     * formula on paper for total = 10, parts = 4 (3, 3, 2, 2) and for
     * total = 2, parts = 3 (1, 1, 0). */
    NOT_DONE();
    /* TODO 1 end */
}

double *generate_my_rows(size_t n, size_t begin, size_t end, uint64_t seed)
{
    /* TODO 2 start: allocate a block of (end - begin) rows of n doubles with
     * matrix_alloc_or_exit, fill it with matrix_fill_random so that its
     * first row is row `begin` of the whole matrix, and return it. Never make the
     * whole of A: that is what this lesson is about. */
    NOT_DONE();
    /* TODO 2 end */
}

void share_x(double *x, size_t n, MPI_Comm comm)
{
    /* TODO 3 start: rank 0 has filled x; give every rank a copy. One
     * collective call. */
    NOT_DONE();
    /* TODO 3 end */
}

void assemble_y(const double *my_y, double *y, size_t m, MPI_Comm comm)
{
    /* TODO 4 start: every rank has its own rows of y in my_y; bring every
     * rank all of y. Each rank's block may have a different length (and
     * may be empty), so the collective needs every rank's count and where
     * its block starts in y: block_range tells you both, for any rank. */
    NOT_DONE();
    /* TODO 4 end */
}
