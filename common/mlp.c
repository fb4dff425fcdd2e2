/* A multilayer perceptron: forward, softmax cross-entropy, backward.
 *
 * Plain on purpose: each layer is one product from common/matmul.h plus a
 * loop for the bias and one for the activation, and the backward pass sits
 * in the same order as the forward, read from the end. No fusion, no
 * tricks: lessons 05-07 change how the gradients and the parameters move
 * between processes, never this arithmetic.
 *
 * The activations buffer holds, for each layer l in order, its
 * pre-activation outputs (max_batch, out_l) and then its post-activation
 * outputs (max_batch, out_l); for the last layer those are the logits and
 * the softmax probabilities. The scratch buffer holds two (max_batch,
 * widest layer) arrays: the gradient at a layer's output and at its input,
 * swapped as the backward pass walks down. */
#include "mlp.h"

#include "matmul.h"
#include "memory_ledger.h"
#include "rng.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sqrt(2/pi), in the tanh approximation of GELU (Hendrycks and Gimpel,
 * "Gaussian error linear units", 2016). */
static const float gelu_scale = 0.7978845608028654f;
static const float gelu_cubic = 0.044715f;

/* *total += add, or false when that overflows size_t. */
static int add_checked(size_t *total, size_t add)
{
    if (add > SIZE_MAX - *total)
        return 0;
    *total += add;
    return 1;
}

/* *product = a * b, or false when that overflows size_t. */
static int multiply_checked(size_t a, size_t b, size_t *product)
{
    if (b != 0 && a > SIZE_MAX / b)
        return 0;
    *product = a * b;
    return 1;
}

static int fail(char *error, size_t error_len, const char *reason)
{
    if (error != NULL && error_len > 0)
        snprintf(error, error_len, "mlp: %s", reason);
    return -1;
}

static const char *config_problem(const mlp_config *config, size_t max_batch)
{
    if (config->inputs < 1)
        return "inputs must be at least 1";
    if (config->classes < 2)
        return "classes must be at least 2 (softmax over one class learns "
               "nothing)";
    if (config->hidden_layers < 0)
        return "hidden_layers must be 0 or more";
    if (config->hidden_layers == INT_MAX)
        return "hidden_layers is too large";
    if (config->hidden_layers > 0 && config->width < 1)
        return "width must be at least 1 when there are hidden layers";
    if (config->activation != ACTIVATION_RELU &&
        config->activation != ACTIVATION_GELU)
        return "activation must be ACTIVATION_RELU or ACTIVATION_GELU";
    if (max_batch < 1)
        return "max_batch must be at least 1";
    return NULL;
}

int mlp_create(mlp *model, const mlp_config *config, size_t max_batch,
               char *error, size_t error_len)
{
    memset(model, 0, sizeof *model);
    const char *problem = config_problem(config, max_batch);
    if (problem != NULL)
        return fail(error, error_len, problem);

    model->config = *config;
    model->max_batch = max_batch;
    model->layer_count = config->hidden_layers + 1;
    model->layers = calloc((size_t)model->layer_count, sizeof *model->layers);
    if (model->layers == NULL)
        return fail(error, error_len, "no memory for the list of layers");

    /* Offsets first, every sum and product checked, then the allocations. */
    size_t parameters = 0, activations = 0, widest = 0;
    int too_large = 0;
    for (int l = 0; l < model->layer_count; l++) {
        mlp_layer *layer = &model->layers[l];
        layer->in = l == 0 ? config->inputs : config->width;
        layer->out = l == model->layer_count - 1 ? config->classes
                                                 : config->width;
        size_t weights = 0, outputs = 0;
        layer->weights = parameters;
        too_large |= !multiply_checked((size_t)layer->out, (size_t)layer->in,
                                       &weights);
        too_large |= !add_checked(&parameters, weights);
        layer->biases = parameters;
        too_large |= !add_checked(&parameters, (size_t)layer->out);
        too_large |= !multiply_checked(max_batch, (size_t)layer->out,
                                       &outputs);
        too_large |= !add_checked(&activations, outputs); /* pre */
        too_large |= !add_checked(&activations, outputs); /* post */
        if ((size_t)layer->out > widest)
            widest = (size_t)layer->out;
    }
    size_t scratch = 0, parameter_bytes = 0, activation_bytes = 0,
           scratch_bytes = 0;
    too_large |= !multiply_checked(max_batch, widest, &scratch);
    too_large |= !multiply_checked(scratch, 2, &scratch);
    too_large |= !multiply_checked(parameters, sizeof(float),
                                   &parameter_bytes);
    too_large |= !multiply_checked(activations, sizeof(float),
                                   &activation_bytes);
    too_large |= !multiply_checked(scratch, sizeof(float), &scratch_bytes);
    if (too_large) {
        mlp_free(model);
        return fail(error, error_len, "the model's size overflows size_t: "
                    "fewer or narrower layers, or a smaller max_batch");
    }

    model->parameter_count = parameters;
    model->params = ledger_alloc(MEMORY_PARAMETERS, parameter_bytes);
    model->grads = ledger_alloc(MEMORY_GRADIENTS, parameter_bytes);
    model->activations = ledger_alloc(MEMORY_ACTIVATIONS, activation_bytes);
    model->scratch = ledger_alloc(MEMORY_ACTIVATIONS, scratch_bytes);
    if (model->params == NULL || model->grads == NULL ||
        model->activations == NULL || model->scratch == NULL) {
        char reason[160];
        snprintf(reason, sizeof reason, "no memory for %zu parameters and "
                 "their activations for batches of %zu", parameters,
                 max_batch);
        mlp_free(model);
        return fail(error, error_len, reason);
    }
    /* Defined values before mlp_init, so a forgotten init shows as zeros,
     * not as whatever the allocator left. */
    memset(model->params, 0, parameter_bytes);
    memset(model->grads, 0, parameter_bytes);
    return 0;
}

