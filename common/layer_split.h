/* A layer's forward and backward on a part of it: some of its output rows
 * (a column split) or some of its input columns (a row split). Lesson 08's
 * tensor parallelism is made of these; the whole layer (mlp.c) is the
 * column split with every row, so there is one copy of the arithmetic.
 *
 * A layer is pre = in · W^T + b, W (out, in) row-major, in (batch, in).
 *
 *   column split: a rank holds rows [r0, r1) of W and of b, n = r1 - r0
 *     rows of `in` floats each (contiguous in W), and computes its n
 *     columns of pre from the whole input. Backward gives that part's dW
 *     and db, and its share of the gradient at the input: a partial sum,
 *     which the ranks add up (Megatron-LM's f: identity forward, allreduce
 *     backward).
 *
 *   row split: a rank holds columns [c0, c1) of W, k = c1 - c0, as an
 *     (out, k) matrix of its own, and computes from its k columns of the
 *     input a partial sum of every output, which the ranks add up (g:
 *     allreduce forward, identity backward). The bias is not in it: it is
 *     added once, after the sum.
 *
 * Every product is common/matmul.h's, so each output element is summed in
 * increasing order of k by one thread, whatever the thread count; the
 * functions allocate nothing. */
#ifndef ZZ_LAYER_SPLIT_H
#define ZZ_LAYER_SPLIT_H

#include <stddef.h>

/* pre (batch, n) = in (batch, in) · w^T + b, w (n, in), b (n). */
void layer_columns_forward(size_t batch, size_t in, size_t n,
                           const float *input, const float *w,
                           const float *b, float *pre);

/* From dpre (batch, n): dw (n, in) = dpre^T · input, db (n) = column sums
 * of dpre (in increasing order of the sample), and, when dinput is not
 * NULL, dinput (batch, in) = dpre · w: this part's share of the gradient
 * at the input. */
void layer_columns_backward(size_t batch, size_t in, size_t n,
                            const float *input, const float *w,
                            const float *dpre, float *dw, float *db,
                            float *dinput);

/* The same, adding onto dw and db what they hold: each element's terms
 * one at a time in increasing sample order, continuing its sum. So the
 * micro-batches of a batch, in order, leave in dw and db (zero at the
 * start) bitwise what one call on the whole batch leaves (lesson 09's
 * gradient accumulation). dinput is overwritten, as above. */
void layer_columns_backward_accumulate(size_t batch, size_t in, size_t n,
                                       const float *input, const float *w,
                                       const float *dpre, float *dw,
                                       float *db, float *dinput);

/* db (n) = the column sums of dpre (batch, n), each summed in increasing
 * order of the sample: the bias's gradient, for a bias added once after
 * the row split's sum (whole on every rank that holds dpre whole). */
void layer_bias_backward(size_t batch, size_t n, const float *dpre,
                         float *db);

/* partial (batch, out) = input_part (batch, k) · w_part^T, w_part (out, k):
 * this part's term of every output, no bias. */
void layer_rows_forward(size_t batch, size_t k, size_t out,
                        const float *input_part, const float *w_part,
                        float *partial);

/* From dpre (batch, out), the whole output's gradient: dw_part (out, k) =
 * dpre^T · input_part and, when dinput_part is not NULL, dinput_part
 * (batch, k) = dpre · w_part, the gradient at this part of the input
 * (whole: no other rank adds to it). */
void layer_rows_backward(size_t batch, size_t k, size_t out,
                         const float *input_part, const float *w_part,
                         const float *dpre, float *dw_part,
                         float *dinput_part);

#endif
