/* Lesson 08, tensor parallelism as Megatron-LM does it: reference
 * solution.
 * You write: the column-parallel layer (TODO 1); the row-parallel layer
 * (TODO 2); the model, its layers in pairs, and the layer left over
 * (TODO 3); the optimizer step on each rank's own part (TODO 4);
 * sequence parallelism, the rows of the batch split outside the pairs
 * (TODO 5); going further, the cross-entropy on logits split by class
 * (TODO 6).
 * Given: the layers' products on a part of a layer (common/layer_split.h),
 * the activations (common/activation.h), the sums over the ranks
 * (tp_allreduce, tp_state.c), the optimizer (common/optimizer.h), the
 * memory ledger; the driver does the loss and the data (main.c). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "activation.h"
#include "layer_split.h"
#include "memory_ledger.h"
#include "not_done.h"
#include "optimizer.h"
#include "partition.h"
#include "tensor_parallel.h"

/* ---- TODO 1: the column-parallel layer ------------------------------- */

tp_part tp_column_part(int out, int ranks, int rank)
{
    /* TODO 1 start */
    size_t begin, end;
    block_range((size_t)out, (size_t)ranks, (size_t)rank, &begin, &end);
    return (tp_part){ (int)begin, (int)(end - begin) };
    /* TODO 1 end */
}

void tp_column_forward(tp_state *z, int l, const float *input)
{
    /* TODO 1 start */
    tp_layer *layer = &z->layers[l];
    const size_t in = (size_t)layer->in, n = (size_t)layer->part.count;
    layer_columns_forward(z->batch, in, n, input, layer->params,
                          layer->params + n * in, layer->pre);
    if (layer->activated)
        activation_forward(ACTIVATION_RELU, layer->pre, layer->post,
                           z->batch * n);
    /* TODO 1 end */
}

void tp_column_backward(tp_state *z, int l, const float *input,
                        float *dpost, float *dinput)
{
    /* TODO 1 start */
    tp_layer *layer = &z->layers[l];
    const size_t in = (size_t)layer->in, n = (size_t)layer->part.count;
    if (layer->activated)
        activation_backward(ACTIVATION_RELU, layer->pre, dpost,
                            z->batch * n);
    layer_columns_backward(z->batch, in, n, input, layer->params, dpost,
                           layer->grads, layer->grads + n * in, dinput);
    if (dinput != NULL)
        tp_allreduce(z, dinput, z->batch * in);
    /* TODO 1 end */
}

/* ---- TODO 2: the row-parallel layer ---------------------------------- */

void tp_row_forward(tp_state *z, int l, const float *input_part)
{
    /* TODO 2 start */
    tp_layer *layer = &z->layers[l];
    const size_t out = (size_t)layer->out, k = (size_t)layer->part.count;
    const float *bias = layer->params + out * k;
    layer_rows_forward(z->batch, k, out, input_part, layer->params,
                       layer->pre);
    tp_allreduce(z, layer->pre, z->batch * out);
    for (size_t s = 0; s < z->batch; s++)
        for (size_t j = 0; j < out; j++)
            layer->pre[s * out + j] += bias[j];
    if (layer->activated)
        activation_forward(ACTIVATION_RELU, layer->pre, layer->post,
                           z->batch * out);
    /* TODO 2 end */
}

void tp_row_backward(tp_state *z, int l, const float *input_part,
                     float *dpost, float *dinput_part)
{
    /* TODO 2 start */
    tp_layer *layer = &z->layers[l];
    const size_t out = (size_t)layer->out, k = (size_t)layer->part.count;
    if (layer->activated)
        activation_backward(ACTIVATION_RELU, layer->pre, dpost,
                            z->batch * out);
    layer_rows_backward(z->batch, k, out, input_part, layer->params, dpost,
                        layer->grads, dinput_part);
    layer_bias_backward(z->batch, out, dpost, layer->grads + out * k);
    /* TODO 2 end */
}

/* ---- TODO 1-3: what a rank holds ------------------------------------- */

int tp_allocate_layer(tp_state *z, int l)
{
    tp_layer *layer = &z->layers[l];
    const size_t in = (size_t)layer->in, out = (size_t)layer->out;
    const size_t count = (size_t)layer->part.count;
    switch (layer->split) {
    case TP_COLUMN:
        /* TODO 1 start */
        layer->held = count * in + count;
        /* TODO 1 end */
        break;
    case TP_ROW:
        /* TODO 2 start */
        layer->held = out * count + out;
        /* TODO 2 end */
        break;
    case TP_WHOLE:
        /* TODO 3 start */
        layer->held = out * in + out;
        /* TODO 3 end */
        break;
    }
    const size_t bytes = layer->held * sizeof(float);
    if ((layer->params = ledger_alloc(MEMORY_PARAMETERS, bytes)) == NULL ||
        (layer->grads = ledger_alloc(MEMORY_GRADIENTS, bytes)) == NULL ||
        (layer->m = ledger_alloc(MEMORY_OPTIMIZER, bytes)) == NULL ||
        (layer->v = ledger_alloc(MEMORY_OPTIMIZER, bytes)) == NULL)
        return -1;
    return 0;
}

