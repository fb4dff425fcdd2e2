/* Lesson 01, serial y = Ax.
 * You write: the plain loop (TODO 1), then a fast version: rows in blocks
 * that share each load of x (TODO 2), several accumulators per row so the
 * compiler can use vector instructions (TODO 3), and the rows and columns
 * left over (TODO 4).
 * Given: the driver (main.c) that generates A and x, checks and times you.
 * Run `make check L=01` to test; `make all`, then
 *   build/student/01-serial-matvec/matvec to time. */
#include "matvec.h"

#include "not_done.h"

/* y = A x, one row after another: y[i] = sum over j of A[i][j] * x[j].
 * A is (m, n) row-major, x is (n), y is (m). */
void matvec_naive(size_t m, size_t n, const double *A, const double *x,
                  double *y)
{
    /* TODO 1 start: every y[i], from row i of A (A[i*n + 0 .. i*n + n-1])
     * and all of x. Overwrite y[i]; do not add to what is there. */
    NOT_DONE();
    /* TODO 1 end */
}

/* Rows handled together: each x[j] loaded once serves all of them. */
#define ROWS_PER_BLOCK 4
/* Independent partial sums per row. Without -ffast-math the compiler may
 * not reorder a sum, so it cannot vectorise one accumulator; LANES
 * accumulators fed by columns j, j+1, ..., j+LANES-1 are LANES independent
 * sums, which it can put side by side in one vector register. */
#define LANES 4

/* One row's dot product with x, LANES sums side by side: a worked example
 * of TODO 3 for a single row, and the tool for the rows left after the last
 * full block (TODO 4). */
static double dot_lanes(size_t n, const double *restrict row,
                        const double *restrict x)
{
    double partial[LANES] = { 0 };
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (size_t lane = 0; lane < LANES; lane++)
            partial[lane] += row[j + lane] * x[j + lane];
    double sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (; j < n; j++)
        sum += row[j] * x[j];
    return sum;
}

/* The same y = A x, fast. Same shapes as matvec_naive. */
void matvec_fast(size_t m, size_t n, const double *restrict A,
                 const double *restrict x, double *restrict y)
{
    /* TODO 2 start: walk the rows in blocks of ROWS_PER_BLOCK, with the row
     * index declared before the loop (TODO 4 goes on from where the blocks
     * stop). Inside a block, one pass over the columns: load x[j] once, use
     * it for every row of the block. TODOs 3 and 4 go inside this loop. */
    /* TODO 3 start (inside the block loop): for each row of the block keep
     * LANES partial sums, as dot_lanes does for one row, and add them up at
     * the end. */
    /* TODO 3 end */
    /* TODO 4 start (inside the block loop, after TODO 3): the columns after
     * the last full group of LANES (n need not be a multiple of LANES), one
     * at a time, into each row's sum. */
    /* TODO 4 end */
    NOT_DONE();
    /* TODO 2 end */
    /* TODO 4 start: the rows after the last full block (m need not be a
     * multiple of ROWS_PER_BLOCK): dot_lanes does one such row. */
    /* TODO 4 end */
}
