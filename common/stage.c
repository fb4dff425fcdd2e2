/* A stage of a pipeline: see stage.h. */
#include "stage.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activation.h"
#include "cross_entropy.h"
#include "layer_split.h"
#include "memory_ledger.h"

static int refuse(pipeline_stage *s, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(s->error, sizeof s->error, format, args);
    va_end(args);
    return -1;
}

static size_t layer_parameters(const pipeline_stage *s, int k)
{
    return (size_t)s->layer_out[k] * ((size_t)s->layer_in[k] + 1);
}

size_t stage_saved_floats(const mlp_config *shape, int first, int end,
                          size_t rows)
{
    const int last = shape->hidden_layers;
    size_t floats = rows * (size_t)(first == 0 ? shape->inputs
                                               : shape->width);
    for (int l = first; l < end; l++)
        floats += 2 * rows * (size_t)(l == last ? shape->classes
                                                : shape->width);
    return floats;
}

static float *take(pipeline_stage *s, memory_category category, size_t floats)
{
    float *block = ledger_alloc(category, floats * sizeof *block);
    if (block == NULL)
        refuse(s, "%s", memory_ledger_last_error());
    else
        memset(block, 0, floats * sizeof *block);
    return block;
}

int stage_create(pipeline_stage *s, const mlp_config *shape, int first, int end,
                 size_t micro_batch, int micro_batches)
{
    memset(s, 0, sizeof *s);
    const int layer_count = shape->hidden_layers + 1;
    if (first < 0 || end > layer_count || first >= end)
        return refuse(s, "layers [%d, %d) are not a run of the model's %d",
                      first, end, layer_count);
    if (micro_batch == 0 || micro_batches < 1)
        return refuse(s, "a stage needs micro-batches of at least one "
                      "sample (asked: %d of %zu)", micro_batches,
                      micro_batch);
    s->first = first;
    s->end = end;
    s->last = end == layer_count;
    s->classes = shape->classes;
    s->activation = shape->activation;
    s->micro_batch = micro_batch;
    s->micro_batches = micro_batches;
    size_t widest = 0, model_offset = 0;
    for (int l = 0; l < first; l++)
        model_offset += (size_t)(l == layer_count - 1 ? shape->classes
                                                      : shape->width) *
                        ((size_t)(l == 0 ? shape->inputs : shape->width) + 1);
    s->model_offset = model_offset;
    for (int k = 0; k < end - first; k++) {
        const int l = first + k;
        s->layer_in[k] = l == 0 ? shape->inputs : shape->width;
        s->layer_out[k] = l == layer_count - 1 ? shape->classes
                                               : shape->width;
        s->weights[k] = s->parameter_count;
        s->parameter_count += layer_parameters(s, k);
        if ((size_t)s->layer_in[k] > widest)
            widest = (size_t)s->layer_in[k];
        if ((size_t)s->layer_out[k] > widest)
            widest = (size_t)s->layer_out[k];
    }
    s->in = s->layer_in[0];
    s->out = s->layer_out[end - first - 1];
    s->saved_floats = stage_saved_floats(shape, first, end, micro_batch);
    s->saved = calloc((size_t)micro_batches, sizeof *s->saved);
    s->saved_rows = calloc((size_t)micro_batches, sizeof *s->saved_rows);
    if (s->saved == NULL || s->saved_rows == NULL)
        return refuse(s, "out of memory for %d micro-batches' places",
                      micro_batches);
    if ((s->params = take(s, MEMORY_PARAMETERS, s->parameter_count)) ==
            NULL ||
        (s->grads = take(s, MEMORY_GRADIENTS, s->parameter_count)) == NULL ||
        (s->m = take(s, MEMORY_OPTIMIZER, s->parameter_count)) == NULL ||
        (s->v = take(s, MEMORY_OPTIMIZER, s->parameter_count)) == NULL ||
        (s->gradient[0] = take(s, MEMORY_ACTIVATIONS,
                               micro_batch * widest)) == NULL ||
        (s->gradient[1] = take(s, MEMORY_ACTIVATIONS,
                               micro_batch * widest)) == NULL)
        return -1;
    return 0;
}

