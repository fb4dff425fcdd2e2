/* Lesson 06, ZeRO stages 1, 2 and 3 in mixed precision.
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
    /* TODO 1 start: this rank's block of the whole buffer is the balanced
     * partition's (common/partition.h); the part of the range it owns is
     * where the two overlap. They may not overlap at all: a layer smaller
     * than P, or one inside other ranks' blocks. Return begin == end then,
     * never an end before the begin. */
    NOT_DONE();
    /* TODO 1 end */
}

/* ---- Stage 1: the optimizer's state sharded -------------------------- */

int stage1_allocate(zero_state *z)
{
    /* TODO 2 start: as stage 0, but the optimizer's state (master, m, v)
     * only for this rank's own part, z->own: 12 bytes a parameter of it,
     * not of Ψ. Return -1 at the first allocation refused. */
    NOT_DONE();
    /* TODO 2 end */
}

void stage1_reduce(zero_state *z)
{
    /* TODO 2 start: this rank needs the sums of its own part of the
     * gradients only (it updates nothing else): a reduce-scatter, not an
     * allreduce, which would cost 2Ψ(P-1)/P instead of Ψ(P-1)/P. */
    NOT_DONE();
    /* TODO 2 end */
}

void stage1_update(zero_state *z, long step)
{
    /* TODO 2 start: update the own part (its masters, moments, summed
     * gradients, and its bf16 parameters), then give every rank every
     * other rank's new parameters: each holds all Ψ for the next forward. */
    NOT_DONE();
    /* TODO 2 end */
}

/* ---- Stage 2: the gradients sharded too ------------------------------ */

int stage2_allocate(zero_state *z)
{
    /* TODO 3 start: as stage 1, but the gradients too only for the own
     * part: backward's gradients go to a bucket, one layer at a time
     * (stage2_bucket). */
    NOT_DONE();
    /* TODO 3 end */
}

/* Where backward writes layer l's gradient (stages 2 and 3). */
bf16 *stage2_bucket(zero_state *z, int layer)
{
    /* TODO 3 start: room for layer l's whole gradient, held as a
     * gradient bucket (z->bucket) until stage2_backward_done. */
    NOT_DONE();
    /* TODO 3 end */
}

void stage2_backward_done(zero_state *z, int layer)
{
    /* TODO 3 start: backward has made layer l's gradient: sum it over the
     * ranks at once, each rank keeping the sums of its own part of the
     * layer in its own gradients, and free the bucket. */
    NOT_DONE();
    /* TODO 3 end */
}

void stage2_update(zero_state *z, long step)
{
    /* TODO 3 start: as stage 1's update, from the own gradients. */
    NOT_DONE();
    /* TODO 3 end */
}

/* ---- Stage 3: the parameters sharded too ----------------------------- */

int stage3_allocate(zero_state *z)
{
    /* TODO 4 start: as stage 2, but the parameters too only for the own
     * part: 16 bytes a parameter of it, and nothing of Ψ. */
    NOT_DONE();
    /* TODO 4 end */
}

/* Layer l's whole parameters, gathered from every rank's own part. */
const bf16 *stage3_gather(zero_state *z, int layer)
{
    /* TODO 4 start: a buffer for layer l's whole parameters (gathered,
     * slot 0 of z->gathered), filled from every rank's own part. Remember
     * which layer it holds: stage3_release frees it. */
    NOT_DONE();
    /* TODO 4 end */
}

/* Layer l's gathered parameters are no longer needed. */
void stage3_release(zero_state *z, int layer)
{
    /* TODO 4 start: free the gathered buffer that holds layer l's
     * parameters (whichever slot), and mark that slot empty. */
    NOT_DONE();
    /* TODO 4 end */
}

void stage3_backward_done(zero_state *z, int layer)
{
    /* TODO 4 start: as stage 2 (the gradient, summed into the own part),
     * and the layer's gathered parameters are no longer needed. */
    NOT_DONE();
    /* TODO 4 end */
}

void stage3_update(zero_state *z, long step)
{
    /* TODO 4 start: update the own part. Nothing to gather: the next
     * forward gathers each layer when it needs it. */
    NOT_DONE();
    /* TODO 4 end */
}

/* ---- Going further: prefetch ------------------------------------------ */

/* Layer `layer`'s parameters, gathered by a non-blocking allgather started
 * earlier (or now, when none was), and the gather of layer `next` (when
 * it is a layer) started before returning, so that it travels while the
 * caller computes with these. */
const bf16 *stage3_prefetched(zero_state *z, int layer, int next)
{
    /* TODO 5 start. Layer l = `layer` has range z->layers[l]: n values,
     * from range.begin in the whole model. Slots k = 0 and 1 of
     * z->gathered hold at most two layers; z->gathered_layer[k] says which
     * (-1: empty).
     * 1. If no slot holds l, start l's gather into an empty slot k:
     *    z->gathered[k] = ledger_alloc(MEMORY_GATHERED, n bf16s).
     *    For each rank r, part = zero_owned_part(z->total, z->ranks, r,
     *    range.begin, n): counts[r] is its length, displs[r] its start
     *    minus range.begin (0 for an empty part). Use z->prefetch_counts[k]
     *    and z->prefetch_displs[k]: MPI reads them until the gather
     *    completes, so arrays on the stack would be gone by then.
     *    This rank sends its own part, which starts at
     *    z->params + (part.begin - z->own.begin).
     *    MPI_Iallgatherv on z->comm, request in z->prefetch_request[k].
     * 2. If 0 <= next < z->layer_count, start `next`'s gather the same way,
     *    into the other slot.
     * 3. Wait for l's request only, and return z->gathered of l's slot.
     *    Leave next's gather running: it travels while the caller computes
     *    with l. The tests look at which requests are open when you
     *    return. */
    NOT_DONE();
    /* TODO 5 end */
}
