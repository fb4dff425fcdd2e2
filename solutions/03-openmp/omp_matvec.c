/* Lesson 03, y = Ax shared among OpenMP threads: reference solution.
 * You write: the rows split among the threads (TODO 1), a triangular
 * product whose rows are handed out by a schedule chosen at run time
 * (TODO 2), and the columns split among the threads, with partial results
 * added up afterwards (TODO 3).
 * Given: compute_rows (compute_rows.h), through which TODO 1 and 2 compute
 * every row, the serial kernel matvec_rows (common/kernels.h) for TODO 3,
 * and the driver (main.c) that checks and times you. */
#include "omp_matvec.h"

#include <omp.h>

#include "compute_rows.h"
#include "kernels.h"
#include "not_done.h"
#include "partition.h"

/* Rows one loop iteration hands to compute_rows: the kernel's own block of
 * four, so that every full block goes down its fast path. */
enum { ROWS_PER_TASK = 4 };

void matvec_omp_rows(size_t m, size_t n, const double *A, const double *x,
                     double *y)
{
    /* TODO 1 start */
    /* schedule(static): every thread gets one contiguous run of rows, which
     * the hardware prefetcher follows as a single stream, and no thread
     * ever waits to be given work. */
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < m; i += ROWS_PER_TASK) {
        size_t rows = m - i < ROWS_PER_TASK ? m - i : ROWS_PER_TASK;
        compute_rows(i, rows, n, A, n, x, y);
    }
    /* TODO 1 end */
}

void matvec_omp_triangular(size_t n, const double *L, const double *x,
                           double *y)
{
    /* TODO 2 start */
    #pragma omp parallel for schedule(runtime)
    for (size_t i = 0; i < n; i++)
        compute_rows(i, 1, i + 1, L, n, x, y);
    /* TODO 2 end */
}

void matvec_omp_columns(size_t m, size_t n, const double *A, const double *x,
                        double *y, double *partials)
{
    /* TODO 3 start */
    #pragma omp parallel
    {
        size_t threads = (size_t)omp_get_num_threads();
        size_t thread = (size_t)omp_get_thread_num();
        size_t c0, c1;
        block_range(n, threads, thread, &c0, &c1);
        /* Columns c0 .. c1-1 of every row: the block starts at A[c0], its
         * rows n doubles apart. A thread with no columns (n < threads)
         * writes zeros, so every row of partials is defined. */
        matvec_rows(m, c1 - c0, &A[c0], n, &x[c0], &partials[thread * m]);
        /* Nobody may read a partial y before its thread has finished it. */
        #pragma omp barrier
        /* The sum, in thread order: the same bits on every run with the
         * same team size. */
        #pragma omp for schedule(static)
        for (size_t i = 0; i < m; i++) {
            double sum = partials[i];
            for (size_t t = 1; t < threads; t++)
                sum += partials[t * m + i];
            y[i] = sum;
        }
    }
    /* TODO 3 end */
}
