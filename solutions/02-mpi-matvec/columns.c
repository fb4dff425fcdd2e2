/* Lesson 02, the second split: each MPI rank owns a block of columns of A
 * and the matching slice of x: reference solution.
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
    /* TODO 5 start */
    double *my_columns = matrix_alloc_or_exit(m, end - begin,
                                              "my columns of A");
    matrix_fill_random(my_columns, m, end - begin, 0, begin, seed);
    return my_columns;
    /* TODO 5 end */
}

void reduce_scatter_y(const double *partial_y, double *my_y, size_t m,
                      MPI_Comm comm)
{
    /* TODO 6 start */
    int ranks;
    MPI_CHECK(MPI_Comm_size(comm, &ranks));
    int *counts = malloc((size_t)ranks * sizeof *counts);
    if (counts == NULL) {
        fprintf(stderr, "reduce_scatter_y: out of memory for %d counts\n",
                ranks);
        MPI_Abort(comm, 1);
    }
    for (int r = 0; r < ranks; r++) {
        size_t begin, end;
        block_range(m, (size_t)ranks, (size_t)r, &begin, &end);
        counts[r] = (int)(end - begin);
    }
    /* Block r of the sum over ranks lands on rank r: a reduction and a
     * scatter in one call, each rank sending only the blocks others own. */
    MPI_CHECK(MPI_Reduce_scatter(partial_y, my_y, counts, MPI_DOUBLE, MPI_SUM,
                                 comm));
    free(counts);
    /* TODO 6 end */
}
