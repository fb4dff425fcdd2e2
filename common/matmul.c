/* Products of row-major float matrices, blocked for the cache, shared among
 * OpenMP threads by blocks of output rows.
 *
 * All three products are one computation, C(i,j) += sum_k A(i,k) B(k,j),
 * read through strides: A(i,k) = A[i*a_row + k*a_depth] and B(k,j) =
 * B[k*b_depth + j], contiguous in j. For A B and A^T B that is how B already
 * lies; for A B^T a tile of B is first copied transposed ("packed").
 *
 * The innermost loop runs over j, across output elements, never over k: so
 * the compiler can put eight (or sixteen) j in one vector register and each
 * element still receives its terms one at a time, k = 0, 1, 2, ... Tiling
 * splits k into tiles taken in increasing order, which keeps that order.
 * Threads share out whole blocks of rows of a fixed size, so every element
 * is computed by the same instructions whatever the thread count.
 *
 * Built with -DZZ_USE_CBLAS (and the BLAS's include and link flags, e.g.
 * `make CFLAGS="-DZZ_USE_CBLAS $(pkg-config --cflags openblas)"
 * LDFLAGS="$(pkg-config --libs openblas)"`), the products call cblas_sgemm
 * instead: faster on big matrices, but the BLAS chooses its own summation
 * order, which may change with its thread count, so the promise above no
 * longer holds. The default build does not use it. */
#include "matmul.h"

#include <string.h>

#ifdef ZZ_USE_CBLAS
#include <cblas.h>
#endif

#ifndef ZZ_USE_CBLAS

/* The register tile (MICRO_ROWS x MICRO_COLS accumulators: eight 256-bit
 * registers), the rows a thread takes at a time, and the cache tile of B
 * (DEPTH_TILE x COL_TILE floats, 32 KiB, packed on the stack for A B^T).
 * 64 x 128 x 128 runs at about 30-60 GFLOP/s on one core of a 2020s x86. */
enum {
    MICRO_ROWS = 4,
    MICRO_COLS = 16,
    ROW_BLOCK = 16,
    COL_TILE = 64,
    DEPTH_TILE = 128
};

/* How to read the operands of one product. */
typedef struct {
    const float *A;
    size_t a_row, a_depth;   /* A(i,k) = A[i*a_row + k*a_depth] */
    const float *B;
    size_t b_depth;          /* B(k,j) = B[k*b_depth + j] */
    int b_transposed;        /* B(k,j) is really B[j*b_depth + k]: pack it */
} operands;

_Static_assert(MICRO_ROWS == 4, "micro_tile is written out for four rows");

/* C's MICRO_ROWS x MICRO_COLS tile at C += A(rows, 0..depth) B(0..depth,
 * cols): the accumulators stay in registers across the whole depth. One
 * array per row, and the loop over columns innermost, is what lets the
 * compiler vectorise across columns (with a 4 x 16 array it vectorised
 * across the four rows instead, five times slower). */
static void micro_tile(size_t depth, const float *A, size_t a_row,
                       size_t a_depth, const float *B, size_t b_depth,
                       float *C, size_t ldc)
{
    float acc0[MICRO_COLS], acc1[MICRO_COLS], acc2[MICRO_COLS],
          acc3[MICRO_COLS];
    for (size_t c = 0; c < MICRO_COLS; c++) {
        acc0[c] = C[0 * ldc + c];
        acc1[c] = C[1 * ldc + c];
        acc2[c] = C[2 * ldc + c];
        acc3[c] = C[3 * ldc + c];
    }
    for (size_t p = 0; p < depth; p++) {
        const float *restrict b = &B[p * b_depth];
        const float *a = &A[p * a_depth];
        float a0 = a[0], a1 = a[a_row], a2 = a[2 * a_row], a3 = a[3 * a_row];
        for (size_t c = 0; c < MICRO_COLS; c++) {
            acc0[c] += a0 * b[c];
            acc1[c] += a1 * b[c];
            acc2[c] += a2 * b[c];
            acc3[c] += a3 * b[c];
        }
    }
    for (size_t c = 0; c < MICRO_COLS; c++) {
        C[0 * ldc + c] = acc0[c];
        C[1 * ldc + c] = acc1[c];
        C[2 * ldc + c] = acc2[c];
        C[3 * ldc + c] = acc3[c];
    }
}

/* The same for a ragged tile at the edge (rows <= MICRO_ROWS, cols <=
 * MICRO_COLS), summing straight into C. Each element still takes its terms
 * in increasing k, each product rounded and then added. */
static void edge_tile(size_t rows, size_t cols, size_t depth, const float *A,
                      size_t a_row, size_t a_depth, const float *B,
                      size_t b_depth, float *C, size_t ldc)
{
    for (size_t r = 0; r < rows; r++) {
        float *restrict c_row = &C[r * ldc];
        for (size_t p = 0; p < depth; p++) {
            float a = A[r * a_row + p * a_depth];
            const float *restrict b = &B[p * b_depth];
            for (size_t c = 0; c < cols; c++)
                c_row[c] += a * b[c];
        }
    }
}

