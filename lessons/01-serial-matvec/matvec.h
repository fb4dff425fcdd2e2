/* Lesson 01: the two versions of y = Ax that you write in matvec.c.
 *
 * Shapes: A is (m, n), row-major, so A[i][j] is A[i*n + j]; x is (n);
 * y is (m). Both functions overwrite all of y and change nothing else. */
#ifndef ZZ_LESSON01_MATVEC_H
#define ZZ_LESSON01_MATVEC_H

#include <stddef.h>

/* The plain loop: one row at a time, one addition at a time. */
void matvec_naive(size_t m, size_t n, const double *A, const double *x,
                  double *y);

/* The same product, written so that the compiler and the memory system can
 * go fast. `restrict` promises that y does not overlap A or x. */
void matvec_fast(size_t m, size_t n, const double *restrict A,
                 const double *restrict x, double *restrict y);

#endif
