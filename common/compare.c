/* Comparing computed numbers with expected ones. */
#include "compare.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static void note(comparison_t *c, size_t i, double expected, double got,
                 double bound)
{
    if (c->wrong++ > 0)
        return;
    c->first = i;
    c->expected = expected;
    c->got = got;
    c->abs_error = fabs(got - expected);
    c->rel_error = expected != 0.0 ? c->abs_error / fabs(expected)
                                   : c->abs_error;
    c->bound = bound;
}

comparison_t compare_within(const double *expected, const double *got,
                            const double *bound, size_t n)
{
    comparison_t c = { .count = n };
    for (size_t i = 0; i < n; i++) {
        /* Written so that a NaN anywhere fails: every comparison with NaN
         * is false. */
        if (!(fabs(got[i] - expected[i]) <= bound[i]))
            note(&c, i, expected[i], got[i], bound[i]);
    }
    return c;
}

comparison_t compare_relative(const double *expected, const double *got,
                              size_t n, double rtol, double atol)
{
    comparison_t c = { .count = n };
    for (size_t i = 0; i < n; i++) {
        double bound = rtol * fabs(expected[i]) + atol;
        if (!(fabs(got[i] - expected[i]) <= bound))
            note(&c, i, expected[i], got[i], bound);
    }
    return c;
}

comparison_t compare_bitwise(const double *expected, const double *got,
                             size_t n)
{
    comparison_t c = { .count = n };
    for (size_t i = 0; i < n; i++) {
        uint64_t e, g;
        memcpy(&e, &expected[i], sizeof e);
        memcpy(&g, &got[i], sizeof g);
        if (e != g)
            note(&c, i, expected[i], got[i], 0.0);
    }
    return c;
}

void comparison_describe(const comparison_t *c, const char *name, char *buf,
                         size_t len)
{
    if (c->wrong == 0) {
        snprintf(buf, len, "%s: all %zu elements right", name, c->count);
        return;
    }
    snprintf(buf, len,
             "%s[%zu]: expected %.17g, got %.17g (error %.3g, relative %.3g, "
             "allowed %.3g); %zu of %zu elements wrong",
             name, c->first, c->expected, c->got, c->abs_error, c->rel_error,
             c->bound, c->wrong, c->count);
}
