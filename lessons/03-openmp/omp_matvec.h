/* Lesson 03: y = Ax shared among the OpenMP threads of one process, three
 * ways, which you write in omp_matvec.c.
 *
 * Every function uses the team that a parallel region opened here would
 * get: omp_get_max_threads() threads, set by OMP_NUM_THREADS or
 * omp_set_num_threads(). Each overwrites all of y and changes nothing else
 * (apart from the workspace it is given). */
#ifndef ZZ_LESSON03_OMP_MATVEC_H
#define ZZ_LESSON03_OMP_MATVEC_H

#include <stddef.h>

/* The most threads the lesson's programs accept (openmp's --threads,
 * OMP_NUM_THREADS). Each thread reserves a stack, 8 MiB by default on
 * Linux, and make grade gives a process 4 GiB of address space: 256
 * threads' stacks take half of it, and leave the rest for the matrices. */
enum { MAX_THREADS = 256 };

/* TODO 1. The rows split among the threads; each row computed whole, once,
 * by one thread, with compute_rows (compute_rows.h), so y is bitwise
 * identical to matvec_rows(m, n, A, n, x, y) for any thread count.
 * A is (m, n) row-major, x is (n), y is (m). */
void matvec_omp_rows(size_t m, size_t n, const double *A, const double *x,
                     double *y);

/* TODO 2. y = L x for a lower-triangular L: y[i] = sum over j <= i of
 * L[i][j] x[j]; the entries above the diagonal are never read. One loop
 * iteration per row, handed to threads by the schedule set with
 * omp_set_schedule() or OMP_SCHEDULE (schedule(runtime)). Row i is
 * computed once, by compute_rows(i, 1, i + 1, L, n, x, y), bit for bit as
 * one serial call would. L is (n, n) row-major, x is (n), y is (n). */
void matvec_omp_triangular(size_t n, const double *L, const double *x,
                           double *y);

/* TODO 3. The columns split among the threads: thread t computes the
 * product of its block of columns with its slice of x, a partial y of
 * length m, into row t of `partials`; then the partial ys are added up into
 * y. Within the error bound of a dot product of length n, not bitwise equal
 * to the row split (the additions are grouped differently).
 * A is (m, n) row-major, x is (n), y is (m); partials is
 * (omp_get_max_threads(), m), row-major, workspace the caller allocates. */
void matvec_omp_columns(size_t m, size_t n, const double *A, const double *x,
                        double *y, double *partials);

#endif
