/* A layer's forward and backward on a part of it: see layer_split.h. */
#include "layer_split.h"

#include <string.h>

#include "matmul.h"

void layer_columns_forward(size_t batch, size_t in, size_t n,
                           const float *input, const float *w,
                           const float *b, float *pre)
{
    for (size_t s = 0; s < batch; s++)
        memcpy(&pre[s * n], b, n * sizeof *pre);
    matmul_abt(batch, n, in, input, w, pre, 1);
}

void layer_columns_backward(size_t batch, size_t in, size_t n,
                            const float *input, const float *w,
                            const float *dpre, float *dw, float *db,
                            float *dinput)
{
    memset(dw, 0, n * in * sizeof *dw);
    memset(db, 0, n * sizeof *db);
    layer_columns_backward_accumulate(batch, in, n, input, w, dpre, dw, db,
                                      dinput);
}

void layer_columns_backward_accumulate(size_t batch, size_t in, size_t n,
                                       const float *input, const float *w,
                                       const float *dpre, float *dw,
                                       float *db, float *dinput)
{
    /* pre = input · w^T + b: dw += dpre^T · input, db += the column sums
     * of dpre, each element's terms added one at a time in increasing
     * sample order onto what it holds; dinput = dpre · w. */
    matmul_atb(n, in, batch, dpre, input, dw, 1);
    for (size_t s = 0; s < batch; s++)
        for (size_t j = 0; j < n; j++)
            db[j] += dpre[s * n + j];
    if (dinput != NULL)
        matmul_ab(batch, in, n, dpre, w, dinput, 0);
}

void layer_bias_backward(size_t batch, size_t n, const float *dpre,
                         float *db)
{
    memset(db, 0, n * sizeof *db);
    for (size_t s = 0; s < batch; s++)
        for (size_t j = 0; j < n; j++)
            db[j] += dpre[s * n + j];
}

void layer_rows_forward(size_t batch, size_t k, size_t out,
                        const float *input_part, const float *w_part,
                        float *partial)
{
    matmul_abt(batch, out, k, input_part, w_part, partial, 0);
}

void layer_rows_backward(size_t batch, size_t k, size_t out,
                         const float *input_part, const float *w_part,
                         const float *dpre, float *dw_part,
                         float *dinput_part)
{
    matmul_atb(out, k, batch, dpre, input_part, dw_part, 0);
    if (dinput_part != NULL)
        matmul_ab(batch, k, out, dpre, w_part, dinput_part, 0);
}