void stage_free(pipeline_stage *s)
{
    for (int i = 0; s->saved != NULL && i < s->micro_batches; i++)
        ledger_free(s->saved[i]);
    free(s->saved);
    free(s->saved_rows);
    ledger_free(s->params);
    ledger_free(s->grads);
    ledger_free(s->m);
    ledger_free(s->v);
    ledger_free(s->gradient[0]);
    ledger_free(s->gradient[1]);
    memset(s, 0, sizeof *s);
}

void stage_init(pipeline_stage *s, const mlp_config *shape, uint64_t seed)
{
    /* The whole model's layout, without storage, for mlp_init_range. */
    mlp_layer layers[MLP_MAX_LAYERS];
    mlp whole = { .layer_count = shape->hidden_layers + 1, .layers = layers };
    size_t offset = 0;
    for (int l = 0; l < whole.layer_count; l++) {
        const int in = l == 0 ? shape->inputs : shape->width;
        const int out = l == whole.layer_count - 1 ? shape->classes
                                                    : shape->width;
        layers[l] = (mlp_layer){ in, out, offset,
                                 offset + (size_t)out * (size_t)in };
        offset += (size_t)out * ((size_t)in + 1);
    }
    mlp_init_range(&whole, seed, s->model_offset, s->parameter_count,
                   s->params);
}

/* Micro-batch `micro`'s saved input, and local layer k's pre and post. */
static float *saved_input(const pipeline_stage *s, int micro)
{
    return s->saved[micro];
}

static void saved_outputs(const pipeline_stage *s, int micro, int k, float **pre,
                          float **post)
{
    const size_t rows = s->saved_rows[micro];
    float *at = s->saved[micro] + rows * (size_t)s->in;
    for (int j = 0; j < k; j++)
        at += 2 * rows * (size_t)s->layer_out[j];
    *pre = at;
    *post = at + rows * (size_t)s->layer_out[k];
}

static bool is_micro(pipeline_stage *s, int micro, const char *function)
{
    if (micro >= 0 && micro < s->micro_batches)
        return true;
    refuse(s, "%s: micro-batch %d of a step's %d (0 to %d)", function,
           micro, s->micro_batches, s->micro_batches - 1);
    return false;
}

const float *stage_forward(pipeline_stage *s, int micro, const float *input,
                           size_t rows)
{
    if (!is_micro(s, micro, "stage_forward"))
        return NULL;
    if (s->saved[micro] != NULL) {
        refuse(s, "stage_forward: micro-batch %d is already in flight on "
               "layers [%d, %d): its backward has not run", micro, s->first,
               s->end);
        return NULL;
    }
    if (rows == 0 || rows > s->micro_batch) {
        refuse(s, "stage_forward: %zu samples; a micro-batch has 1 to %zu",
               rows, s->micro_batch);
        return NULL;
    }
    const size_t floats = s->saved_floats / s->micro_batch * rows;
    s->saved[micro] = ledger_alloc(MEMORY_ACTIVATIONS,
                                   floats * sizeof *s->saved[micro]);
    if (s->saved[micro] == NULL) {
        refuse(s, "stage_forward: micro-batch %d's activations: %s", micro,
               memory_ledger_last_error());
        return NULL;
    }
    s->saved_rows[micro] = rows;
    s->in_flight++;
    memcpy(saved_input(s, micro), input, rows * (size_t)s->in *
                                             sizeof *input);
    const float *below = saved_input(s, micro);
    float *pre = NULL, *post = NULL;
    for (int k = 0; k < s->end - s->first; k++) {
        const size_t in = (size_t)s->layer_in[k];
        const size_t out = (size_t)s->layer_out[k];
        const float *w = s->params + s->weights[k];
        saved_outputs(s, micro, k, &pre, &post);
        layer_columns_forward(rows, in, out, below, w, w + out * in, pre);
        if (!(s->last && k == s->end - s->first - 1))
            activation_forward(s->activation, pre, post, rows * out);
        below = post;
    }
    /* The logits are the last layer's pre-activation output. */
    return s->last ? pre : post;
}

