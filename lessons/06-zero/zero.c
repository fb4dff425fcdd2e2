/* Lesson 06, ZeRO stages 1, 2 and 3 in mixed precision.
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
    /* TODO 1 start: this rank's block of the whole buffer is the balanced
     * partition's (common/partition.h); the part of the range it owns is
     * where the two overlap. They may not overlap at all: a layer smaller
     * than P, or one inside other ranks' blocks. Return begin == end then,
     * never an end before the begin. */
    NOT_DONE();
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
    /* TODO 2 start: as stage 0, but the optimizer's state (master, m, v)
     * only for this rank's own part, z->own: 12 bytes a parameter of it,
     * not of Ψ. Return -1 at the first allocation refused. */
    NOT_DONE();
    /* TODO 2 end */
}

static void stage1_reduce(zero_state *z)
{
    /* TODO 2 start: this rank needs the sums of its own part of the
     * gradients only (it updates nothing else): a reduce-scatter, not an
     * allreduce, which would cost 2Ψ(P-1)/P instead of Ψ(P-1)/P. */
    NOT_DONE();
    /* TODO 2 end */
}

static void stage1_update(zero_state *z, long step)
{
    /* TODO 2 start: update the own part (its masters, moments, summed
     * gradients, and its bf16 parameters), then give every rank every
     * other rank's new parameters: each holds all Ψ for the next forward. */
    NOT_DONE();
    /* TODO 2 end */
}

/* ---- Stage 2: the gradients sharded too ------------------------------ */

static int stage2_allocate(zero_state *z)
{
    /* TODO 3 start: as stage 1, but the gradients too only for the own
     * part: backward's gradients go to a bucket, one layer at a time
     * (stage2_bucket). */
    NOT_DONE();
    /* TODO 3 end */
}

/* Where backward writes layer l's gradient (stages 2 and 3). */
static bf16 *stage2_bucket(zero_state *z, int layer)
{
    /* TODO 3 start: room for layer l's whole gradient, held as a
     * gradient bucket (z->bucket) until stage2_backward_done. */
    NOT_DONE();
    /* TODO 3 end */
}

static void stage2_backward_done(zero_state *z, int layer)
{
    /* TODO 3 start: backward has made layer l's gradient: sum it over the
     * ranks at once, each rank keeping the sums of its own part of the
     * layer in its own gradients, and free the bucket. */
    NOT_DONE();
    /* TODO 3 end */
}

static void stage2_update(zero_state *z, long step)
{
    /* TODO 3 start: as stage 1's update, from the own gradients. */
    NOT_DONE();
    /* TODO 3 end */
}

/* ---- Stage 3: the parameters sharded too ----------------------------- */

static int stage3_allocate(zero_state *z)
{
    /* TODO 4 start: as stage 2, but the parameters too only for the own
     * part: 16 bytes a parameter of it, and nothing of Ψ. */
    NOT_DONE();
    /* TODO 4 end */
}

/* Layer l's whole parameters, gathered from every rank's own part. */
static const bf16 *stage3_gather(zero_state *z, int layer)
{
    /* TODO 4 start: a buffer for layer l's whole parameters (gathered,
     * slot 0 of z->gathered), filled from every rank's own part. Remember
     * which layer it holds: stage3_release frees it. */
    NOT_DONE();
    /* TODO 4 end */
}

/* Layer l's gathered parameters are no longer needed. */
static void stage3_release(zero_state *z, int layer)
{
    /* TODO 4 start: free the gathered buffer that holds layer l's
     * parameters (whichever slot), and mark that slot empty. */
    NOT_DONE();
    /* TODO 4 end */
}

static void stage3_backward_done(zero_state *z, int layer)
{
    /* TODO 4 start: as stage 2 (the gradient, summed into the own part),
     * and the layer's gathered parameters are no longer needed. */
    NOT_DONE();
    /* TODO 4 end */
}

static void stage3_update(zero_state *z, long step)
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
static const bf16 *stage3_prefetched(zero_state *z, int layer, int next)
{
    /* TODO 5 start: if no gather of layer `layer` was started, start it
     * now; start the gather of `next` (when 0 <= next < L) into the other
     * slot of z->gathered, with MPI_Iallgatherv on z->comm (every rank's
     * part of the layer, from zero_owned_part, and where it goes in the
     * layer; the counts and displacements in z->prefetch_counts[k] and
     * z->prefetch_displs[k], which must last until it completes, its
     * request in z->prefetch_request[k]); then complete layer's gather and
     * return its parameters. At most two layers are gathered at once. */
    NOT_DONE();
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
