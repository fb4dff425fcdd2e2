/* Lesson 06, ZeRO stages 1, 2 and 3 in mixed precision: reference
 * solution.
 * You write: the part of a range of the flat buffer each rank owns
 * (TODO 1); stage 1, the optimizer's state sharded (TODO 2); stage 2, the
 * gradients too, reduce-scattered layer by layer (TODO 3); stage 3, the
 * parameters too, gathered for each use (TODO 4); going further, the next
 * layer's gather started while this one computes (TODO 5).
 * Given: stage 0, plain data parallelism on the same collectives, the
 * worked example to read first, and the hooks the driver calls, which pick
 * each stage's functions below (zero_stages.c); zero_state.c's helpers;
 * the model, the collectives, the optimizer and the ledgers (common/). */
#include <stdio.h>
#include <stdlib.h>

#include "collectives.h"
#include "memory_ledger.h"
#include "not_done.h"
#include "optimizer.h"
#include "partition.h"
#include "zero.h"
#include "zero_stages.h"

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

/* ---- Stage 1: the optimizer's state sharded -------------------------- */

int stage1_allocate(zero_state *z)
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

void stage1_reduce(zero_state *z)
{
    /* TODO 2 start */
    zero_check(z, collective_reduce_scatter_bf16(
                      z->grads, z->grads + z->own.begin, z->total, 0,
                      z->total, z->comm, z->error, sizeof z->error));
    /* TODO 2 end */
}

void stage1_update(zero_state *z, long step)
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

int stage2_allocate(zero_state *z)
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
bf16 *stage2_bucket(zero_state *z, int layer)
{
    /* TODO 3 start */
    size_t count = length_of(z->layers[layer]);
    z->bucket = ledger_alloc(MEMORY_BUCKETS, count * sizeof *z->bucket);
    zero_check_alloc(z, z->bucket);
    return z->bucket;
    /* TODO 3 end */
}

void stage2_backward_done(zero_state *z, int layer)
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

void stage2_update(zero_state *z, long step)
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

int stage3_allocate(zero_state *z)
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
const bf16 *stage3_gather(zero_state *z, int layer)
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
void stage3_release(zero_state *z, int layer)
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

void stage3_backward_done(zero_state *z, int layer)
{
    /* TODO 4 start */
    stage2_backward_done(z, layer);
    stage3_release(z, layer);
    /* TODO 4 end */
}

void stage3_update(zero_state *z, long step)
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
const bf16 *stage3_prefetched(zero_state *z, int layer, int next)
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
