/* Lesson 08: tensor parallelism, the pieces that you write in
 * tensor_parallel.c, and the given helpers they may call (tp_state.c).
 *
 * The model is lessons 05-07's (common/mlp.h): layers out = act(in · W^T
 * + b), W (out, in), ReLU on the hidden layers, softmax cross-entropy on
 * the last. The t ranks of a tensor-parallel group work on the same batch,
 * and each holds only a part of every large weight matrix. Layers go in
 * pairs, 0 and 1, 2 and 3, ...:
 *
 *   the first of a pair is split by its output rows (TP_COLUMN): rank r
 *   holds rows part.first .. part.first + part.count - 1 of W and of b,
 *   the balanced partition of `out` (TODO 1), and computes those outputs
 *   of every sample from the whole input;
 *
 *   the second is split by its input columns (TP_ROW), the columns that
 *   match the rows the rank computed in the layer before: it holds
 *   W[:, part.first .. part.first + part.count - 1] as an (out, count)
 *   matrix of its own, and the whole bias b (replicated: every rank the
 *   same). Its product gives a partial sum of every output; the sum over
 *   the ranks, then + b, then the activation, is the layer's output.
 *
 * A last layer left over (an odd layer count: the output layer with an
 * even number of hidden layers) is TP_WHOLE: every rank holds all of it
 * and computes it on the whole input; or, with the parallel loss (TODO
 * 6), one more TP_COLUMN layer, split by class, without activation.
 *
 * The data this rank holds for layer l, in tp_layer: its parameters, their
 * gradients and AdamW's two moments (yours: allocated by TODO 1-3's
 * tp_allocate_layer, through the memory ledger), and the activations kept
 * from forward for backward (given: pre and post).
 *
 * The driver (main.c) calls, each step, on every rank of the group with
 * the same batch:
 *
 *     tp_forward(z, inputs)                 TODO 3, on TODO 1-2's layers
 *     the loss, on the logits (given)
 *     tp_backward(z, inputs, dlogits)       TODO 3
 *     the gradients summed over the data-parallel replicas, if any (given)
 *     tp_update(z, step)                    TODO 4
 *
 * Every sum over the ranks goes through tp_allreduce (and, with sequence
 * parallelism, tp_reduce_scatter and tp_allgather): each adds the t ranks'
 * values in rank order, ((v_0 + v_1) + v_2) + ..., whatever order they
 * arrive in, so the tests can compute your results bitwise; and each call
 * is recorded by given code, which is how the tests see the collectives
 * your code issues. */
#ifndef ZZ_LESSON08_TENSOR_PARALLEL_H
#define ZZ_LESSON08_TENSOR_PARALLEL_H

#include <stdbool.h>
#include <stddef.h>

#include <mpi.h>

#include "activation.h"
#include "optimizer.h"

/* Items [first, first + count) of a split dimension; count may be 0. */
typedef struct {
    int first, count;
} tp_part;

typedef enum { TP_COLUMN, TP_ROW, TP_WHOLE } tp_split;

typedef struct {
    /* ---- given, read only ---- */
    tp_split split;
    int in, out;             /* the whole layer's shape: W is (out, in) */
    bool activated;          /* ReLU after the sum (hidden layers); the last
                                layer's outputs are the logits */
    tp_part part;            /* TP_COLUMN: this rank's rows of W and b;
                                TP_ROW: its columns of W (the rows of the
                                column layer before); TP_WHOLE: all rows */
    float *pre, *post;       /* activations (given), kept for backward:
                                TP_COLUMN (batch, part.count) each, this
                                rank's outputs; TP_ROW and TP_WHOLE (batch,
                                out), the whole layer's. pre = in · W^T +
                                b, post = ReLU(pre) (the last layer: post
                                holds the softmax, given code's). With
                                sequence parallelism (TODO 5), a row layer
                                but the last holds this rank's rows only:
                                (rows, out) */
    float *gathered;         /* sequence parallelism (TODO 5): a layer that
                                needs the whole input (a column layer after
                                the first, the whole layer after a row
                                layer) gets it gathered here from every
                                rank's rows, (batch, in), kept for backward;
                                NULL otherwise */

    /* ---- yours: what this rank holds of the layer's parameters ----
     * `held` floats each, through ledger_alloc with the category of what
     * it holds (MEMORY_PARAMETERS, MEMORY_GRADIENTS, MEMORY_OPTIMIZER for
     * m and v): the ledger is how the tests see your memory. Layout: W's
     * part row-major, then b's part (TP_COLUMN: (count, in) then (count);
     * TP_ROW: (out, count) then the whole b (out); TP_WHOLE: (out, in)
     * then (out)). */
    size_t held;
    float *params, *grads, *m, *v;
} tp_layer;

