/* Lesson 04: the reference for a product computed in float. */
#include "float_reference.h"

#include <math.h>

#include "reference.h"

void round_to_float(double *values, size_t count)
{
    for (size_t k = 0; k < count; k++)
        values[k] = (double)(float)values[k];
}

void copy_to_float(float *to, const double *from, size_t count)
{
    for (size_t k = 0; k < count; k++)
        to[k] = (float)from[k];
}

void reference_matvec_float(size_t m, size_t n, const double *A,
                            const double *x, double *y, double *bound)
{
    double nu = (double)n * FLOAT_UNIT_ROUNDOFF;
    double gamma_float = nu / (1.0 - nu);
    double gamma_double = gamma_n(n);
    for (size_t i = 0; i < m; i++) {
        double magnitude;
        y[i] = dot_reference(n, &A[i * n], x, &magnitude);
        /* The float kernel's error, then Dot2's own (common/reference.h):
         * u|y| + gamma_n^2 sum|...| in double, |y| taken twice. */
        bound[i] = gamma_float * magnitude * (1.0 + 2.0 * gamma_float)
                   + gamma_double * gamma_double * magnitude
                   + 2.0 * UNIT_ROUNDOFF * fabs(y[i]);
    }
}
