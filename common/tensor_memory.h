/* Activation memory under tensor and sequence parallelism: the formula
 * Korthikanti et al. publish for a transformer layer ("Reducing Activation
 * Recomputation in Large Transformer Models", 2022, arXiv 2205.05198,
 * section 4.2), the anchor lesson 08's calculator for its own model is
 * checked against.
 *
 * Bytes of activations one transformer layer keeps for backward, with s
 * the sequence length, b the micro-batch, h the hidden size, a the heads,
 * t the tensor-parallel ranks, 16-bit activations and dropout masks
 * counted:
 *
 *     no parallelism             sbh (34 + 5as/h)
 *     tensor parallel            sbh (10 + 24/t + 5as/(ht))
 *     tensor + sequence parallel sbh (34/t + 5as/(ht))
 *
 * The 10 sbh that tensor parallelism leaves whole on every rank are the
 * layer norms' and dropouts' inputs outside the parallel regions; sequence
 * parallelism splits them too. Multiplied out, each is whole numbers over
 * t: sbh·5as/h = 5as²b. So a result is a zero_bytes, replicated +
 * sharded / t, exact (zero_memory.h). */
#ifndef ZZ_TENSOR_MEMORY_H
#define ZZ_TENSOR_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zero_memory.h"

typedef enum {
    TENSOR_NONE,                /* t is 1 whatever is given */
    TENSOR_PARALLEL,
    TENSOR_SEQUENCE_PARALLEL
} tensor_parallelism;

typedef struct {
    uint64_t sequence;          /* s */
    uint64_t micro_batch;       /* b */
    uint64_t hidden;            /* h */
    uint64_t heads;             /* a */
} transformer_shape;

/* One layer's activation bytes on each of `ranks` (t) tensor-parallel
 * ranks, by the formula above. Returns 0, or -1 with one line in `error`:
 * a size of 0, no ranks, or bytes past 64 bits. */
int transformer_activation_bytes(const transformer_shape *shape,
                                 tensor_parallelism parallelism,
                                 uint64_t ranks, zero_bytes *bytes,
                                 char *error, size_t error_len);

/* ---- Lesson 08's model: the MLP of common/mlp.h on t ranks ----
 *
 * What rank `rank` of a tensor-parallel group of `ranks` holds as
 * train_tp's memory ledger counts it (lessons/08-tensor-parallel): layers
 * in pairs, the first of a pair split by its output rows, the second by
 * its input columns (the rows of the first), under the balanced
 * partition; a last layer left over whole, or with the parallel loss
 * split by class. fp32 parameters and gradients, 4 bytes each, AdamW's m
 * and v, 8, for every parameter the rank holds: rows (in + 1) of a column
 * layer, out x columns + out of a row layer (its bias whole), out (in + 1)
 * of a whole layer. Activations, 4 bytes each, for `batch` samples: each
 * layer's pre- and post-activation outputs, a column layer's for its rows
 * and the others' whole (with sequence parallelism a row layer's but the
 * last's for batch / t samples, and the whole input gathered for each
 * layer after one), two gradient buffers of the widest layer, and the
 * batch of inputs. */
typedef struct {
    uint64_t features, classes, hidden, width, batch;
} tensor_mlp_shape;

typedef struct {
    uint64_t parameters, gradients, optimizer, activations;
} tensor_mlp_bytes;

/* Returns 0, or -1 with one line in `error`: a size of 0 (classes below
 * 2, a width of 0 with hidden layers), rank not below ranks, sequence
 * parallelism on a batch that is not a multiple of ranks, the parallel
 * loss on an odd number of hidden layers, or bytes past 64 bits. */
int tensor_mlp_rank_bytes(const tensor_mlp_shape *shape, uint64_t ranks,
                          uint64_t rank, bool sequence_parallel,
                          bool parallel_loss, tensor_mlp_bytes *bytes,
                          char *error, size_t error_len);

#endif
