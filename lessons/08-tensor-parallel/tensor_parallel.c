/* Lesson 08, tensor parallelism as Megatron-LM does it: the file you
 * write (README.md: the core path, then the derivations).
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
    /* TODO 1 start: rank `rank`'s block of the balanced partition of the
     * `out` rows (common/partition.h has it), as {first, count}. */
    NOT_DONE();
    /* TODO 1 end */
}

void tp_column_forward(tp_state *z, int l, const float *input)
{
    /* TODO 1 start: this rank's rows of W are a layer of part.count
     * outputs of its own: layer_columns_forward (common/layer_split.h)
     * from the whole input, then ReLU (activation_forward) into post when
     * the layer is activated (every column layer is but the output layer
     * split by class, TODO 6). No communication: every rank has the whole
     * input. */
    NOT_DONE();
    /* TODO 1 end */
}

void tp_column_backward(tp_state *z, int l, const float *input,
                        float *dpost, float *dinput)
{
    /* TODO 1 start: when activated, ReLU's backward on dpost, in place
     * (activation_backward), then layer_columns_backward: this rank's dW
     * and db, and its share of the input's gradient. That share is a
     * partial sum: every rank's outputs used the whole input. Sum it over
     * the ranks with tp_allreduce (Megatron's f) when dinput is wanted. */
    NOT_DONE();
    /* TODO 1 end */
}

/* ---- TODO 2: the row-parallel layer ---------------------------------- */

void tp_row_forward(tp_state *z, int l, const float *input_part)
{
    /* TODO 2 start: layer_rows_forward gives this rank's partial sum of
     * every output, into pre; tp_allreduce sums them over the ranks
     * (Megatron's g). Only then the bias, once (it is replicated: added
     * before the sum it would count t times), then ReLU when the layer is
     * activated. */
    NOT_DONE();
    /* TODO 2 end */
}

void tp_row_backward(tp_state *z, int l, const float *input_part,
                     float *dpost, float *dinput_part)
{
    /* TODO 2 start: ReLU's backward when activated, then
     * layer_rows_backward (this rank's columns of dW, and the gradient at
     * its part of the input: whole, no sum) and the bias's gradient
     * (layer_bias_backward). Every rank has the same dpost, so the bias
     * gradient is the same on every rank: no communication. */
    NOT_DONE();
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
        /* TODO 1 start: how many parameters this rank holds of a layer
         * split by rows: its part.count rows of W (in each) and of b. */
        NOT_DONE();
        /* TODO 1 end */
        break;
    case TP_ROW:
        /* TODO 2 start: of a layer split by columns: its part.count
         * columns of every row of W, and the whole bias. */
        NOT_DONE();
        /* TODO 2 end */
        break;
    case TP_WHOLE:
        /* TODO 3 start: of the layer left over, which every rank holds
         * whole. */
        NOT_DONE();
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
    /* TODO 3 start: layer by layer, in order, each by its split
     * (z->layers[l].split): a column layer's input is the whole output
     * before it, a row layer's its rank's columns of it, which is what
     * the column layer before left in post. The layer left over
     * (TP_WHOLE, the last): every rank computes all of it, the logits, no
     * activation (layer_columns_forward with every row). */
    NOT_DONE();
    /* TODO 3 end */
}

void tp_backward(tp_state *z, const float *inputs)
{
    /* TODO 3 start: the last layer first, from z->gradient[0]: each
     * layer's input gradient is the next one down's dpost, so alternate
     * between z->gradient[0] and [1]. Layer 0's input gradient nobody
     * needs (NULL: and so no sum for it either). The whole layer's
     * backward: layer_columns_backward with every row, and its input's
     * gradient is whole on every rank already. */
    NOT_DONE();
    /* TODO 3 end */
}

/* ---- TODO 4: training ------------------------------------------------ */

void tp_update(tp_state *z, long step)
{
    /* TODO 4 start: adamw_step (common/optimizer.h) on each layer's
     * held parameters, with step + 1. Nothing is sent: every gradient a
     * rank holds is already whole (README: why the replicated bias's
     * needs no sum). */
    NOT_DONE();
    /* TODO 4 end */
}

/* ---- TODO 5: sequence parallelism ------------------------------------ */

void tp_gather_input(tp_state *z, int l, const float *input_rows)
{
    /* TODO 5 start: this rank's rows (input_rows, rows x in) at their
     * place in layer->gathered (row rows_first), then tp_allgather over
     * the whole batch's batch x in floats: every rank's rows. */
    NOT_DONE();
    /* TODO 5 end */
}

void tp_row_forward_sp(tp_state *z, int l, const float *input_part)
{
    /* TODO 5 start: as tp_row_forward, but the partial sums (batch x
     * out, in z->gradient[0], free during forward) are reduce-scattered:
     * this rank gets the sums of its rows only, at rows_first. pre and
     * post hold those rows alone (rows x out): the bias, then ReLU. */
    NOT_DONE();
    /* TODO 5 end */
}

void tp_row_backward_sp(tp_state *z, int l, const float *input_part,
                        float *dpost, float *dinput_part)
{
    /* TODO 5 start: ReLU's backward on this rank's rows of dpost (at
     * rows_first; its pre holds those rows), then tp_allgather: the
     * whole batch's gradient, which the row layer's backward needs (its
     * columns of dW sum over every sample). Then as tp_row_backward. */
    NOT_DONE();
    /* TODO 5 end */
}

void tp_column_backward_sp(tp_state *z, int l, const float *input,
                           float *dpost, float *dinput)
{
    /* TODO 5 start: as tp_column_backward, but the input's gradient is
     * reduce-scattered, not allreduced: the layer below keeps only its
     * rows. */
    NOT_DONE();
    /* TODO 5 end */
}

void tp_forward_sp(tp_state *z, const float *inputs)
{
    /* TODO 5 start: as tp_forward, with the functions above: a layer
     * with a gathered buffer (layer->gathered not NULL) gathers its input
     * first and reads it from there; a row layer but the last is
     * tp_row_forward_sp (the last one's logits stay whole for the loss:
     * tp_row_forward). */
    NOT_DONE();
    /* TODO 5 end */
}

void tp_backward_sp(tp_state *z, const float *inputs)
{
    /* TODO 5 start: as tp_backward, with the functions above; a layer's
     * input is its gathered buffer where it has one. */
    NOT_DONE();
    /* TODO 5 end */
}

/* ---- TODO 6: the parallel cross-entropy ------------------------------- */

float tp_parallel_loss(tp_state *z, const int *labels, size_t samples,
                       bool backward, int *correct)
{
    /* TODO 6 start: tensor_parallel.h says what is combined over the
     * ranks, and README.md derives it. A rank may hold no class at all
     * (part.count 0): its largest is -INFINITY and its sums 0, and it
     * still takes part in every collective. Keep the float sums in
     * increasing class order, and the loss's sum over samples in double,
     * (float)(total / samples), as the given loss does: the tests compute
     * the same bits. */
    NOT_DONE();
    /* TODO 6 end */
}
