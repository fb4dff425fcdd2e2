/* Comparing computed numbers with expected ones, within a stated tolerance.
 *
 * Floating-point results are almost never bitwise equal to a reference: the
 * order of additions changes the rounding. So a comparison needs a bound on
 * the error that a correct computation can make, and it must say, when it
 * fails, which element, what was expected, what came, and by how much. */
#ifndef ZZ_COMPARE_H
#define ZZ_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    size_t count;      /* elements compared */
    size_t wrong;      /* elements outside their bound (NaN always is) */
    size_t first;      /* index of the first wrong element */
    double expected;   /* at `first` */
    double got;
    double abs_error;  /* |got - expected| */
    double rel_error;  /* abs_error / |expected|, or abs_error if expected is 0 */
    double bound;      /* the error allowed at `first` */
} comparison_t;

/* Element i is right when |got[i] - expected[i]| <= bound[i]. */
comparison_t compare_within(const double *expected, const double *got,
                            const double *bound, size_t n);

/* Element i is right when |got[i] - expected[i]| <= rtol*|expected[i]| + atol. */
comparison_t compare_relative(const double *expected, const double *got,
                              size_t n, double rtol, double atol);

/* Element i is right when got[i] and expected[i] are the same bits, for
 * results that must not depend on how the work was divided. */
comparison_t compare_bitwise(const double *expected, const double *got,
                             size_t n);

static inline bool comparison_ok(const comparison_t *c) { return c->wrong == 0; }

/* One line for a person: "y[3]: expected 1.25, got 1.5 (error 0.25,
 * relative 0.2, allowed 1.1e-15); 4 of 16 elements wrong". `name` is the
 * vector's name as the lesson text calls it. */
void comparison_describe(const comparison_t *c, const char *name, char *buf,
                         size_t len);

#endif
