/* Reference results and their error bounds (reference.h). gamma_n is in
 * error_bound.c: a lesson's code may call it, and must not bring the
 * references beside it into its programs (tests/symbols/01-serial-matvec.txt). */
#include "reference.h"

#include <math.h>

/* a + b = *sum + *error exactly (Knuth's TwoSum). */
static void two_sum(double a, double b, double *sum, double *error)
{
    double s = a + b;
    double b_virtual = s - a;
    *error = (a - (s - b_virtual)) + (b - b_virtual);
    *sum = s;
}

/* a * b = *product + *error exactly; fma computes a*b - p with one rounding,
 * which is exact here. */
static void two_product(double a, double b, double *product, double *error)
{
    double p = a * b;
    *error = fma(a, b, -p);
    *product = p;
}

double dot_reference(size_t n, const double *x, const double *y,
                     double *abs_sum)
{
    double sum = 0.0, compensation = 0.0, magnitude = 0.0;
    for (size_t k = 0; k < n; k++) {
        double product, product_error, sum_error;
        two_product(x[k], y[k], &product, &product_error);
        two_sum(sum, product, &sum, &sum_error);
        compensation += product_error + sum_error;
        magnitude += fabs(product);
    }
    if (abs_sum != NULL)
        *abs_sum = magnitude;
    return sum + compensation;
}

void reference_matvec(size_t m, size_t n, const double *A, const double *x,
                      double *y, double *bound)
{
    double g = gamma_n(n);
    for (size_t i = 0; i < m; i++) {
        double magnitude;
        y[i] = dot_reference(n, &A[i * n], x, &magnitude);
        if (bound != NULL)
            bound[i] = (g + g * g) * magnitude * (1.0 + 2.0 * g)
                       + 2.0 * UNIT_ROUNDOFF * fabs(y[i]);
    }
}