typedef struct {
    /* ---- given, read only ---- */
    const char *program;     /* "train_tp", in the messages that end the
                                job */
    MPI_Comm comm;           /* the tensor-parallel group's own
                                communicator */
    int rank, ranks;         /* in comm: this rank's place, and t */
    int layer_count;
    tp_layer *layers;        /* (layer_count) */
    size_t max_batch;        /* the most samples a step has */
    size_t batch;            /* this step's samples, set by the driver
                                before tp_forward: the activations' rows */
    bool sequence_parallel;  /* --sequence-parallel: tp_forward_sp and
                                tp_backward_sp run (TODO 5) */
    bool parallel_loss;      /* --parallel-loss: the output layer split by
                                class, tp_parallel_loss (TODO 6) */
    size_t rows_first, rows; /* sequence parallelism: this rank's rows of
                                the batch, rows_first .. rows_first + rows
                                - 1 (batch / t of them: the driver makes
                                the batch a multiple of t) */
    float *gradient[2];      /* two buffers of max_batch x widest floats
                                (widest: the most inputs or outputs of any
                                layer), for the gradients between layers in
                                backward: the driver writes the logits'
                                gradient into gradient[0]. Free during
                                forward: TODO 5's partial sums may go
                                there */
    adamw_config adamw;
    char error[256];         /* for the collectives' error lines */
} tp_state;

/* ---- TODO 1: the column-parallel layer ---- */

/* The rows of a layer of `out` outputs that rank `rank` of `ranks` holds,
 * under the balanced partition (common/partition.h): the first out % ranks
 * ranks one more. A layer narrower than t leaves the last ranks none. */
tp_part tp_column_part(int out, int ranks, int rank);

/* Layer l's forward on this rank's rows: pre and post (batch, part.count)
 * from the whole input (batch, in). */
void tp_column_forward(tp_state *z, int l, const float *input);

/* Layer l's backward: from dpost (batch, part.count), the gradient at its
 * outputs (this rank's; multiplied in place into the gradient at pre),
 * its grads, and, when dinput is not NULL, the gradient at its input,
 * (batch, in), summed over the ranks: every rank's outputs depend on the
 * whole input (Megatron's f: identity forward, allreduce backward). */
void tp_column_backward(tp_state *z, int l, const float *input,
                        float *dpost, float *dinput);

/* ---- TODO 2: the row-parallel layer ---- */

/* Layer l's forward from input_part (batch, part.count), this rank's
 * columns of the input: the whole pre and post (batch, out), the same on
 * every rank (Megatron's g: allreduce forward). */
void tp_row_forward(tp_state *z, int l, const float *input_part);

/* Layer l's backward: from dpost (batch, out), whole and the same on every
 * rank (multiplied in place), its grads, and, when dinput_part is not
 * NULL, the gradient at this rank's columns of its input (batch,
 * part.count): whole already, no sum (g's backward is the identity). */
void tp_row_backward(tp_state *z, int l, const float *input_part,
                     float *dpost, float *dinput_part);

/* ---- TODO 1-3: what a rank holds ---- */

/* Sets layer l's `held` and allocates its params, grads, m and v (held
 * floats each) through the memory ledger. Returns 0, or -1 as soon as
 * ledger_alloc refuses (under --memory-cap), having freed nothing: the
 * driver then says why on every rank and ends. The given
 * tp_initialize fills what you allocated. */
int tp_allocate_layer(tp_state *z, int l);

/* ---- TODO 3: the tensor-parallel MLP ---- */

/* Forward through every layer on z->batch samples of inputs (batch,
 * features): each layer by its split, each one's input what the layer
 * before left. */
void tp_forward(tp_state *z, const float *inputs);

/* Backward through every layer, last first, from the logits' gradient in
 * z->gradient[0]: every layer's grads. Layer 0's input gradient is not
 * needed (the inputs are data). */
void tp_backward(tp_state *z, const float *inputs);

/* ---- TODO 4: training ---- */

