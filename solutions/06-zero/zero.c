/* Lesson 06, ZeRO stages 1, 2 and 3 in mixed precision: reference
 * solution.
 * You write: the part of a range of the flat buffer each rank owns
 * (TODO 1); stage 1, the optimizer's state sharded (TODO 2); stage 2, the
 * gradients too, reduce-scattered layer by layer (TODO 3); stage 3, the
 * parameters too, gathered for each use (TODO 4); going further, the next
 * layer's gather started while this one computes (TODO 5).
 * Given: stage 0, plain data parallelism on the same collectives, as the
 * worked example; the hooks the driver calls (at the end of this file),
 * which pick each stage's functions; zero_state.c's helpers; the model,
 * the collectives, the optimizer and the ledgers (common/). */
#include <stdio.h>
#include <stdlib.h>

#include "collectives.h"
#include "memory_ledger.h"
#include "not_done.h"
#include "optimizer.h"
#include "partition.h"
#include "zero.h"

zero_part zero_owned_part(size_t total, int ranks, int rank, size_t offset,
                          size_t count)
{
    /* TODO 1 start */
    size_t begin, end;
    block_range(total, (size_t)ranks, (size_t)rank, &begin, &end);
    size_t first = begin > offset ? begin : offset;
    size_t last = end < offset + count ? end : offset + count;
    return (zero_part){ first, last > first ? last : first };
    /* TODO 1 end */
}

/* How many elements a part holds. */
static size_t length_of(zero_part part)
{
    return part.end - part.begin;
}

/* The factor that turns the sum of P ranks' gradients into their mean. */
static float mean_of(const zero_state *z)
{
    return 1.0f / (float)z->ranks;
}

/* ---- Stage 0: plain data parallelism, the worked example ---------------
 * Every rank holds everything: 2Ψ + 2Ψ + 12Ψ bytes. The gradients are
 * summed by a reduce-scatter (each rank gets the sums of its own part)
 * and an allgather of those sums (every rank gets all of them): together
 * an allreduce, whose traffic is 2Ψ(P-1)/P elements a rank. Then every
 * rank takes the same step on all Ψ. */

static int stage0_allocate(zero_state *z)
{
    const size_t all = z->total;
    if ((z->params = ledger_alloc(MEMORY_PARAMETERS,
                                  all * sizeof *z->params)) == NULL ||
        (z->grads = ledger_alloc(MEMORY_GRADIENTS,
                                 all * sizeof *z->grads)) == NULL ||
        (z->master = ledger_alloc(MEMORY_OPTIMIZER,
                                  all * sizeof *z->master)) == NULL ||
        (z->m = ledger_alloc(MEMORY_OPTIMIZER, all * sizeof *z->m)) == NULL ||
        (z->v = ledger_alloc(MEMORY_OPTIMIZER, all * sizeof *z->v)) == NULL)
        return -1;
    return 0;
}

/* The sums of this rank's own part land in place, in its own part of the
 * whole gradient buffer (the rest of it is left as it was). */
static void stage0_reduce(zero_state *z)
{
    zero_check(z, collective_reduce_scatter_bf16(
                      z->grads, z->grads + z->own.begin, z->total, 0,
                      z->total, z->comm, z->error, sizeof z->error));
}

static void stage0_update(zero_state *z, long step)
{
    /* Every rank updates every element, so it needs every sum. */
    zero_check(z, collective_allgather(z->grads + z->own.begin, z->grads,
                                       MPI_UINT16_T, z->total, 0, z->total,
                                       z->comm, z->error, sizeof z->error));
    adamw_step_mixed(&z->adamw, step + 1, z->master, z->m, z->v, z->grads,
                     mean_of(z), z->params, z->total);
}

/* ---- Stage 1: the optimizer's state sharded -------------------------- */

static int stage1_allocate(zero_state *z)
{
    /* TODO 2 start */
    const size_t all = z->total, own = length_of(z->own);
    if ((z->params = ledger_alloc(MEMORY_PARAMETERS,
                                  all * sizeof *z->params)) == NULL ||
        (z->grads = ledger_alloc(MEMORY_GRADIENTS,
                                 all * sizeof *z->grads)) == NULL ||
        (z->master = ledger_alloc(MEMORY_OPTIMIZER,
                                  own * sizeof *z->master)) == NULL ||
        (z->m = ledger_alloc(MEMORY_OPTIMIZER, own * sizeof *z->m)) == NULL ||
        (z->v = ledger_alloc(MEMORY_OPTIMIZER, own * sizeof *z->v)) == NULL)
        return -1;
    return 0;
    /* TODO 2 end */
}

static void stage1_reduce(zero_state *z)
{
    /* TODO 2 start */
    zero_check(z, collective_reduce_scatter_bf16(
                      z->grads, z->grads + z->own.begin, z->total, 0,
                      z->total, z->comm, z->error, sizeof z->error));
    /* TODO 2 end */
}