/* ---- TODO 3: the tensor-parallel MLP --------------------------------- */

void tp_forward(tp_state *z, const float *inputs)
{
    /* TODO 3 start */
    const float *input = inputs;
    for (int l = 0; l < z->layer_count; l++) {
        tp_layer *layer = &z->layers[l];
        if (layer->split == TP_COLUMN)
            tp_column_forward(z, l, input);
        else if (layer->split == TP_ROW)
            tp_row_forward(z, l, input);
        else /* the last layer, whole: the logits, no activation */
            layer_columns_forward(z->batch, (size_t)layer->in,
                                  (size_t)layer->out, input, layer->params,
                                  layer->params + (size_t)layer->out *
                                                      (size_t)layer->in,
                                  layer->pre);
        input = layer->post;
    }
    /* TODO 3 end */
}

void tp_backward(tp_state *z, const float *inputs)
{
    /* TODO 3 start */
    int at = 0;   /* z->gradient[at]: the gradient at layer l's outputs */
    for (int l = z->layer_count - 1; l >= 0; l--) {
        tp_layer *layer = &z->layers[l];
        const float *input = l == 0 ? inputs : z->layers[l - 1].post;
        float *dpost = z->gradient[at];
        float *dinput = l == 0 ? NULL : z->gradient[1 - at];
        if (layer->split == TP_COLUMN)
            tp_column_backward(z, l, input, dpost, dinput);
        else if (layer->split == TP_ROW)
            tp_row_backward(z, l, input, dpost, dinput);
        else
            layer_columns_backward(z->batch, (size_t)layer->in,
                                   (size_t)layer->out, input, layer->params,
                                   dpost, layer->grads,
                                   layer->grads + (size_t)layer->out *
                                                      (size_t)layer->in,
                                   dinput);
        at = 1 - at;
    }
    /* TODO 3 end */
}

/* ---- TODO 4: training ------------------------------------------------ */

void tp_update(tp_state *z, long step)
{
    /* TODO 4 start */
    for (int l = 0; l < z->layer_count; l++) {
        tp_layer *layer = &z->layers[l];
        adamw_step(&z->adamw, step + 1, layer->params, layer->grads,
                   layer->m, layer->v, layer->held);
    }
    /* TODO 4 end */
}

/* ---- TODO 5: sequence parallelism ------------------------------------ */

void tp_gather_input(tp_state *z, int l, const float *input_rows)
{
    /* TODO 5 start */
    tp_layer *layer = &z->layers[l];
    const size_t in = (size_t)layer->in;
    memcpy(layer->gathered + z->rows_first * in, input_rows,
           z->rows * in * sizeof *layer->gathered);
    tp_allgather(z, layer->gathered, z->batch * in);
    /* TODO 5 end */
}

void tp_row_forward_sp(tp_state *z, int l, const float *input_part)
{
    /* TODO 5 start */
    tp_layer *layer = &z->layers[l];
    const size_t out = (size_t)layer->out, k = (size_t)layer->part.count;
    const float *bias = layer->params + out * k;
    float *partial = z->gradient[0];
    layer_rows_forward(z->batch, k, out, input_part, layer->params, partial);
    tp_reduce_scatter(z, partial, z->batch * out);
    const float *mine = partial + z->rows_first * out;
    for (size_t s = 0; s < z->rows; s++)
        for (size_t j = 0; j < out; j++)
            layer->pre[s * out + j] = mine[s * out + j] + bias[j];
    activation_forward(ACTIVATION_RELU, layer->pre, layer->post,
                       z->rows * out);
    /* TODO 5 end */
}

void tp_row_backward_sp(tp_state *z, int l, const float *input_part,
                        float *dpost, float *dinput_part)
{
    /* TODO 5 start */
    tp_layer *layer = &z->layers[l];
    const size_t out = (size_t)layer->out, k = (size_t)layer->part.count;
    activation_backward(ACTIVATION_RELU, layer->pre,
                        dpost + z->rows_first * out, z->rows * out);
    tp_allgather(z, dpost, z->batch * out);
    layer_rows_backward(z->batch, k, out, input_part, layer->params, dpost,
                        layer->grads, dinput_part);
    layer_bias_backward(z->batch, out, dpost, layer->grads + out * k);
    /* TODO 5 end */
}

