/* Lesson 04: checking a product computed in float.
 *
 * The reference (common/reference.h) works in double. A float kernel gets
 * A and x rounded to float, and sums in float. So: round the generated
 * numbers to float first (round_to_float), compute the reference from the
 * rounded numbers in double, and allow the error of a float dot product.
 * Then the comparison sees only the kernel's own rounding, not the
 * rounding of its inputs. */
#ifndef ZZ_LESSON04_FLOAT_REFERENCE_H
#define ZZ_LESSON04_FLOAT_REFERENCE_H

#include <stddef.h>

/* Unit roundoff of float: 2^-24. */
#define FLOAT_UNIT_ROUNDOFF 0x1.0p-24

/* values[k] = the nearest float to values[k], for k < count (in place, so
 * that the doubles hold exactly the floats a kernel will see). */
void round_to_float(double *values, size_t count);

/* to[k] = (float)from[k], for k < count: exact after round_to_float. */
void copy_to_float(float *to, const double *from, size_t count);

/* reference_matvec for a float computation: y[i] from Dot2 on the (already
 * rounded) A (m, n) and x (n), and bound[i], the largest error any float
 * computation of y[i] may show against it: gamma_n with float's unit
 * roundoff, n u / (1 - n u) with u = 2^-24, times sum_j |A[i][j] x[j]|
 * (Higham, section 3.1: any order of additions, with or without fused
 * multiply-adds), plus the reference's own error. Needs n < 2^24. */
void reference_matvec_float(size_t m, size_t n, const double *A,
                            const double *x, double *y, double *bound);

#endif
