/* Lesson 03, y = Ax shared among OpenMP threads.
 * You write: the rows split among the threads (TODO 1), a triangular
 * product whose rows are handed out by a schedule chosen at run time
 * (TODO 2), and the columns split among the threads, with partial results
 * added up afterwards (TODO 3).
 * Given: compute_rows (compute_rows.h), through which TODO 1 and 2 compute
 * every row, the serial kernel matvec_rows (common/kernels.h) for TODO 3,
 * and the driver (main.c) that checks and times you.
 * Run `make check L=03` to test, `make tsan L=03` to look for data races;
 * `make all`, then OMP_NUM_THREADS=2 build/student/03-openmp/openmp to
 * time. */
#include "omp_matvec.h"

#include <omp.h>

#include "compute_rows.h"
#include "kernels.h"
#include "not_done.h"
#include "partition.h"

/* Rows one loop iteration hands to compute_rows: the kernel's own block of
 * four, so that every full block goes down its fast path. */
enum { ROWS_PER_TASK = 4 };

/* The rows split among the threads. A is (m, n) row-major, x is (n), y is
 * (m). */
void matvec_omp_rows(size_t m, size_t n, const double *A, const double *x,
                     double *y)
{
    /* TODO 1 start: share the rows among the threads with a parallel loop.
     * Let each iteration give ROWS_PER_TASK whole rows (fewer in the last
     * one) to compute_rows: compute_rows(i, rows, n, A, n, x, y) computes
     * rows i .. i+rows-1 of y. Every row exactly once, never split, so
     * every y[i] comes out with the same bits as in one serial call.
     * Anything an iteration works out for itself (how many rows it takes)
     * belongs to that iteration alone: declare it inside the loop. */
    NOT_DONE();
    /* TODO 1 end */
}

/* y = L x, L lower-triangular. L is (n, n) row-major, x is (n), y is (n). */
void matvec_omp_triangular(size_t n, const double *L, const double *x,
                           double *y)
{
    /* TODO 2 start: y[i] is row i of L from column 0 to the diagonal
     * (i + 1 entries) times x[0 .. i]: compute_rows(i, 1, i + 1, L, n, x, y)
     * for one row. One loop iteration per row, shared among the threads
     * by a schedule chosen when the program runs, not when it is compiled,
     * so that OMP_SCHEDULE or omp_set_schedule() can try static, dynamic
     * and guided on the same binary. Row i costs i + 1 multiply-adds:
     * which threads get the expensive rows under each schedule? */
    NOT_DONE();
    /* TODO 2 end */
}

/* The columns split among the threads. A is (m, n) row-major, x is (n), y
 * is (m); partials is (omp_get_max_threads(), m): row t belongs to thread
 * t. */
void matvec_omp_columns(size_t m, size_t n, const double *A, const double *x,
                        double *y, double *partials)
{
    /* TODO 3 start: in one parallel region,
     *   1. thread t of a team of T takes block t of the columns
     *      (block_range over n, T parts) and computes its partial y, the
     *      product of those columns of A with the same slice of x, into
     *      row t of partials (length m). matvec_rows can do it: the block
     *      starts at column c0 of row 0, and its rows are still n doubles
     *      apart in A;
     *   2. when every thread's partial y is complete (and not before),
     *      y[i] = the sum over t of partials[t*m + i], added in thread
     *      order; share the rows of this sum among the threads too.
     * No thread may add into y while another one could be doing the same:
     * that is a data race, and it loses additions. Each thread's own
     * numbers (its thread number, its columns, a running sum) are declared
     * inside the region, so that each thread has its own. */
    NOT_DONE();
    /* TODO 3 end */
}
