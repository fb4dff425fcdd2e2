/* An example of an instructor's hidden test for lesson 01 (see README.md
 * here): a wide, short matrix whose rows are longer than any in the visible
 * tests, checked against the compensated reference within the dot-product
 * error bound of common/reference.h. */
#include "harness.h"
#include "matrix.h"
#include "matvec.h"
#include "reference.h"

START_TEST(fast_wide_rows)
{
    enum { m = 6, n = 5003 };
    double *A = matrix_alloc(m, n, "A"), *x = vector_alloc(n, "x");
    double *y = vector_alloc(m, "y"), *expected = vector_alloc(m, "y");
    double *bound = vector_alloc(m, "bound");
    matrix_fill_random(A, m, n, 0, 0, 77);
    vector_fill_random(x, n, 0, 77);
    reference_matvec(m, n, A, x, expected, bound);
    matvec_fast(m, n, A, x, y);
    comparison_t c = compare_within(expected, y, bound, m);
    EXPECT_COMPARISON(&c, "y", "TODO 2-4: a row of 5003 columns, and a "
                      "block of four rows with two more after it");
    matrix_free(A);
    matrix_free(x);
    matrix_free(y);
    matrix_free(expected);
    matrix_free(bound);
}
END_TEST

void hidden_tests(Suite *suite)
{
    harness_add(suite, "hidden: fast 6 x 5003: long rows", fast_wide_rows, 0,
                10);
}
