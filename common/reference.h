/* Reference results to check against, and the error a correct result may have.
 *
 * A check must not trust the code it checks. These references are computed
 * differently from any lesson's kernel: with compensated arithmetic, as if in
 * twice the working precision, so their own error is negligible next to the
 * error bound of the kernel being checked. */
#ifndef ZZ_REFERENCE_H
#define ZZ_REFERENCE_H

#include <stddef.h>

/* Unit roundoff of double: 2^-53. */
#define UNIT_ROUNDOFF 0x1.0p-53

/* gamma_n = n*u / (1 - n*u), the constant in the error bound of a sum of n
 * terms (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
 * Lemma 3.1). */
double gamma_n(size_t n);

/* The dot product sum x[k]*y[k] by Ogita, Rump and Oishi's Dot2 ("Accurate
 * sum and dot product", SIAM J. Sci. Comput. 26(6), 2005), whose error is
 * at most u*|result| + gamma_n^2 * sum |x[k]*y[k]|.
 * *abs_sum, when not NULL, receives sum |x[k]*y[k]|. */
double dot_reference(size_t n, const double *x, const double *y,
                     double *abs_sum);

/* y = A x for a row-major m x n matrix, with Dot2 for each row, and
 * bound[i], the largest error any correct double-precision computation of
 * y[i] may show against this reference:
 *
 *   A length-n dot product computed in double, with the additions in any
 *   order, with or without fused multiply-adds, has error at most
 *   gamma_n * sum_j |A[i,j] x[j]| (Higham, section 3.1). The reference's own
 *   error adds u*|y[i]| + gamma_n^2 * sum_j |A[i,j] x[j]|. bound[i] is the
 *   sum of the two, with |y[i]| taken twice to cover the reference's rounding.
 *
 * The bound assumes no underflow or overflow, true for the generated inputs.
 * bound may be NULL. */
void reference_matvec(size_t m, size_t n, const double *A, const double *x,
                      double *y, double *bound);

#endif
