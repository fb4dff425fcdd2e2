/* The shared library's fast y = Ax. The method is lesson 01's: rows in
 * blocks of four sharing each load of x, four independent partial sums per
 * row (which the compiler can vectorise without reordering any one sum), and
 * a software prefetch ahead in each row. */
#include "kernels.h"

enum { LANES = 4, PREFETCH_DISTANCE = 32 };

/* Sums one row's partial sums and its ragged tail in a fixed order; the
 * blocked and the single-row paths both end here, so a row's result does
 * not depend on which path computed it. */
static double finish_row(const double partial[LANES], const double *row,
                         const double *x, size_t j, size_t n)
{
    double sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
    for (; j < n; j++)
        sum += row[j] * x[j];
    return sum;
}

static double one_row(size_t n, const double *restrict row,
                      const double *restrict x)
{
    double partial[LANES] = { 0 };
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (size_t lane = 0; lane < LANES; lane++)
            partial[lane] += row[j + lane] * x[j + lane];
    return finish_row(partial, row, x, j, n);
}

void matvec_rows(size_t rows, size_t n, const double *A, size_t lda,
                 const double *x, double *y)
{
    size_t i = 0;
    for (; i + 4 <= rows; i += 4) {
        const double *restrict r0 = &A[(i + 0) * lda];
        const double *restrict r1 = &A[(i + 1) * lda];
        const double *restrict r2 = &A[(i + 2) * lda];
        const double *restrict r3 = &A[(i + 3) * lda];
        double p0[LANES] = { 0 }, p1[LANES] = { 0 };
        double p2[LANES] = { 0 }, p3[LANES] = { 0 };
        size_t j = 0;
        for (; j + LANES <= n; j += LANES) {
            if (j % 8 == 0) {
                __builtin_prefetch(&r0[j + PREFETCH_DISTANCE], 0, 3);
                __builtin_prefetch(&r1[j + PREFETCH_DISTANCE], 0, 3);
                __builtin_prefetch(&r2[j + PREFETCH_DISTANCE], 0, 3);
                __builtin_prefetch(&r3[j + PREFETCH_DISTANCE], 0, 3);
            }
            for (size_t lane = 0; lane < LANES; lane++) {
                double xj = x[j + lane];
                p0[lane] += r0[j + lane] * xj;
                p1[lane] += r1[j + lane] * xj;
                p2[lane] += r2[j + lane] * xj;
                p3[lane] += r3[j + lane] * xj;
            }
        }
        y[i + 0] = finish_row(p0, r0, x, j, n);
        y[i + 1] = finish_row(p1, r1, x, j, n);
        y[i + 2] = finish_row(p2, r2, x, j, n);
        y[i + 3] = finish_row(p3, r3, x, j, n);
    }
    for (; i < rows; i++)
        y[i] = one_row(n, &A[i * lda], x);
}