/* AdamW on what this rank holds (`step` counts from 0; AdamW's bias
 * correction from 1). */
void tp_update(tp_state *z, long step);

/* ---- TODO 5: sequence parallelism ----
 *
 * Outside the pairs, each rank keeps only its rows of the batch: a row
 * layer (but the last, whose logits the loss needs whole) ends in a
 * reduce-scatter of its partial sums instead of an allreduce, each rank
 * getting its rows' sums; a layer that needs the whole input (a column
 * layer after the first, the whole layer after a row layer) begins with
 * an allgather of every rank's rows. Backward, the other way round. A
 * buffer of `count` elements that a reduce-scatter or an allgather works
 * on holds the whole batch; this rank's rows are its part, at rows_first
 * (the rows are the balanced partition of the batch, which the driver
 * makes a multiple of t). */

/* Gathers layer l's whole input into layer->gathered from every rank's
 * rows: this rank's are input_rows (rows, in). */
void tp_gather_input(tp_state *z, int l, const float *input_rows);

/* Row layer l's forward: its partial sums reduce-scattered, so that this
 * rank gets the sums of its rows only; pre and post (rows, out). */
void tp_row_forward_sp(tp_state *z, int l, const float *input_part);

/* Row layer l's backward: dpost (batch, out) holds the gradient at this
 * rank's rows, at rows_first (the rest is gathered from the others). */
void tp_row_backward_sp(tp_state *z, int l, const float *input_part,
                        float *dpost, float *dinput_part);

/* Column layer l's backward: as tp_column_backward, but dinput's sums go
 * only to the rank whose rows they are (a reduce-scatter): this rank's
 * rows of dinput, at rows_first, hold the sums after it. */
void tp_column_backward_sp(tp_state *z, int l, const float *input,
                           float *dpost, float *dinput);

/* The model's forward and backward with sequence parallelism. */
void tp_forward_sp(tp_state *z, const float *inputs);
void tp_backward_sp(tp_state *z, const float *inputs);

/* ---- TODO 6: going further, the parallel cross-entropy ----
 *
 * With --parallel-loss the output layer is a column layer split by
 * class: rank r holds the logits of its classes only, (batch,
 * part.count) in its pre, and no rank ever holds them all. The loss and
 * its gradient come from three numbers a sample, each combined over the
 * ranks: the largest logit (tp_allreduce_max), the sum of exp(logit -
 * largest) over every class, and the label's logit (0 on the ranks
 * without it; tp_allreduce of the two together, 2 x samples floats, in
 * that order). z->gradient[1] is free during the loss: room for the
 * three. */

/* The mean cross-entropy of the first `samples` rows; with `backward`,
 * its gradient at this rank's logits, (p - onehot) / samples, into
 * z->gradient[0] (samples, part.count); *correct, when not NULL, the
 * samples whose label's logit is the largest. Every rank returns the
 * same loss. */
float tp_parallel_loss(tp_state *z, const int *labels, size_t samples,
                       bool backward, int *correct);

/* ---- Given (tp_state.c) ---- */

/* Sums `count` floats of `buffer` over the group's ranks, in place, in
 * rank order (a reduce-scatter and an allgather of common/collectives.h:
 * 2(t-1)/t of the buffer sent by each rank). */
void tp_allreduce(tp_state *z, float *buffer, size_t count);

/* The halves of tp_allreduce, each in place on `count` floats of `buffer`
 * (the whole batch's): tp_reduce_scatter leaves the rank-order sums of
 * this rank's part (its rows) at its place in the buffer, the rest
 * unchanged; tp_allgather fills the buffer from every rank's part at its
 * place. Each sends (t-1)/t of the buffer. */
void tp_reduce_scatter(tp_state *z, float *buffer, size_t count);
void tp_allgather(tp_state *z, float *buffer, size_t count);

/* The largest of the t ranks' values of each of `count` floats, in place
 * (an allgather of every rank's values and the maximum taken here:
 * (t-1) x count floats sent). */
void tp_allreduce_max(tp_state *z, float *buffer, size_t count);

/* Prints "PROGRAM: rank R: WHY" and ends the job (MPI_Abort). */
_Noreturn void tp_abort(tp_state *z, const char *why);

/* For an allocation during a step: returns when `block` is not NULL;
 * otherwise prints the memory ledger's line on the refusal and ends the
 * job. */
void tp_check_alloc(tp_state *z, const void *block);

#endif
