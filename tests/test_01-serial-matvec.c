/* Lesson 01's tests: both kernels, on every shape that trips a matvec up,
 * against a reference computed here with compensated arithmetic. The
 * kernels run in the lesson's producer (tests/producer/01-serial-matvec.c),
 * never in this program. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "matrix.h"
#include "reference.h"
#include "rng.h"

typedef struct {
    size_t m, n;
    bool mixed;       /* entries scaled by 2^k, k in [-20, 20], mixed signs */
    const char *why;  /* what the shape catches */
} shape;

static const shape shapes[] = {
    { 1, 1, false, "the smallest product" },
    { 1, 37, false, "one row" },
    { 37, 1, false, "one column" },
    { 3, 5, false, "more columns than rows" },
    { 5, 3, false, "more rows than columns" },
    { 4, 4, false, "one full block of rows and columns" },
    { 13, 17, false, "rows and columns beyond the last full block" },
    { 7, 6, false, "a partial block of rows and of columns" },
    { 64, 64, false, "square, a multiple of every block" },
    { 101, 1003, true, "mixed signs and magnitudes" },
    { 250, 40, true, "tall, mixed magnitudes" },
};
enum { shape_count = sizeof shapes / sizeof shapes[0] };

static void fill(const shape *s, double *A, double *x)
{
    matrix_fill_random(A, s->m, s->n, 0, 0, 2024);
    vector_fill_random(x, s->n, 0, 2024);
    if (s->mixed) {
        rng_t rng = rng_seeded(7);
        for (size_t k = 0; k < s->m * s->n; k++)
            A[k] = ldexp(A[k], (int)(rng_next_u64(&rng) % 41) - 20);
    }
}

/* Runs the producer's `kernel` case on shape `index`. y starts as NaN there,
 * so an element the kernel never writes fails; the producer also writes
 * back A and x as the kernel left them, so a kernel that writes to them is
 * caught. The tolerance is reference_matvec's per-row bound: the error of a
 * length-n dot product in double, in any order of additions,
 * gamma_n * sum_j |A[i,j] x[j]| (see common/reference.h). */
static void check_kernel(const char *kernel, int index, const char *hint)
{
    const shape *s = &shapes[index];
    double *A = matrix_alloc_or_exit(s->m, s->n, "A");
    double *A_after = matrix_alloc_or_exit(s->m, s->n, "A after");
    double *x = vector_alloc_or_exit(s->n, "x");
    double *x_after = vector_alloc_or_exit(s->n, "x");
    double *y = vector_alloc_or_exit(s->m, "y");
    double *expected = vector_alloc_or_exit(s->m, "y");
    double *bound = vector_alloc_or_exit(s->m, "bound");
    char dir[HARNESS_PATH], args[64], what[96];
    fill(s, A, x);
    reference_matvec(s->m, s->n, A, x, expected, bound);

    harness_out_dir(dir);
    harness_write_input(dir, "A", A, sizeof *A, s->m * s->n);
    harness_write_input(dir, "x", x, sizeof *x, s->n);
    snprintf(args, sizeof args, "%zu %zu", s->m, s->n);
    snprintf(what, sizeof what, "matvec_%s on a %zu x %zu matrix", kernel,
             s->m, s->n);
    run_result r = harness_produce("01-serial-matvec", kernel, dir, args,
                                   NULL, 8);
    harness_expect_success(&r, what);
    run_result_free(&r);
    harness_read_output(dir, "y", y, sizeof *y, s->m);
    harness_read_output(dir, "A", A_after, sizeof *A_after, s->m * s->n);
    harness_read_output(dir, "x", x_after, sizeof *x_after, s->n);
    harness_remove_out_dir(dir);

    comparison_t c = compare_within(expected, y, bound, s->m);
    if (!comparison_ok(&c)) {
        char text[512];
        comparison_describe(&c, "y", text, sizeof text);
        if (isnan(c.got))
            ck_abort_msg("A is %zu x %zu (%s): %s. Hint: y[%zu] is NaN: it "
                         "was never written (the test fills y with NaN "
                         "first), or the sum read outside A or x", s->m, s->n,
                         s->why, text, c.first);
        ck_abort_msg("A is %zu x %zu (%s): %s. Hint: %s", s->m, s->n, s->why,
                     text, hint);
    }
    c = compare_bitwise(A, A_after, s->m * s->n);
    ck_assert_msg(comparison_ok(&c), "the kernel changed A[%zu]: it must "
                  "only read A", c.first);
    c = compare_bitwise(x, x_after, s->n);
    ck_assert_msg(comparison_ok(&c), "the kernel changed x[%zu]: it must "
                  "only read x", c.first);
    matrix_free(A);
    matrix_free(A_after);
    matrix_free(x);
    matrix_free(x_after);
    matrix_free(y);
    matrix_free(expected);
    matrix_free(bound);
}

START_TEST(naive_shape)
{
    check_kernel("naive", _i, "TODO 1: each y[i] is the dot product of "
                 "row i (A[i*n] .. A[i*n + n-1]) with x; set y[i], do not add "
                 "to it");
}
END_TEST

START_TEST(fast_shape)
{
    check_kernel("fast", _i, "TODO 2-4: check the rows after the last full "
                 "block and the columns after the last full group of LANES "
                 "(TODO 4), and that every partial sum starts at zero");
}
END_TEST

Suite *lesson_suite(void)
{
    static char names[2][shape_count][96];
    Suite *suite = suite_create("01-serial-matvec");
    for (int k = 0; k < shape_count; k++) {
        snprintf(names[0][k], sizeof names[0][k], "naive %zu x %zu: %s",
                 shapes[k].m, shapes[k].n, shapes[k].why);
        harness_add(suite, names[0][k], naive_shape, k, 10);
    }
    for (int k = 0; k < shape_count; k++) {
        snprintf(names[1][k], sizeof names[1][k], "fast %zu x %zu: %s",
                 shapes[k].m, shapes[k].n, shapes[k].why);
        harness_add(suite, names[1][k], fast_shape, k, 10);
    }
    return suite;
}