double stage_loss(pipeline_stage *s, int micro, const int *labels, size_t batch,
                  int *correct)
{
    if (!s->last) {
        refuse(s, "stage_loss: layers [%d, %d) do not end the model: the "
               "loss is the last stage's", s->first, s->end);
        return NAN;
    }
    if (!is_micro(s, micro, "stage_loss"))
        return NAN;
    if (s->saved[micro] == NULL) {
        refuse(s, "stage_loss: micro-batch %d has not run forward", micro);
        return NAN;
    }
    const size_t rows = s->saved_rows[micro];
    for (size_t b = 0; b < rows; b++)
        if (labels[b] < 0 || labels[b] >= s->classes) {
            refuse(s, "stage_loss: sample %zu's label is %d; labels are 0 "
                   "to %d", b, labels[b], s->classes - 1);
            return NAN;
        }
    float *logits, *probabilities;
    saved_outputs(s, micro, s->end - s->first - 1, &logits, &probabilities);
    double sum = cross_entropy_sum(logits, probabilities, labels, rows,
                                   s->classes, correct);
    cross_entropy_gradient_of_rows(probabilities, labels, rows, s->classes,
                                   batch, s->gradient[0]);
    return sum;
}

int stage_backward(pipeline_stage *s, int micro, const float *doutput, float *dinput)
{
    if (!is_micro(s, micro, "stage_backward"))
        return -1;
    if (s->saved[micro] == NULL)
        return refuse(s, "stage_backward: micro-batch %d is not in flight "
                      "on layers [%d, %d): its forward has not run, or its "
                      "backward ran already", micro, s->first, s->end);
    const size_t rows = s->saved_rows[micro];
    const int top = s->end - s->first - 1;
    float *dpre = s->gradient[0];
    if (doutput != dpre)
        memcpy(dpre, doutput, rows * (size_t)s->out * sizeof *dpre);
    for (int k = top; k >= 0; k--) {
        const size_t in = (size_t)s->layer_in[k];
        const size_t out = (size_t)s->layer_out[k];
        float *pre, *post;
        saved_outputs(s, micro, k, &pre, &post);
        /* The gradient arrived at post: back through the activation to
         * pre (the model's last layer has none). */
        if (!(s->last && k == top))
            activation_backward(s->activation, pre, dpre, rows * out);
        /* The layer's input: the post of the layer below, or the stage's
         * saved input. */
        float *pre_below, *post_below = saved_input(s, micro);
        if (k > 0)
            saved_outputs(s, micro, k - 1, &pre_below, &post_below);
        float *dbelow = k > 0 ? s->gradient[dpre == s->gradient[0]]
                              : dinput;
        float *dw = s->grads + s->weights[k];
        layer_columns_backward_accumulate(rows, in, out, post_below,
                                          s->params + s->weights[k], dpre,
                                          dw, dw + out * in, dbelow);
        dpre = dbelow;
    }
    ledger_free(s->saved[micro]);
    s->saved[micro] = NULL;
    s->in_flight--;
    return 0;
}

void stage_forget(pipeline_stage *s, int micro)
{
    if (micro < 0 || micro >= s->micro_batches || s->saved[micro] == NULL)
        return;
    ledger_free(s->saved[micro]);
    s->saved[micro] = NULL;
    s->in_flight--;
}

void stage_zero_gradients(pipeline_stage *s)
{
    memset(s->grads, 0, s->parameter_count * sizeof *s->grads);
}

void stage_update(pipeline_stage *s, const adamw_config *adamw, long step)
{
    adamw_step(adamw, step + 1, s->params, s->grads, s->m, s->v,
               s->parameter_count);
}