void mlp_free(mlp *model)
{
    ledger_free(model->params);
    ledger_free(model->grads);
    ledger_free(model->activations);
    ledger_free(model->scratch);
    free(model->layers);
    memset(model, 0, sizeof *model);
}

void mlp_init(mlp *model, uint64_t seed)
{
    for (int l = 0; l < model->layer_count; l++) {
        const mlp_layer *layer = &model->layers[l];
        double scale = sqrt(6.0 / layer->in);
        size_t weights = (size_t)layer->out * (size_t)layer->in;
        /* Entry k's value comes from k itself, not from a stream's
         * position: any process, any order, the same model. */
        for (size_t k = layer->weights; k < layer->weights + weights; k++)
            model->params[k] = (float)(scale * rng_at_signed(seed, k, 0));
        memset(&model->params[layer->biases], 0,
               (size_t)layer->out * sizeof(float));
    }
}

/* Layer l's pre- and post-activation outputs, each (max_batch, out_l). */
static void layer_outputs(const mlp *model, int l, float **pre, float **post)
{
    size_t offset = 0;
    for (int i = 0; i < l; i++)
        offset += 2 * model->max_batch * (size_t)model->layers[i].out;
    *pre = &model->activations[offset];
    *post = *pre + model->max_batch * (size_t)model->layers[l].out;
}

