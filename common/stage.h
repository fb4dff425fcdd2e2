/* A stage of a pipeline: a run of consecutive layers [first, end) of
 * common/mlp.h's model, on one rank, fed one micro-batch at a time from a
 * buffer (the previous stage's activations, or the data) and handed its
 * output gradient in a buffer (the next stage's, or the loss's). Lesson 09
 * drives stages in the order of a pipeline schedule; lesson 10 too.
 *
 * A micro-batch in flight, one whose forward has run and whose backward
 * has not, keeps its saved activations: its input, and each layer's pre-
 * and post-activation outputs. stage_forward takes them from the memory
 * ledger (as activations) and stage_backward gives them back, so the
 * ledger's peak of activations counts the micro-batches a schedule keeps
 * alive at once: m for GPipe, at most p - r for 1F1B on stage r.
 *
 * The parameters are the slice of the whole model's flat buffer (mlp.h)
 * from layer `first`'s W to layer end-1's b, in the same layout, so a
 * stage's params are comparable with the whole model's.
 *
 * Backward adds each micro-batch's gradient onto the stage's grads, the
 * terms of each element one at a time in increasing sample order
 * (layer_split.h's accumulate form): the micro-batches of a batch, in
 * order, each with the loss's gradient divided by the whole batch
 * (cross_entropy_gradient_of_rows), leave bitwise the gradient that one
 * step on the whole batch makes (mlp_step). */
#ifndef ZZ_STAGE_H
#define ZZ_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mlp.h"
#include "optimizer.h"

typedef struct {
    int first, end;          /* the model's layers [first, end) */
    int in, out;             /* floats a sample at the stage's input and
                                output */
    bool last;               /* holds the model's last layer: its output
                                is the logits, and stage_loss applies */
    int classes;
    activation_kind activation;
    int layer_in[MLP_MAX_LAYERS], layer_out[MLP_MAX_LAYERS];
                             /* local layer k is the model's first + k */
    size_t weights[MLP_MAX_LAYERS];  /* local layer k's W at params +
                                        weights[k], its b right after */
    size_t model_offset;     /* params[0]'s place in the model's buffer */
    size_t parameter_count;
    float *params, *grads;   /* in the ledger as parameters, gradients */
    float *m, *v;            /* AdamW's moments, as optimizer state */
    size_t micro_batch;      /* samples a micro-batch, at most */
    int micro_batches;       /* a step's, so micro-batch ids 0 .. - 1 */
    size_t saved_floats;     /* a micro-batch of micro_batch samples in
                                flight keeps these */
    float **saved;           /* (micro_batches): NULL, or the micro-batch's
                                input, then each layer's pre and post */
    size_t *saved_rows;      /* (micro_batches): its samples */
    int in_flight;           /* micro-batches with saved activations now */
    float *gradient[2];      /* backward's two buffers, micro_batch x the
                                widest layer, as activations; the loss's
                                gradient at the logits is gradient[0] */
    char error[256];         /* why the last call was refused */
} pipeline_stage;

/* A stage of layers [first, end) of a model of this shape, for
 * micro-batches of up to micro_batch samples, micro_batches of them a
 * step: parameters, gradients and moments allocated (zero) and
 * backward's buffers. 0, or -1 with the reason in s->error (a range that
 * is empty or outside the model, no micro-batch, the ledger's refusal).
 * After a failure stage_free is harmless. */
int stage_create(pipeline_stage *s, const mlp_config *shape, int first, int end,
                 size_t micro_batch, int micro_batches);
void stage_free(pipeline_stage *s);

/* mlp_init(seed)'s values of the stage's layers (mlp_init_range). */
void stage_init(pipeline_stage *s, const mlp_config *shape, uint64_t seed);

/* Forward of micro-batch `micro` on `rows` samples of `input` (rows x
 * in): its activations saved, until its backward. Returns its output
 * (rows x out: the last layer's post-activation, or the logits on the last
 * stage), which stays valid until its backward; NULL with the reason in
 * s->error when refused (a micro-batch already in flight, too many rows,
 * the ledger's refusal). */
const float *stage_forward(pipeline_stage *s, int micro, const float *input,
                           size_t rows);

/* On the last stage, after micro-batch `micro`'s forward: the cross-
 * entropy summed over its rows (double), against labels (rows), and the
 * gradient of a batch's mean at its logits, divided by `batch` (the whole
 * batch's samples), into gradient[0]. *correct, when not NULL, receives
 * the rows classified right. NAN with s->error when refused. */
double stage_loss(pipeline_stage *s, int micro, const int *labels, size_t batch,
                  int *correct);

/* Backward of micro-batch `micro` from `doutput` (rows x out, the
 * gradient at the stage's output; on the last stage gradient[0] after
 * stage_loss): its gradients added onto grads, the gradient at its input
 * into dinput (rows x in) when dinput is not NULL, and its saved
 * activations given back. 0, or -1 with s->error (no such micro-batch in
 * flight). */
int stage_backward(pipeline_stage *s, int micro, const float *doutput, float *dinput);

/* Micro-batch `micro`'s saved activations given back without a backward
 * (a forward only, as for an accuracy); nothing when none are saved. */
void stage_forget(pipeline_stage *s, int micro);

/* grads = 0: at the start of a step, before its micro-batches. */
void stage_zero_gradients(pipeline_stage *s);

/* AdamW (optimizer.h) on every parameter of the stage, step + 1. */
void stage_update(pipeline_stage *s, const adamw_config *adamw, long step);

/* The floats of activations one micro-batch of `rows` samples keeps in
 * flight on layers [first, end) of a model of this shape: its input and
 * each layer's two outputs. */
size_t stage_saved_floats(const mlp_config *shape, int first, int end,
                          size_t rows);

#endif
