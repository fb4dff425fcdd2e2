/* A multilayer perceptron for classification, the model of lessons 05-07.
 *
 *   layer l: out = activation(in · W_l^T + b_l),  W_l is (out_l, in_l)
 *   the last layer has no activation; softmax cross-entropy on its outputs.
 *
 * The parameters live in one flat buffer and the gradients in another of
 * the same length: for each layer in order, W_l row-major, then b_l. So
 * sharding the model between processes (lesson 06) is slicing one array,
 * and layer l's parameters are the mlp_layer_parameter_count(m, l)
 * entries from layers[l].weights on.
 *
 * Two ways to train it:
 *
 *   - mlp_step: the whole step at once, on the model's own fp32 buffers
 *     (params, grads). Lesson 05.
 *
 *   - one layer at a time, each call given that layer's parameters (and, in
 *     backward, where to write its gradient) by the caller, who may hold
 *     them anywhere: sharded, gathered for just this layer, in bf16. So a
 *     lesson writes its own schedule around the layers (lesson 06 gathers a
 *     layer's parameters before its forward and its backward, and sends
 *     its gradient away as soon as backward has made it). One step:
 *
 *       mlp_set_inputs(m, inputs, batch);            the bottom
 *       for (l = 0; l < m->layer_count; l++)         forward, in order
 *           mlp_forward_layer(m, l, params_of_layer_l);
 *       loss = mlp_loss(m, labels, 1, &correct);     the top: the loss, and
 *                                                    the gradient at the
 *                                                    logits, seeding backward
 *       for (l = m->layer_count - 1; l >= 0; l--)    backward, last first
 *           mlp_backward_layer(m, l, params_of_layer_l, grads_of_layer_l);
 *
 *     mlp_step is exactly this, with the model's own buffers: the same
 *     bits. The _bf16 forms take bf16 parameters and write bf16 gradients
 *     (mixed precision, lessons 06-07); the products still sum in fp32.
 *
 * A model made with mlp_create_without_storage has no params or grads of
 * its own (its caller holds them, e.g. in shards); mlp_step and
 * mlp_accuracy then refuse, and only the per-layer steps work.
 *
 * Activations stay fp32 in both precisions: lessons 06-07 are about where
 * parameters, gradients and optimizer state live, and those are what ZeRO
 * counts.
 *
 * Forward and backward run on a mini-batch with the blocked, OpenMP-threaded
 * products of common/matmul.h. Each output element is summed in the same
 * order whatever the thread count, so results do not depend on it. */
#ifndef ZZ_MLP_H
#define ZZ_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "activation.h"
#include "bf16.h"


/* The deepest model mlp_create builds, and so the most layers any model
 * has: an array of one entry per layer (lesson 05's overlap_state) holds
 * MLP_MAX_LAYERS. */
enum { MLP_MAX_HIDDEN_LAYERS = 16, MLP_MAX_LAYERS = MLP_MAX_HIDDEN_LAYERS + 1 };

typedef struct {
    int inputs;          /* features per sample */
    int classes;         /* outputs */
    int hidden_layers;   /* depth: 0 gives logistic regression; at most
                            MLP_MAX_HIDDEN_LAYERS */
    int width;           /* units per hidden layer */
    activation_kind activation;
} mlp_config;

/* One layer's view into the flat buffers. */
typedef struct {
    int in, out;
    size_t weights;      /* offset of W (out, in) in the flat buffers */
    size_t biases;       /* offset of b (out) */
} mlp_layer;

typedef struct {
    mlp_config config;
    int layer_count;     /* hidden_layers + 1, at most MLP_MAX_LAYERS */
    mlp_layer *layers;   /* (layer_count) */
    size_t parameter_count;
    size_t largest_layer; /* the most parameters (W and b) of any one layer */
    float *params;       /* (parameter_count), in the memory ledger as
                            parameters; NULL without storage */
    float *grads;        /* (parameter_count), as gradients; NULL without */
    size_t max_batch;
    float *activations;  /* every layer's pre- and post-activation outputs for
                            max_batch samples, as activations */
    float *scratch;      /* backward's working space, as activations */
    float *layer_params32, *layer_grads32;
                         /* (largest_layer) each, only in a model without
                            storage: the bf16 steps' fp32 copy of the one
                            layer they work on, a transient that each call
                            overwrites; as activations */
    /* The step under way, set by mlp_set_inputs, moved on by each call. */
    const float *inputs; /* (batch, inputs): the caller's, kept until the
                            backward pass of layer 0 is done */
    size_t batch;
    int forward_done;    /* layers 0 .. forward_done-1 have run on inputs */
    int backward_next;   /* the layer whose output gradient is ready, the
                            next to run backward; -1 when none is */
    char error[192];     /* why the last per-layer call was refused */
} mlp;

/* Builds a model for batches of up to max_batch samples, with its own
 * flat buffers of parameters and gradients (zeros until mlp_init). Returns
 * 0, or -1 with a one-line reason in `error` (a configuration out of range:
 * inputs < 1, classes < 2, hidden_layers < 0 or > MLP_MAX_HIDDEN_LAYERS,
 * width < 1 with hidden layers, max_batch 0; a size that overflows; no
 * memory). After a failure *model
 * is all zeros, and mlp_free on it is harmless. */
