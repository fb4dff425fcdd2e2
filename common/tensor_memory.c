/* Activation memory under tensor and sequence parallelism: see
 * tensor_memory.h. */
#include "tensor_memory.h"

#include <stdbool.h>
#include <stdio.h>

#include "partition.h"

/* a * b into *product; false when it would pass 64 bits. */
static bool times(uint64_t a, uint64_t b, uint64_t *product)
{
    return !__builtin_mul_overflow(a, b, product);
}

int transformer_activation_bytes(const transformer_shape *shape,
                                 tensor_parallelism parallelism,
                                 uint64_t ranks, zero_bytes *bytes,
                                 char *error, size_t error_len)
{
    if (shape->sequence == 0 || shape->micro_batch == 0 ||
        shape->hidden == 0 || shape->heads == 0) {
        snprintf(error, error_len, "a transformer layer needs a sequence, a "
                 "micro-batch, a hidden size and heads of at least 1");
        return -1;
    }
    if (ranks == 0) {
        snprintf(error, error_len, "tensor parallelism needs at least 1 "
                 "rank");
        return -1;
    }
    /* sbh, and 5as^2b: sbh times the attention's 5as/h. */
    uint64_t sbh, attention, ten, twenty_four, thirty_four, split, whole;
    bool fits = times(shape->sequence, shape->micro_batch, &sbh) &&
                times(sbh, shape->hidden, &sbh) &&
                times(5, shape->heads, &attention) &&
                times(attention, shape->sequence, &attention) &&
                times(attention, shape->sequence, &attention) &&
                times(attention, shape->micro_batch, &attention) &&
                times(10, sbh, &ten) && times(24, sbh, &twenty_four) &&
                times(34, sbh, &thirty_four) &&
                !__builtin_add_overflow(twenty_four, attention, &split) &&
                !__builtin_add_overflow(thirty_four, attention, &whole);
    if (!fits) {
        snprintf(error, error_len, "the layer's activations would pass 2^64 "
                 "bytes");
        return -1;
    }
    switch (parallelism) {
    case TENSOR_NONE:
        *bytes = (zero_bytes){ whole, 0, 1 };
        break;
    case TENSOR_PARALLEL:
        *bytes = (zero_bytes){ ten, split, ranks };
        break;
    case TENSOR_SEQUENCE_PARALLEL:
        *bytes = (zero_bytes){ 0, whole, ranks };
        break;
    default:
        snprintf(error, error_len, "unknown parallelism %d", (int)parallelism);
        return -1;
    }
    return 0;
}

/* a + b into *sum; false past 64 bits. */
static bool plus(uint64_t a, uint64_t b, uint64_t *sum)
{
    return !__builtin_add_overflow(a, b, sum);
}

int tensor_mlp_rank_bytes(const tensor_mlp_shape *shape, uint64_t ranks,
                          uint64_t rank, bool sequence_parallel,
                          bool parallel_loss, tensor_mlp_bytes *bytes,
                          char *error, size_t error_len)
{
    if (shape->features == 0 || shape->classes < 2 || shape->batch == 0 ||
        (shape->hidden > 0 && shape->width == 0)) {
        snprintf(error, error_len, "the model needs features, a batch and a "
                 "width of at least 1, and at least 2 classes");
        return -1;
    }
    if (ranks == 0 || rank >= ranks) {
        snprintf(error, error_len, "rank %llu of %llu: no such rank",
                 (unsigned long long)rank, (unsigned long long)ranks);
        return -1;
    }
    if (sequence_parallel && shape->batch % ranks != 0) {
        snprintf(error, error_len, "sequence parallelism splits the batch's "
                 "%llu rows among %llu ranks: not a multiple",
                 (unsigned long long)shape->batch,
                 (unsigned long long)ranks);
        return -1;
    }
    if (parallel_loss && shape->hidden % 2 != 0) {
        snprintf(error, error_len, "the parallel loss splits the output "
                 "layer, which must be left over after the pairs: an even "
                 "number of hidden layers");
        return -1;
    }
    const uint64_t layers = shape->hidden + 1, batch = shape->batch;
    uint64_t held = 0, floats = 0, widest = shape->features, rows = 0;
    bool fits = true;
    for (uint64_t l = 0; l < layers && fits; l++) {
        const bool last = l + 1 == layers;
        const uint64_t in = l == 0 ? shape->features : shape->width;
        const uint64_t out = last ? shape->classes : shape->width;
        const bool row = l % 2 == 1;
        const bool column = !row && (!last || parallel_loss);
        /* A column layer's rows are its part; a row layer's columns are
         * the rows of the column layer before it. */
        if (column)
            rows = block_size(out, ranks, rank);
        uint64_t params, outputs, samples = batch, term;
        if (column) {
            fits = times(rows, in + 1, &params);
            outputs = rows;
        } else if (row) {
            fits = times(out, rows + 1, &params);
            outputs = out;
            if (sequence_parallel && !last)
                samples = batch / ranks;
        } else {
            fits = times(out, in + 1, &params);
            outputs = out;
        }
        fits = fits && plus(held, params, &held) &&
               times(2 * samples, outputs, &term) &&
               plus(floats, term, &floats);
        if (fits && sequence_parallel && l > 0 && !row)
            fits = times(batch, in, &term) && plus(floats, term, &floats);
        if (out > widest)
            widest = out;
    }
    uint64_t buffers, inputs;
    fits = fits && times(2 * batch, widest, &buffers) &&
           plus(floats, buffers, &floats) &&
           times(batch, shape->features, &inputs) &&
           plus(floats, inputs, &floats) && held <= UINT64_MAX / 8 &&
           floats <= UINT64_MAX / 4;
    if (!fits) {
        snprintf(error, error_len, "the model's bytes would pass 2^64");
        return -1;
    }
    *bytes = (tensor_mlp_bytes){ 4 * held, 4 * held, 8 * held, 4 * floats };
    return 0;
}