void tp_column_backward_sp(tp_state *z, int l, const float *input,
                           float *dpost, float *dinput)
{
    /* TODO 5 start */
    tp_layer *layer = &z->layers[l];
    const size_t in = (size_t)layer->in, n = (size_t)layer->part.count;
    if (layer->activated)
        activation_backward(ACTIVATION_RELU, layer->pre, dpost,
                            z->batch * n);
    layer_columns_backward(z->batch, in, n, input, layer->params, dpost,
                           layer->grads, layer->grads + n * in, dinput);
    if (dinput != NULL)
        tp_reduce_scatter(z, dinput, z->batch * in);
    /* TODO 5 end */
}

void tp_forward_sp(tp_state *z, const float *inputs)
{
    /* TODO 5 start */
    const float *input = inputs;
    for (int l = 0; l < z->layer_count; l++) {
        tp_layer *layer = &z->layers[l];
        const bool last = l == z->layer_count - 1;
        if (layer->gathered != NULL) {
            tp_gather_input(z, l, input);
            input = layer->gathered;
        }
        if (layer->split == TP_COLUMN)
            tp_column_forward(z, l, input);
        else if (layer->split == TP_ROW && !last)
            tp_row_forward_sp(z, l, input);
        else if (layer->split == TP_ROW)
            tp_row_forward(z, l, input);
        else
            layer_columns_forward(z->batch, (size_t)layer->in,
                                  (size_t)layer->out, input, layer->params,
                                  layer->params + (size_t)layer->out *
                                                      (size_t)layer->in,
                                  layer->pre);
        input = layer->post;
    }
    /* TODO 5 end */
}

void tp_backward_sp(tp_state *z, const float *inputs)
{
    /* TODO 5 start */
    int at = 0;
    for (int l = z->layer_count - 1; l >= 0; l--) {
        tp_layer *layer = &z->layers[l];
        const bool last = l == z->layer_count - 1;
        const float *input = layer->gathered != NULL ? layer->gathered
                             : l == 0                ? inputs
                                                     : z->layers[l - 1].post;
        float *dpost = z->gradient[at];
        float *dinput = l == 0 ? NULL : z->gradient[1 - at];
        if (layer->split == TP_COLUMN)
            tp_column_backward_sp(z, l, input, dpost, dinput);
        else if (layer->split == TP_ROW && !last)
            tp_row_backward_sp(z, l, input, dpost, dinput);
        else if (layer->split == TP_ROW)
            tp_row_backward(z, l, input, dpost, dinput);
        else
            layer_columns_backward(z->batch, (size_t)layer->in,
                                   (size_t)layer->out, input, layer->params,
                                   dpost, layer->grads,
                                   layer->grads + (size_t)layer->out *
                                                      (size_t)layer->in,
                                   dinput);
        at = 1 - at;
    }
    /* TODO 5 end */
}

/* ---- TODO 6: the parallel cross-entropy ------------------------------- */

float tp_parallel_loss(tp_state *z, const int *labels, size_t samples,
                       bool backward, int *correct)
{
    /* TODO 6 start */
    const tp_layer *last = &z->layers[z->layer_count - 1];
    const size_t n = (size_t)last->part.count;
    const int first = last->part.first;
    float *largest = z->gradient[1], *sums = largest + samples;
    float *label_logits = sums + samples;
    for (size_t b = 0; b < samples; b++) {
        const float *logits = last->pre + b * n;
        largest[b] = -INFINITY;
        for (size_t c = 0; c < n; c++)
            if (logits[c] > largest[b])
                largest[b] = logits[c];
    }
    tp_allreduce_max(z, largest, samples);
    for (size_t b = 0; b < samples; b++) {
        const float *logits = last->pre + b * n;
        const int label = labels[b] - first;
        sums[b] = 0.0f;
        for (size_t c = 0; c < n; c++)
            sums[b] += expf(logits[c] - largest[b]);
        label_logits[b] = label >= 0 && label < (int)n ? logits[label]
                                                       : 0.0f;
    }
    tp_allreduce(z, sums, 2 * samples);   /* the sums and label_logits */
    double total = 0;
    int right = 0;
    for (size_t b = 0; b < samples; b++) {
        total += log((double)sums[b]) + largest[b] - label_logits[b];
        right += label_logits[b] == largest[b];
    }
    if (correct != NULL)
        *correct = right;
    if (backward)
        for (size_t b = 0; b < samples; b++)
            for (size_t c = 0; c < n; c++) {
                const float p = expf(last->pre[b * n + c] - largest[b]) /
                                sums[b];
                const float onehot = (int)c + first == labels[b] ? 1.0f
                                                                 : 0.0f;
                z->gradient[0][b * n + c] = (p - onehot) / (float)samples;
            }
    return (float)(total / (double)samples);
    /* TODO 6 end */
}
