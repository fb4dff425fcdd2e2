/* Lesson 02: the pieces of a distributed y = Ax that you write in rows.c
 * and columns.c. The driver (main.c) calls them in this order.
 *
 * P ranks, rank r. A is (m, n), generated from a seed so that entry (i, j)
 * is the same whichever rank makes it (common/matrix.h). */
#ifndef ZZ_LESSON02_MATVEC_MPI_H
#define ZZ_LESSON02_MATVEC_MPI_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "partition.h"

/* ---- rows.c: each rank owns a block of rows ---------------------------- */

/* TODO 1. The balanced block partition of `total` items into `parts`
 * blocks: part `index` owns items [*begin, *end). The first total % parts
 * parts own one item more than the others; a part may own none. Here the
 * parts are the ranks: rank r's rows are block_range(m, P, r, ...). This
 * is common/partition.h's declaration, repeated here (the compiler checks
 * that the two agree): later lessons are given the function; here you
 * write it. */
void block_range(size_t total, size_t parts, size_t index, size_t *begin,
                 size_t *end);

/* TODO 2. Rows [begin, end) of A, and no others: a (end - begin, n) block,
 * allocated with matrix_alloc_or_exit (so the memory ledger sees it). */
double *generate_my_rows(size_t n, size_t begin, size_t end, uint64_t seed);

/* TODO 3. x (n) is filled on rank 0 only; afterwards every rank holds it. */
void share_x(double *x, size_t n, MPI_Comm comm);

/* TODO 4. Each rank holds its rows' part of y in my_y (the rows
 * block_range gives it); afterwards every rank holds all of y (m). */
void assemble_y(const double *my_y, double *y, size_t m, MPI_Comm comm);

/* ---- columns.c: each rank owns a block of columns ---------------------- */

/* TODO 5. Columns [begin, end) of A, all m rows: a (m, end - begin) block,
 * row-major, allocated with matrix_alloc_or_exit. */
double *generate_my_columns(size_t m, size_t begin, size_t end,
                            uint64_t seed);

/* TODO 6. Each rank holds partial_y (m): its columns' contribution to every
 * y[i]. Afterwards each rank holds, in my_y, the sum over all ranks of the
 * partial y for the rows block_range(m, P, r, ...) gives it. */
void reduce_scatter_y(const double *partial_y, double *my_y, size_t m,
                      MPI_Comm comm);

#endif
