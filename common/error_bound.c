/* gamma_n, the constant of the error bound of a sum (reference.h). In a
 * file of its own, apart from the references in reference.c: a lesson's code
 * may call it to bound its own error, and no program that runs a student's
 * code may hold the references (scripts/check-program.sh). */
#include "reference.h"

double gamma_n(size_t n)
{
    double nu = (double)n * UNIT_ROUNDOFF;
    return nu / (1.0 - nu);
}
