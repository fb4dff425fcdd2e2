/* The shared library's fast y = Ax, for lessons that need a matvec but are
 * about something else (distributing it, threading it), so that a student
 * stuck on lesson 01 is not blocked later.
 *
 * Every y[i] is computed by the same sequence of operations whether row i
 * falls in a block of four rows or not, and whichever rows come before it.
 * So any split of the rows (between ranks, between threads) gives results
 * bitwise identical to one call over all rows. */
#ifndef ZZ_KERNELS_H
#define ZZ_KERNELS_H

#include <stddef.h>

/* y = A x. A is (rows, n) row-major with rows `lda` doubles apart (lda >= n),
 * x is (n), y is (rows). */
void matvec_rows(size_t rows, size_t n, const double *A, size_t lda,
                 const double *x, double *y);

#endif