int mlp_create(mlp *model, const mlp_config *config, size_t max_batch,
               char *error, size_t error_len);

/* The same model without params or grads: its caller holds them (lesson
 * 06's shards) and hands each layer's to the per-layer steps. It holds
 * the activations, backward's scratch and the bf16 steps' fp32 copy of
 * one layer (2 * largest_layer floats), all in the ledger as
 * activations. */
int mlp_create_without_storage(mlp *model, const mlp_config *config,
                               size_t max_batch, char *error,
                               size_t error_len);
void mlp_free(mlp *model);

/* Parameters from a seed: weights uniform in [-s, s] with s = sqrt(6/in)
 * (He et al., 2015, for ReLU), biases zero. Entry k of the flat buffer is a
 * function of (seed, k) only, so every process makes the same model. A
 * model without storage has no params to set: see mlp_init_range. */
void mlp_init(mlp *model, uint64_t seed);

/* Entries first .. first+count-1 of the flat buffer mlp_init makes, into
 * out (count floats): a rank that owns only a slice makes only that. */
void mlp_init_range(const mlp *model, uint64_t seed, size_t first,
                    size_t count, float *out);

/* Loss of the batch: the mean over its samples of softmax cross-entropy.
 * inputs is (batch, inputs) row-major, labels is (batch), 0 <= label <
 * classes. With `backward`, also sets grads to the gradient of that mean
 * (overwriting it). *correct, when not NULL, receives how many samples the
 * model classifies right (before any update).
 *
 * A caller's mistake (batch 0, batch > max_batch, a label out of range, a
 * model without storage) returns NAN, says why in model->error, and leaves
 * grads and *correct untouched. */
float mlp_step(mlp *model, const float *inputs, const int *labels,
               size_t batch, int backward, int *correct);

/* Called by mlp_step_hooked as soon as the backward pass has finished
 * layer `layer`'s gradient: `slice` is that layer's part of grads (W_l
 * then b_l, `count` floats, at layers[layer].weights). The backward pass
 * never reads or writes that slice again, so the hook may hand it to a
 * non-blocking reduction while the layers below are computed (lesson 05's
 * overlap of communication with computation). */
typedef void mlp_layer_hook(int layer, float *slice, size_t count,
                            void *context);

/* mlp_step with backward, calling `hook` (when not NULL) with `context`
 * once for each layer, last layer first, as its gradient is done. Returns
 * the same loss and gradients as mlp_step. */
float mlp_step_hooked(mlp *model, const float *inputs, const int *labels,
                      size_t batch, int *correct, mlp_layer_hook *hook,
                      void *context);

/* The fraction of `count` samples (inputs (count, inputs), labels (count))
 * that the model classifies right, in batches of max_batch; 0 for none,
 * NAN for a model without storage. */
double mlp_accuracy(mlp *model, const float *inputs, const int *labels,
                    size_t count);

/* ---- One layer at a time (the order of calls: at the top of this file) ----
 *
 * Each returns 0, or -1 when called out of order or with arguments out of
 * range, with one line in model->error ("mlp_forward_layer: ..."), having
 * changed nothing. layer_params is layer l's W then b
 * (mlp_layer_parameter_count floats, as in the flat buffer); layer_grads
 * receives its dW then db, overwritten. */

/* W_l and b_l together: out_l * in_l + out_l. */
size_t mlp_layer_parameter_count(const mlp *model, int l);

/* Starts a step on `batch` samples (1 <= batch <= max_batch): inputs is
 * (batch, inputs), read by layer 0's forward and backward, so it must stay
 * unchanged until then. Forgets the previous step's progress. */
int mlp_set_inputs(mlp *model, const float *inputs, size_t batch);

/* Layer l's forward: its outputs for every sample, from layer l-1's (or the
 * inputs), kept for backward. Layers run in order, 0 first; running layer
 * l again means the layers after it must run again too. */
int mlp_forward_layer(mlp *model, int l, const float *layer_params);

/* The same with bf16 parameters: widened to fp32 (exactly) into the
 * model's one-layer copy, then the same fp32 arithmetic. Needs a model
 * from mlp_create_without_storage. */
int mlp_forward_layer_bf16(mlp *model, int l, const bf16 *layer_params);

/* After the last layer's forward: the mean softmax cross-entropy of the
 * batch against labels (batch), and *correct (when not NULL) the samples
 * classified right. With `backward`, also the gradient of that mean at the
 * logits, where backward starts. Returns NAN (with model->error) when
 * called out of order or with a label out of range. */
float mlp_loss(mlp *model, const int *labels, int backward, int *correct);

/* Layer l's backward, last layer first: from the gradient at its outputs,
 * its gradient (into layer_grads) and the gradient at its inputs (kept for
 * layer l-1; layer 0 skips it, and does not read layer_params). */
int mlp_backward_layer(mlp *model, int l, const float *layer_params,
                       float *layer_grads);

/* The same with bf16 parameters and gradients: the parameters widened as
 * in forward, the gradient computed in fp32 in the model's one-layer copy
 * and rounded to bf16 once, to nearest. */
int mlp_backward_layer_bf16(mlp *model, int l, const bf16 *layer_params,
                            bf16 *layer_grads);

#endif
