/* Lesson 01, serial y = Ax: reference solution.
 * You write: the plain loop (TODO 1), then a fast version: rows in blocks
 * that share each load of x (TODO 2), several accumulators per row so the
 * compiler can use vector instructions (TODO 3), and the rows and columns
 * left over (TODO 4).
 * Given: the driver (main.c) that generates A and x, checks and times you. */
#include "matvec.h"

#include "not_done.h"

void matvec_naive(size_t m, size_t n, const double *A, const double *x,
                  double *y)
{
    /* TODO 1 start */
    for (size_t i = 0; i < m; i++) {
        double sum = 0.0;
        for (size_t j = 0; j < n; j++)
            sum += A[i * n + j] * x[j];
        y[i] = sum;
    }
    /* TODO 1 end */
}

/* Rows handled together: each x[j] loaded once serves all of them. */
#define ROWS_PER_BLOCK 4
/* Independent partial sums per row. Without -ffast-math the compiler may
 * not reorder a sum, so it cannot vectorise one accumulator; LANES
 * accumulators fed by columns j, j+1, ..., j+LANES-1 are LANES independent
 * sums, which it can put side by side in one vector register. */
#define LANES 4
/* Going further: one core streaming four rows keeps too few reads in flight
 * for its hardware prefetchers, which also stop at every 4 KiB page. Asking
 * for the cache line PREFETCH_DISTANCE doubles ahead in each row (once per
 * 64-byte line) keeps the memory system busy. __builtin_prefetch (GCC,
 * Clang) is only a hint: it never faults, and a poor distance costs speed,
 * not correctness. 32 doubles = 4 lines was the best of 16..64 measured. */
#define PREFETCH_DISTANCE 32

/* One row's dot product with x, LANES sums side by side. Used for the rows
 * left after the last full block. */
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

void matvec_fast(size_t m, size_t n, const double *restrict A,
                 const double *restrict x, double *restrict y)
{
    size_t i = 0;
    /* TODO 2 start */
    for (; i + ROWS_PER_BLOCK <= m; i += ROWS_PER_BLOCK) {
        const double *restrict row0 = &A[(i + 0) * n];
        const double *restrict row1 = &A[(i + 1) * n];
        const double *restrict row2 = &A[(i + 2) * n];
        const double *restrict row3 = &A[(i + 3) * n];
        /* TODO 3 start */
        double sum0[LANES] = { 0 }, sum1[LANES] = { 0 };
        double sum2[LANES] = { 0 }, sum3[LANES] = { 0 };
        size_t j = 0;
        for (; j + LANES <= n; j += LANES) {
            if (j % 8 == 0) {
                __builtin_prefetch(&row0[j + PREFETCH_DISTANCE], 0, 3);
                __builtin_prefetch(&row1[j + PREFETCH_DISTANCE], 0, 3);
                __builtin_prefetch(&row2[j + PREFETCH_DISTANCE], 0, 3);
                __builtin_prefetch(&row3[j + PREFETCH_DISTANCE], 0, 3);
            }
            for (size_t lane = 0; lane < LANES; lane++) {
                double xj = x[j + lane];
                sum0[lane] += row0[j + lane] * xj;
                sum1[lane] += row1[j + lane] * xj;
                sum2[lane] += row2[j + lane] * xj;
                sum3[lane] += row3[j + lane] * xj;
            }
        }
        double y0 = (sum0[0] + sum0[1]) + (sum0[2] + sum0[3]);
        double y1 = (sum1[0] + sum1[1]) + (sum1[2] + sum1[3]);
        double y2 = (sum2[0] + sum2[1]) + (sum2[2] + sum2[3]);
        double y3 = (sum3[0] + sum3[1]) + (sum3[2] + sum3[3]);
        /* TODO 3 end */
        /* TODO 4 start: the columns after the last full group of LANES */
        for (; j < n; j++) {
            y0 += row0[j] * x[j];
            y1 += row1[j] * x[j];
            y2 += row2[j] * x[j];
            y3 += row3[j] * x[j];
        }
        /* TODO 4 end */
        y[i + 0] = y0;
        y[i + 1] = y1;
        y[i + 2] = y2;
        y[i + 3] = y3;
    }
    /* TODO 2 end */
    /* TODO 4 start: the rows after the last full block */
    for (; i < m; i++)
        y[i] = dot_lanes(n, &A[i * n], x);
    /* TODO 4 end */
}
