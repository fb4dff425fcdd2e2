/* Lesson 03: the two parts of the hybrid MPI + OpenMP program that you
 * write, in hybrid.c. The rest of the program, the driver, is given in
 * hybrid_main.c. */
#ifndef ZZ_LESSON03_HYBRID_H
#define ZZ_LESSON03_HYBRID_H

#include <stddef.h>

/* TODO 5. Starts MPI for a program that has OpenMP threads, only the
 * thread that starts MPI ever calling it (MPI_THREAD_FUNNELED). Called
 * first thing in main, on every rank, with main's argc and argv. The
 * driver then asks MPI which thread level it really provides, on every
 * rank, and stops every rank together if any got less than FUNNELED. */
void start_mpi(int *argc, char ***argv);

/* TODO 6. y = A x for this rank's rows, on this rank's OpenMP threads
 * (OMP_NUM_THREADS of them), computing each row once. block is (rows, n)
 * row-major, this rank's rows of A; x is (n); y is (rows). */
void local_product(size_t rows, size_t n, const double *block,
                   const double *x, double *y);

#endif
