/* Lesson 02, y = Ax with the rows of A split across MPI ranks: reference
 * solution.
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
    /* TODO 1 start */
    size_t base = total / parts, extra = total % parts;
    *begin = index * base + (index < extra ? index : extra);
    *end = *begin + base + (index < extra ? 1 : 0);
    /* TODO 1 end */
}

double *generate_my_rows(size_t n, size_t begin, size_t end, uint64_t seed)
{
    /* TODO 2 start */
    double *my_rows = matrix_alloc_or_exit(end - begin, n, "my rows of A");
    matrix_fill_random(my_rows, end - begin, n, begin, 0, seed);
    return my_rows;
    /* TODO 2 end */
}

void share_x(double *x, size_t n, MPI_Comm comm)
{
    /* TODO 3 start */
    MPI_CHECK(MPI_Bcast(x, (int)n, MPI_DOUBLE, 0, comm));
    /* TODO 3 end */
}

void assemble_y(const double *my_y, double *y, size_t m, MPI_Comm comm)
{
    /* TODO 4 start */
    int ranks, rank;
    MPI_CHECK(MPI_Comm_size(comm, &ranks));
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    /* MPI_Allgatherv needs every rank's count and where it goes in y. */
    int *counts = malloc((size_t)ranks * sizeof *counts);
    int *offsets = malloc((size_t)ranks * sizeof *offsets);
    if (counts == NULL || offsets == NULL) {
        fprintf(stderr, "assemble_y: out of memory for %d counts\n", ranks);
        MPI_Abort(comm, 1);
    }
    for (int r = 0; r < ranks; r++) {
        size_t begin, end;
        block_range(m, (size_t)ranks, (size_t)r, &begin, &end);
        counts[r] = (int)(end - begin);
        offsets[r] = (int)begin;
    }
    MPI_CHECK(MPI_Allgatherv(my_y, counts[rank], MPI_DOUBLE, y, counts,
                             offsets, MPI_DOUBLE, comm));
    free(counts);
    free(offsets);
    /* TODO 4 end */
}
