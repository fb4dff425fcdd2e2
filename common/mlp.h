/* A multilayer perceptron for classification, the model of lessons 05-07.
 *
 * Its parameters live in one flat buffer of floats and its gradients in
 * another of the same length, with a view per layer into each: sharding the
 * model between processes (lesson 06) is then slicing one array.
 *
 *   layer l: out = activation(in · W_l^T + b_l),  W_l is (out_l, in_l)
 *   the last layer has no activation; softmax cross-entropy on its outputs.
 *
 * Layout of the flat buffer: for each layer in order, W_l row-major, then
 * b_l. All the floats here are fp32; lesson 06 adds 16-bit copies.
 *
 * Forward and backward run on a mini-batch with the blocked, OpenMP-threaded
 * products of common/matmul.h. Each output element is summed in the same
 * order whatever the thread count, so results do not depend on it. */
#ifndef ZZ_MLP_H
#define ZZ_MLP_H

#include <stddef.h>
#include <stdint.h>

typedef enum { ACTIVATION_RELU, ACTIVATION_GELU } activation_kind;

typedef struct {
    int inputs;          /* features per sample */
    int classes;         /* outputs */
    int hidden_layers;   /* depth: 0 gives logistic regression */
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
    int layer_count;     /* hidden_layers + 1 */
    mlp_layer *layers;   /* (layer_count) */
    size_t parameter_count;
    float *params;       /* (parameter_count), in the memory ledger as parameters */
    float *grads;        /* (parameter_count), as gradients */
    size_t max_batch;
    float *activations;  /* every layer's pre- and post-activation outputs for
                            max_batch samples, as activations */
    float *scratch;      /* backward's working space */
} mlp;

/* Builds a model for batches of up to max_batch samples. Returns 0, or -1
 * with a one-line reason in `error` (a configuration out of range: inputs
 * < 1, classes < 2, hidden_layers < 0, width < 1 with hidden layers,
 * max_batch 0; a size that overflows; no memory). After a failure *model
 * is all zeros, and mlp_free on it is harmless. */
int mlp_create(mlp *model, const mlp_config *config, size_t max_batch,
               char *error, size_t error_len);
void mlp_free(mlp *model);

/* Parameters from a seed: weights uniform in [-s, s] with s = sqrt(6/in)
 * (He et al., 2015, for ReLU), biases zero. Entry k of the flat buffer is a
 * function of (seed, k) only, so every process makes the same model. */
void mlp_init(mlp *model, uint64_t seed);

/* Loss of the batch: the mean over its samples of softmax cross-entropy.
 * inputs is (batch, inputs) row-major, labels is (batch), 0 <= label <
 * classes. With `backward`, also sets grads to the gradient of that mean
 * (overwriting it). *correct, when not NULL, receives how many samples the
 * model classifies right (before any update).
 *
 * A caller's mistake (batch 0, batch > max_batch, a label out of range)
 * returns NAN and leaves grads and *correct untouched. */
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
 * that the model classifies right, in batches of max_batch; 0 for none. */
double mlp_accuracy(mlp *model, const float *inputs, const int *labels,
                    size_t count);

#endif