static void stage1_update(zero_state *z, long step)
{
    /* TODO 2 start */
    adamw_step_mixed(&z->adamw, step + 1, z->master, z->m, z->v,
                     z->grads + z->own.begin, mean_of(z),
                     z->params + z->own.begin, length_of(z->own));
    zero_check(z, collective_allgather(z->params + z->own.begin, z->params,
                                       MPI_UINT16_T, z->total, 0, z->total,
                                       z->comm, z->error, sizeof z->error));
    /* TODO 2 end */
}

/* ---- Stage 2: the gradients sharded too ------------------------------ */

static int stage2_allocate(zero_state *z)
{
    /* TODO 3 start */
    const size_t all = z->total, own = length_of(z->own);
    if ((z->params = ledger_alloc(MEMORY_PARAMETERS,
                                  all * sizeof *z->params)) == NULL ||
        (z->grads = ledger_alloc(MEMORY_GRADIENTS,
                                 own * sizeof *z->grads)) == NULL ||
        (z->master = ledger_alloc(MEMORY_OPTIMIZER,
                                  own * sizeof *z->master)) == NULL ||
        (z->m = ledger_alloc(MEMORY_OPTIMIZER, own * sizeof *z->m)) == NULL ||
        (z->v = ledger_alloc(MEMORY_OPTIMIZER, own * sizeof *z->v)) == NULL)
        return -1;
    return 0;
    /* TODO 3 end */
}

/* Where backward writes layer l's gradient (stages 2 and 3). */
static bf16 *stage2_bucket(zero_state *z, int layer)
{
    /* TODO 3 start */
    size_t count = length_of(z->layers[layer]);
    z->bucket = ledger_alloc(MEMORY_BUCKETS, count * sizeof *z->bucket);
    zero_check_alloc(z, z->bucket);
    return z->bucket;
    /* TODO 3 end */
}

static void stage2_backward_done(zero_state *z, int layer)
{
    /* TODO 3 start */
    const zero_part range = z->layers[layer];
    zero_check(z, collective_reduce_scatter_bf16(
                      z->bucket, z->grads, z->total, range.begin,
                      length_of(range), z->comm, z->error, sizeof z->error));
    ledger_free(z->bucket);
    z->bucket = NULL;
    /* TODO 3 end */
}

static void stage2_update(zero_state *z, long step)
{
    /* TODO 3 start */
    adamw_step_mixed(&z->adamw, step + 1, z->master, z->m, z->v, z->grads,
                     mean_of(z), z->params + z->own.begin,
                     length_of(z->own));
    zero_check(z, collective_allgather(z->params + z->own.begin, z->params,
                                       MPI_UINT16_T, z->total, 0, z->total,
                                       z->comm, z->error, sizeof z->error));
    /* TODO 3 end */
}

/* ---- Stage 3: the parameters sharded too ----------------------------- */

static int stage3_allocate(zero_state *z)
{
    /* TODO 4 start */
    const size_t own = length_of(z->own);
    if ((z->params = ledger_alloc(MEMORY_PARAMETERS,
                                  own * sizeof *z->params)) == NULL ||
        (z->grads = ledger_alloc(MEMORY_GRADIENTS,
                                 own * sizeof *z->grads)) == NULL ||
        (z->master = ledger_alloc(MEMORY_OPTIMIZER,
                                  own * sizeof *z->master)) == NULL ||
        (z->m = ledger_alloc(MEMORY_OPTIMIZER, own * sizeof *z->m)) == NULL ||
        (z->v = ledger_alloc(MEMORY_OPTIMIZER, own * sizeof *z->v)) == NULL)
        return -1;
    return 0;
    /* TODO 4 end */
}

/* Layer l's whole parameters, gathered from every rank's own part. */
static const bf16 *stage3_gather(zero_state *z, int layer)
{
    /* TODO 4 start */
    const zero_part range = z->layers[layer];
    bf16 *gathered = ledger_alloc(MEMORY_GATHERED,
                                  length_of(range) * sizeof *gathered);
    zero_check_alloc(z, gathered);
    zero_check(z, collective_allgather(z->params, gathered, MPI_UINT16_T,
                                       z->total, range.begin,
                                       length_of(range), z->comm, z->error,
                                       sizeof z->error));
    z->gathered[0] = gathered;
    z->gathered_layer[0] = layer;
    return gathered;
    /* TODO 4 end */
}

/* Layer l's gathered parameters are no longer needed. */
static void stage3_release(zero_state *z, int layer)
{
    /* TODO 4 start */
    for (int k = 0; k < 2; k++)
        if (z->gathered_layer[k] == layer) {
            ledger_free(z->gathered[k]);
            z->gathered[k] = NULL;
            z->gathered_layer[k] = -1;
            return;
        }
    /* TODO 4 end */
}

static void stage3_backward_done(zero_state *z, int layer)
{
    /* TODO 4 start */
    stage2_backward_done(z, layer);
    stage3_release(z, layer);
    /* TODO 4 end */
}

