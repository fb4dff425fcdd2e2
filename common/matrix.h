/* Dense matrices and vectors of doubles: allocation with checked sizes, and
 * filling from a seed.
 *
 * Storage is row-major: entry (i, j) of an m x n matrix A is A[i*n + j].
 * Sizes come from users, so every byte count is checked for overflow before
 * it reaches malloc: 100000 x 100000 doubles is 80 GB, not a wrapped-around
 * small number. */
#ifndef ZZ_MATRIX_H
#define ZZ_MATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status for a size that cannot be honoured: it is bad input. */
enum { MATRIX_EXIT_TOO_LARGE = 2 };

/* *bytes = rows * cols * sizeof(double); false when that overflows size_t. */
bool matrix_bytes(size_t rows, size_t cols, size_t *bytes);

/* rows * cols doubles, 64-byte aligned (a cache line, and wide enough for
 * any vector unit), every byte written once so that no page fault lands
 * inside a timed region later, and recorded in the memory ledger as
 * "matrix" (memory_ledger.h). When the size overflows or memory runs out,
 * NULL, with one line in `error` that names the buffer (`what`) and the
 * size: "cannot allocate 7.3 TiB for A (1000000 x 1000000 doubles): not
 * enough memory". Free with matrix_free. */
double *matrix_try_alloc(size_t rows, size_t cols, const char *what,
                         char *error, size_t error_len);

/* The same for a vector of n doubles, recorded as "vector". */
double *vector_try_alloc(size_t n, const char *what, char *error,
                         size_t error_len);

/* matrix_try_alloc and vector_try_alloc for programs with one process and
 * for a student's code: instead of returning NULL they print "error: " and
 * the reason on one line, and exit with MATRIX_EXIT_TOO_LARGE. An MPI
 * driver that must end every rank together uses the _try_ forms and
 * mpi_exit_if_any (check_mpi.h). */
double *matrix_alloc_or_exit(size_t rows, size_t cols, const char *what);
double *vector_alloc_or_exit(size_t n, const char *what);

void matrix_free(double *data);

/* Fills the rows x cols block of a generated matrix whose top-left entry is
 * global entry (row0, col0): block[r*cols + c] = value of global (row0+r,
 * col0+c), uniform in [-1, 1), a function of (seed, global row, global col)
 * only. Any partition of the matrix therefore generates the same matrix. */
void matrix_fill_random(double *block, size_t rows, size_t cols,
                        size_t row0, size_t col0, uint64_t seed);

/* Fills x[k] with element (offset + k) of the generated vector for `seed`,
 * uniform in [-1, 1). The vector's numbers are independent of the matrix
 * generated from the same seed. */
void vector_fill_random(double *x, size_t n, size_t offset, uint64_t seed);

#endif
