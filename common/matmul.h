/* Products of row-major float matrices, blocked for the cache and shared
 * among OpenMP threads: the work of an MLP's layers on a batch, which is
 * lesson 01's matrix-vector product on many vectors at once.
 *
 * Each output element is summed over k in increasing order by one thread,
 * whatever the number of threads, so results do not depend on it. */
#ifndef ZZ_MATMUL_H
#define ZZ_MATMUL_H

#include <stddef.h>

/* C = A B^T (+ C when accumulate).  A is (m, k), B is (n, k), C is (m, n). */
void matmul_abt(size_t m, size_t n, size_t k, const float *A, const float *B,
                float *C, int accumulate);

/* C = A^T B (+ C when accumulate).  A is (k, m), B is (k, n), C is (m, n). */
void matmul_atb(size_t m, size_t n, size_t k, const float *A, const float *B,
                float *C, int accumulate);

/* C = A B (+ C when accumulate).    A is (m, k), B is (k, n), C is (m, n). */
void matmul_ab(size_t m, size_t n, size_t k, const float *A, const float *B,
               float *C, int accumulate);

#endif
