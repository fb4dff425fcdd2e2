/* An example of an instructor's hidden test for lesson 01 (see README.md
 * here): a wide, short matrix whose rows are longer than any in the visible
 * tests, checked against the compensated reference within the dot-product
 * error bound of common/reference.h. The student's kernel runs in the
 * lesson's producer, on the inputs this test writes. */
#include "harness.h"
#include "matrix.h"
#include "reference.h"

START_TEST(fast_wide_rows)
{
    enum { m = 6, n = 5003 };
    double *A = matrix_alloc_or_exit(m, n, "A");
    double *x = vector_alloc_or_exit(n, "x");
    double *y = vector_alloc_or_exit(m, "y");
    double *expected = vector_alloc_or_exit(m, "y");
    double *bound = vector_alloc_or_exit(m, "bound");
    char dir[HARNESS_PATH];
    matrix_fill_random(A, m, n, 0, 0, 77);
    vector_fill_random(x, n, 0, 77);
    reference_matvec(m, n, A, x, expected, bound);
    harness_out_dir(dir);
    harness_write_input(dir, "A", A, sizeof *A, (size_t)m * n);
    harness_write_input(dir, "x", x, sizeof *x, n);
    run_result r = harness_produce("01-serial-matvec", "fast", dir, "6 5003",
                                   NULL, 8);
    harness_expect_success(&r, "matvec_fast on a 6 x 5003 matrix");
    run_result_free(&r);
    harness_read_output(dir, "y", y, sizeof *y, m);
    harness_remove_out_dir(dir);
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