/* Rows [first, first+rows) of C (m, n) += A B over the whole depth k. */
static void row_block(const operands *op, size_t first, size_t rows,
                      size_t n, size_t k, float *C)
{
    /* Only A B^T needs it; 32 KiB is small enough for any thread's stack. */
    float packed[DEPTH_TILE * COL_TILE];

    for (size_t j0 = 0; j0 < n; j0 += COL_TILE) {
        size_t cols = n - j0 < COL_TILE ? n - j0 : COL_TILE;
        /* k tiles in increasing order: the order of each element's sum. */
        for (size_t p0 = 0; p0 < k; p0 += DEPTH_TILE) {
            size_t depth = k - p0 < DEPTH_TILE ? k - p0 : DEPTH_TILE;
            const float *B;
            size_t b_depth;
            if (op->b_transposed) {
                for (size_t c = 0; c < cols; c++) {
                    const float *column = &op->B[(j0 + c) * op->b_depth + p0];
                    for (size_t p = 0; p < depth; p++)
                        packed[p * COL_TILE + c] = column[p];
                }
                B = packed;
                b_depth = COL_TILE;
            } else {
                B = &op->B[p0 * op->b_depth + j0];
                b_depth = op->b_depth;
            }
            for (size_t i = 0; i < rows; i += MICRO_ROWS) {
                size_t micro_rows = rows - i < MICRO_ROWS ? rows - i
                                                          : MICRO_ROWS;
                const float *A = &op->A[(first + i) * op->a_row +
                                        p0 * op->a_depth];
                float *C_tile = &C[(first + i) * n + j0];
                size_t j = 0;
                if (micro_rows == MICRO_ROWS)
                    for (; j + MICRO_COLS <= cols; j += MICRO_COLS)
                        micro_tile(depth, A, op->a_row, op->a_depth, &B[j],
                                   b_depth, &C_tile[j], n);
                for (; j < cols; j += MICRO_COLS) {
                    size_t micro_cols = cols - j < MICRO_COLS ? cols - j
                                                              : MICRO_COLS;
                    edge_tile(micro_rows, micro_cols, depth, A, op->a_row,
                              op->a_depth, &B[j], b_depth, &C_tile[j], n);
                }
            }
        }
    }
}

/* C (m, n) = A B, or += with accumulate: blocks of ROW_BLOCK rows shared
 * among the threads. */
static void product(const operands *op, size_t m, size_t n, size_t k,
                    float *C, int accumulate)
{
    size_t blocks = (m + ROW_BLOCK - 1) / ROW_BLOCK;
    /* A long loop of tiny blocks is not worth waking the threads for. */
    int worth_threads = (double)m * (double)n * (double)k > 32768.0;

    #pragma omp parallel for schedule(static) if (worth_threads)
    for (size_t block = 0; block < blocks; block++) {
        size_t first = block * ROW_BLOCK;
        size_t rows = m - first < ROW_BLOCK ? m - first : ROW_BLOCK;
        if (!accumulate)
            memset(&C[first * n], 0, rows * n * sizeof *C);
        row_block(op, first, rows, n, k, C);
    }
}

void matmul_abt(size_t m, size_t n, size_t k, const float *A, const float *B,
                float *C, int accumulate)
{
    /* A(i,p) = A[i*k + p]; B(p,j) is B[j*k + p], to be packed. */
    operands op = { A, k, 1, B, k, 1 };
    product(&op, m, n, k, C, accumulate);
}

void matmul_atb(size_t m, size_t n, size_t k, const float *A, const float *B,
                float *C, int accumulate)
{
    /* A is (k, m): A(i,p) = A[p*m + i]. */
    operands op = { A, 1, m, B, n, 0 };
    product(&op, m, n, k, C, accumulate);
}

void matmul_ab(size_t m, size_t n, size_t k, const float *A, const float *B,
               float *C, int accumulate)
{
    operands op = { A, k, 1, B, n, 0 };
    product(&op, m, n, k, C, accumulate);
}

#else /* ZZ_USE_CBLAS */

/* cblas_sgemm with the shapes of the three products; a BLAS takes int
 * sizes and leading dimensions of at least 1. */
static void blas_product(int transpose_a, int transpose_b, size_t m,
                         size_t n, size_t k, const float *A, const float *B,
                         float *C, int accumulate)
{
    if (m == 0 || n == 0)
        return;
    if (k == 0) {
        if (!accumulate)
            memset(C, 0, m * n * sizeof *C);
        return;
    }
    size_t lda = transpose_a ? m : k, ldb = transpose_b ? k : n;
    cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
                transpose_b ? CblasTrans : CblasNoTrans, (int)m, (int)n,
                (int)k, 1.0f, A, (int)lda, B, (int)ldb,
                accumulate ? 1.0f : 0.0f, C, (int)n);
}

void matmul_abt(size_t m, size_t n, size_t k, const float *A, const float *B,
                float *C, int accumulate)
{
    blas_product(0, 1, m, n, k, A, B, C, accumulate);
}

void matmul_atb(size_t m, size_t n, size_t k, const float *A, const float *B,
                float *C, int accumulate)
{
    blas_product(1, 0, m, n, k, A, B, C, accumulate);
}

void matmul_ab(size_t m, size_t n, size_t k, const float *A, const float *B,
               float *C, int accumulate)
{
    blas_product(0, 0, m, n, k, A, B, C, accumulate);
}

#endif