static float gelu(float x)
{
    float u = gelu_scale * (x + gelu_cubic * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

/* d/dx of 0.5 x (1 + tanh(u)), u = s (x + c x^3):
 * 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) s (1 + 3 c x^2). */
static float gelu_derivative(float x)
{
    float u = gelu_scale * (x + gelu_cubic * x * x * x);
    float t = tanhf(u);
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * gelu_scale *
               (1.0f + 3.0f * gelu_cubic * x * x);
}

/* post = activation(pre), count elements. */
static void activate(activation_kind kind, const float *pre, float *post,
                     size_t count)
{
    if (kind == ACTIVATION_RELU) {
        for (size_t i = 0; i < count; i++)
            post[i] = pre[i] > 0.0f ? pre[i] : 0.0f;
    } else {
        for (size_t i = 0; i < count; i++)
            post[i] = gelu(pre[i]);
    }
}

/* In the forward pass this was post = activation(pre), so the gradient at
 * pre is the gradient at post times activation'(pre); in place. ReLU's
 * derivative at exactly 0 is taken as 0. */
static void activate_backward(activation_kind kind, const float *pre,
                              float *gradient, size_t count)
{
    if (kind == ACTIVATION_RELU) {
        for (size_t i = 0; i < count; i++)
            gradient[i] = pre[i] > 0.0f ? gradient[i] : 0.0f;
    } else {
        for (size_t i = 0; i < count; i++)
            gradient[i] *= gelu_derivative(pre[i]);
    }
}

/* Softmax of each row of logits (batch, classes) into probabilities, and
 * the summed cross-entropy. Subtracting the row's largest logit keeps every
 * exp() at most 1: no overflow, whatever the logits. Sums in double: the
 * loss is reported, and a sum of a few floats in double costs nothing. */
static double softmax_cross_entropy(const float *logits, float *probabilities,
                                    const int *labels, size_t batch,
                                    int classes, int *correct)
{
    double total = 0.0;
    int right = 0;
    for (size_t b = 0; b < batch; b++) {
        const float *z = &logits[b * (size_t)classes];
        float *p = &probabilities[b * (size_t)classes];
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (z[c] > z[best])
                best = c;
        double largest = z[best], sum = 0.0;
        for (int c = 0; c < classes; c++)
            sum += exp((double)z[c] - largest);
        for (int c = 0; c < classes; c++)
            p[c] = (float)(exp((double)z[c] - largest) / sum);
        /* -log softmax(z)[label] = log sum exp(z) - z[label] */
        total += log(sum) + largest - (double)z[labels[b]];
        right += best == labels[b];
    }
    if (correct != NULL)
        *correct = right;
    return total;
}

/* mlp_step and mlp_step_hooked: one pass forward, and one back when asked. */
static float step(mlp *model, const float *inputs, const int *labels,
                  size_t batch, int backward, int *correct,
                  mlp_layer_hook *hook, void *context)
{
    const int classes = model->config.classes;
    const activation_kind kind = model->config.activation;
    const int last = model->layer_count - 1;
    if (batch == 0 || batch > model->max_batch)
        return NAN;
    for (size_t b = 0; b < batch; b++)
        if (labels[b] < 0 || labels[b] >= classes)
            return NAN;

    /* Forward: pre = in · W^T + b, post = activation(pre). */
    const float *in = inputs;
    for (int l = 0; l <= last; l++) {
        const mlp_layer *layer = &model->layers[l];
        float *pre, *post;
        layer_outputs(model, l, &pre, &post);
        const float *bias = &model->params[layer->biases];
        for (size_t b = 0; b < batch; b++)
            memcpy(&pre[b * (size_t)layer->out], bias,
                   (size_t)layer->out * sizeof(float));
        matmul_abt(batch, (size_t)layer->out, (size_t)layer->in, in,
                   &model->params[layer->weights], pre, 1);
        if (l < last)
            activate(kind, pre, post, batch * (size_t)layer->out);
        in = post;
    }
    float *logits, *probabilities;
    layer_outputs(model, last, &logits, &probabilities);
    double loss = softmax_cross_entropy(logits, probabilities, labels, batch,
                                        classes, correct) /
                  (double)batch;
    if (!backward)
        return (float)loss;

    /* Backward. The loss is the mean over the batch of -log p[label], so
     * the gradient at the logits is (p - onehot(label)) / batch. */
    size_t widest = 0;
    for (int l = 0; l <= last; l++)
        if ((size_t)model->layers[l].out > widest)
            widest = (size_t)model->layers[l].out;
    float *gradient_out = model->scratch;              /* (batch, out_l) */
    float *gradient_in = model->scratch + model->max_batch * widest;
    for (size_t b = 0; b < batch; b++)
        for (int c = 0; c < classes; c++) {
            size_t i = b * (size_t)classes + (size_t)c;
            float onehot = c == labels[b] ? 1.0f : 0.0f;
            gradient_out[i] = (probabilities[i] - onehot) / (float)batch;
        }

    for (int l = last; l >= 0; l--) {
        const mlp_layer *layer = &model->layers[l];
        const size_t out = (size_t)layer->out, width_in = (size_t)layer->in;
        float *pre = NULL, *post = NULL;
        const float *layer_in = inputs;                /* (batch, in_l) */
        if (l > 0) {
            layer_outputs(model, l - 1, &pre, &post);
            layer_in = post;
        }
        /* pre = in · W^T + b, so dW = dout^T · in, db = column sums of
         * dout, and din = dout · W. */
        matmul_atb(out, width_in, batch, gradient_out, layer_in,
                   &model->grads[layer->weights], 0);
        float *bias_gradient = &model->grads[layer->biases];
        memset(bias_gradient, 0, out * sizeof(float));
        for (size_t b = 0; b < batch; b++)
            for (size_t j = 0; j < out; j++)
                bias_gradient[j] += gradient_out[b * out + j];
        if (hook != NULL)
            hook(l, &model->grads[layer->weights], out * width_in + out,
                 context);
        if (l == 0)
            break; /* nobody needs the gradient at the inputs */
        matmul_ab(batch, width_in, out, gradient_out,
                  &model->params[layer->weights], gradient_in, 0);
        /* layer_in was activation(pre) of layer l - 1. */
        activate_backward(kind, pre, gradient_in, batch * width_in);
        float *swap = gradient_out;
        gradient_out = gradient_in;
        gradient_in = swap;
    }
    return (float)loss;
}

float mlp_step(mlp *model, const float *inputs, const int *labels,
               size_t batch, int backward, int *correct)
{
    return step(model, inputs, labels, batch, backward, correct, NULL, NULL);
}

float mlp_step_hooked(mlp *model, const float *inputs, const int *labels,
                      size_t batch, int *correct, mlp_layer_hook *hook,
                      void *context)
{
    return step(model, inputs, labels, batch, 1, correct, hook, context);
}

double mlp_accuracy(mlp *model, const float *inputs, const int *labels,
                    size_t count)
{
    size_t right = 0;
    for (size_t first = 0; first < count; first += model->max_batch) {
        size_t batch = count - first < model->max_batch ? count - first
                                                        : model->max_batch;
        int correct = 0;
        mlp_step(model, &inputs[first * (size_t)model->config.inputs],
                 &labels[first], batch, 0, &correct);
        right += (size_t)correct;
    }
    return count ? (double)right / (double)count : 0.0;
}