static void stage3_update(zero_state *z, long step)
{
    /* TODO 4 start */
    adamw_step_mixed(&z->adamw, step + 1, z->master, z->m, z->v, z->grads,
                     mean_of(z), z->params, length_of(z->own));
    /* TODO 4 end */
}

/* ---- Going further: prefetch ------------------------------------------ */

/* Layer `layer`'s parameters, gathered by a non-blocking allgather started
 * earlier (or now, when none was), and the gather of layer `next` (when
 * it is a layer) started before returning, so that it travels while the
 * caller computes with these. */
static const bf16 *stage3_prefetched(zero_state *z, int layer, int next)
{
    /* TODO 5 start */
    int slot = z->gathered_layer[0] == layer   ? 0
               : z->gathered_layer[1] == layer ? 1 : -1;
    /* Starts layer l's gather into slot k: every rank's part of the
     * layer, with its place in the layer (an empty part sends nothing). */
    for (int round = 0; round < 2; round++) {
        int l = round == 0 ? layer : next;
        if (round == 0 && slot >= 0)
            continue;
        if (l < 0 || l >= z->layer_count)
            break;
        int k = z->gathered_layer[0] < 0 ? 0 : 1;
        const zero_part range = z->layers[l];
        z->gathered[k] = ledger_alloc(MEMORY_GATHERED,
                                      length_of(range) * sizeof(bf16));
        zero_check_alloc(z, z->gathered[k]);
        z->gathered_layer[k] = l;
        for (int r = 0; r < z->ranks; r++) {
            zero_part part = zero_owned_part(z->total, z->ranks, r,
                                             range.begin, length_of(range));
            z->prefetch_counts[k][r] = (int)length_of(part);
            z->prefetch_displs[k][r] = length_of(part) > 0
                                           ? (int)(part.begin - range.begin)
                                           : 0;
        }
        zero_part mine = zero_owned_part(z->total, z->ranks, z->rank,
                                         range.begin, length_of(range));
        const bf16 *from = z->params + (length_of(mine) > 0
                                            ? mine.begin - z->own.begin : 0);
        int result = MPI_Iallgatherv(from, (int)length_of(mine),
                                     MPI_UINT16_T, z->gathered[k],
                                     z->prefetch_counts[k],
                                     z->prefetch_displs[k], MPI_UINT16_T,
                                     z->comm, &z->prefetch_request[k]);
        if (result != MPI_SUCCESS)
            zero_abort(z, "MPI_Iallgatherv failed");
        if (round == 0)
            slot = k;
    }
    if (MPI_Wait(&z->prefetch_request[slot], MPI_STATUS_IGNORE) !=
        MPI_SUCCESS)
        zero_abort(z, "MPI_Wait on a prefetch failed");
    return z->gathered[slot];
    /* TODO 5 end */
}

/* ---- The hooks the driver calls (zero.h): each stage's part ----------- */

int zero_allocate(zero_state *z)
{
    switch (z->stage) {
    case 0: return stage0_allocate(z);
    case 1: return stage1_allocate(z);
    case 2: return stage2_allocate(z);
    default: return stage3_allocate(z);
    }
}

const bf16 *zero_forward_params(zero_state *z, int layer)
{
    /* Stages 0-2 hold every parameter where it lies in the flat buffer. */
    if (z->stage < 3)
        return z->params + z->layers[layer].begin;
    return z->prefetch ? stage3_prefetched(z, layer, layer + 1)
                       : stage3_gather(z, layer);
}

void zero_forward_done(zero_state *z, int layer)
{
    if (z->stage == 3)
        stage3_release(z, layer);
}

const bf16 *zero_backward_params(zero_state *z, int layer, bf16 **grads)
{
    const size_t begin = z->layers[layer].begin;
    if (z->stage < 2) {
        *grads = z->grads + begin;
        return z->params + begin;
    }
    if (z->stage == 2) {
        *grads = stage2_bucket(z, layer);
        return z->params + begin;
    }
    /* Backward goes down the layers: the next one to prefetch is l-1. */
    const bf16 *params = z->prefetch ? stage3_prefetched(z, layer, layer - 1)
                                     : stage3_gather(z, layer);
    *grads = stage2_bucket(z, layer);
    return params;
}

void zero_backward_done(zero_state *z, int layer)
{
    if (z->stage == 2)
        stage2_backward_done(z, layer);
    else if (z->stage == 3)
        stage3_backward_done(z, layer);
}

void zero_reduce(zero_state *z)
{
    /* Stages 2 and 3 reduced each layer's gradient as backward made it. */
    if (z->stage == 0)
        stage0_reduce(z);
    else if (z->stage == 1)
        stage1_reduce(z);
}

void zero_update(zero_state *z, long step)
{
    switch (z->stage) {
    case 0: stage0_update(z, step); break;
    case 1: stage1_update(z, step); break;
    case 2: stage2_update(z, step); break;
    default: stage3_update(z, step); break;
    }
}
