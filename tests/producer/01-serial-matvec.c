/* Lesson 01's producer (tests/harness/producer.h): runs your kernels on the
 * tests' inputs and writes what they computed.
 *   naive M N   y = A x by matvec_naive, A (M,N) and x (N) from A.bin, x.bin
 *   fast M N    the same by matvec_fast
 * Writes y.bin (M), and A.bin and x.bin again as the kernel left them (it
 * must only read them). y starts as NaN, so an element never written shows. */
#include <math.h>
#include <stdlib.h>

#include "matvec.h"
#include "producer.h"

static void run_kernel(void (*kernel)(size_t, size_t, const double *,
                                      const double *, double *))
{
    size_t m = producer_arg(0), n = producer_arg(1);
    double *A = producer_input("A", sizeof *A, m * n);
    double *x = producer_input("x", sizeof *x, n);
    double *y = producer_alloc(m, sizeof *y, "y");
    for (size_t i = 0; i < m; i++)
        y[i] = NAN;
    kernel(m, n, A, x, y);
    produce("y", y, sizeof *y, m);
    produce("A", A, sizeof *A, m * n);
    produce("x", x, sizeof *x, n);
    free(A);
    free(x);
    free(y);
}

static void naive(void)
{
    run_kernel(matvec_naive);
}

static void fast(void)
{
    run_kernel(matvec_fast);
}

int main(int argc, char **argv)
{
    static const producer_case cases[] = { { "naive", 2, naive, false },
                                           { "fast", 2, fast, false } };
    return producer_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
