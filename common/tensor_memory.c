/* Activation memory under tensor and sequence parallelism: see
 * tensor_memory.h. */
#include "tensor_memory.h"

#include <stdbool.h>
#include <stdio.h>

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
