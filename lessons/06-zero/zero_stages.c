/* Lesson 06's given stage 0 and the hooks the driver calls (zero.h).
 *
 * Stage 0 is plain data parallelism on the same collectives as ZeRO's
 * stages, and the worked example for TODOs 2-4: read it before you write
 * stage 1 in zero.c. The hooks at the end pick each stage's functions:
 * those of stages 1-3 are yours (zero.c); with prefetch they also note
 * what your stage3_prefetched left running, for the tests. You do not
 * need to change this file. */
#include <stdio.h>

#include "collectives.h"
#include "comm_ledger.h"
#include "memory_ledger.h"
#include "optimizer.h"
#include "partition.h"
#include "steps.h"
#include "zero.h"
#include "zero_stages.h"

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

/* ---- What TODO 5's prefetch left running ------------------------------
 * Kept here, not in zero_state, which zero.c writes: the tests must see
 * what the code did, not what it says. */
static zero_prefetch_seen prefetch_seen;

/* Right after stage3_prefetched(z, layer, next) returned, before the
 * caller computes with the layer: the communication ledger's open
 * MPI_Iallgatherv requests. Nothing else in stage 3 starts one (the given
 * collectives use MPI_Isend and MPI_Irecv, and complete them before they
 * return), so the one open must be the next layer's. The turn from
 * forward to backward needs no exception: the forward's last layer has no
 * next (layer_count), so nothing is left running, and the backward's
 * first call starts its own layer's gather and the next one's. The one
 * open must also receive what the next layer's gather receives, the other
 * ranks' parts of it (each rank owns a block of the flat buffer:
 * common/partition.h), so that a gather of nothing left open beside a
 * finished one does not pass for it. */
/* The part of `range` this rank owns under the balanced partition
 * (common/partition.h), computed here, not by TODO 1: [*first, *last),
 * empty when they meet. */
static void owned_within(const zero_state *z, zero_part range, size_t *first,
                         size_t *last)
{
    size_t begin, end;
    block_range(z->total, (size_t)z->ranks, (size_t)z->rank, &begin, &end);
    *first = begin > range.begin ? begin : range.begin;
    *last = end < range.end ? end : range.end;
    if (*last < *first)
        *last = *first;
}

static void observe_prefetch(zero_state *z, int layer, int next)
{
    const bool has_next = next >= 0 && next < z->layer_count;
    uint64_t received = 0, others = 0;
    const size_t open = comm_ledger_open_requests_of("MPI_Iallgatherv",
                                                     &received);
    if (has_next) {
        const zero_part next_layer = z->layers[next];
        size_t first, last;
        owned_within(z, next_layer, &first, &last);
        others = (uint64_t)(next_layer.end - next_layer.begin -
                            (last - first)) * sizeof(bf16);
    }
    prefetch_seen.returns++;
    /* A gather still running into the layer about to be used, and then
     * freed by stage3_release, corrupts the heap a little later, which
     * would blame the wrong thing: stop here, saying what is running. */
    if (open > (has_next ? 1u : 0u)) {
        char why[320];
        snprintf(why, sizeof why, "stage3_prefetched returned layer %d's "
                 "parameters with %zu MPI_Iallgatherv requests still "
                 "running, where only the next layer's may be (%s): its "
                 "own gather must be complete (MPI_Wait) before its "
                 "parameters are used or freed (TODO 5)", layer, open,
                 has_next ? "one" : "none, after a pass's last layer");
        zero_abort(z, why);
    }
    if (open == (has_next ? 1u : 0u) && received == others)
        prefetch_seen.overlapped++;
    else if (open == 1 && has_next)
        prefetch_seen.other_bytes++;
    else if (open < (has_next ? 1u : 0u))
        prefetch_seen.waited++;
    else
        prefetch_seen.unfinished++;
}

/* ---- What TODOs 4-5's gathers gave ----------------------------------
 * A gathered layer holds, at gathered[i - layer.begin], element i of the
 * whole model; where this rank owns i, that is its own copy,
 * z->params[i - own.begin], bit for bit (an allgather only copies).
 * Checked for the part of the layer this rank owns, so that a gather
 * from the wrong offset stops here, naming it, rather than as weights
 * that drift from plain data parallel's. */
static void check_gathered(zero_state *z, int layer, const bf16 *gathered,
                           const char *function, int todo)
{
    const zero_part whole = { 0, z->total }, range = z->layers[layer];
    size_t begin, end, first, last;
    owned_within(z, whole, &begin, &end);
    /* A wrong own part (TODO 1) is another test's to name. */
    if (gathered == NULL || z->own.begin != begin || z->own.end != end)
        return;
    owned_within(z, range, &first, &last);
    for (size_t i = first; i < last; i++) {
        const bf16 want = z->params[i - begin];
        const bf16 got = gathered[i - range.begin];
        if (got == want)
            continue;
        char why[512];
        snprintf(why, sizeof why, "%s gave layer %d (elements %zu to %zu "
                 "of the model) with element %zu, which this rank owns, "
                 "%.9g where its own part holds %.9g: gathered[k] is the "
                 "layer's parameter k, the model's element %zu + k, so "
                 "collective_allgather's offset and count are the layer's "
                 "(TODO %d)", function, layer, range.begin, range.end - 1,
                 i, (double)bf16_to_float(got), (double)bf16_to_float(want),
                 range.begin, todo);
        zero_abort(z, why);
    }
}

zero_prefetch_seen zero_prefetch_observed(void)
{
    return prefetch_seen;
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

/* Each hook marks the step (common/steps.h) as it calls your function, and
 * again when it hands what your function gave to forward or backward: a
 * crash or a hang there names the TODO whose result was being used. */

const bf16 *zero_forward_params(zero_state *z, int layer)
{
    /* Stages 0-2 hold every parameter where it lies in the flat buffer. */
    if (z->stage < 3)
        return z->params + z->layers[layer].begin;
    const bf16 *params;
    if (!z->prefetch) {
        steps_enter("TODO 4: stage3_gather, for forward");
        params = stage3_gather(z, layer);
        check_gathered(z, layer, params, "stage3_gather", 4);
        steps_enter("forward, on the parameters stage3_gather gave (TODO 4)");
        return params;
    }
    steps_enter("TODO 5: stage3_prefetched, for forward");
    params = stage3_prefetched(z, layer, layer + 1);
    comm_ledger_overwrite_dead_frames();
    observe_prefetch(z, layer, layer + 1);
    check_gathered(z, layer, params, "stage3_prefetched", 5);
    steps_enter("forward, on the parameters stage3_prefetched gave "
                "(TODO 5)");
    return params;
}

void zero_forward_done(zero_state *z, int layer)
{
    if (z->stage == 3) {
        steps_enter("TODO 4: stage3_release");
        stage3_release(z, layer);
        steps_enter(ZERO_HOOKS_STEP);
    }
}

const bf16 *zero_backward_params(zero_state *z, int layer, bf16 **grads)
{
    const size_t begin = z->layers[layer].begin;
    if (z->stage < 2) {
        *grads = z->grads + begin;
        return z->params + begin;
    }
    if (z->stage == 2) {
        steps_enter("TODO 3: stage2_bucket");
        *grads = stage2_bucket(z, layer);
        steps_enter("backward, into the gradient buffer stage2_bucket gave "
                    "(TODO 3)");
        return z->params + begin;
    }
    /* Backward goes down the layers: the next one to prefetch is l-1. */
    const bf16 *params;
    if (z->prefetch) {
        steps_enter("TODO 5: stage3_prefetched, for backward");
        params = stage3_prefetched(z, layer, layer - 1);
        comm_ledger_overwrite_dead_frames();
        observe_prefetch(z, layer, layer - 1);
        check_gathered(z, layer, params, "stage3_prefetched", 5);
    } else {
        steps_enter("TODO 4: stage3_gather, for backward");
        params = stage3_gather(z, layer);
        check_gathered(z, layer, params, "stage3_gather", 4);
    }
    steps_enter("TODO 3: stage2_bucket");
    *grads = stage2_bucket(z, layer);
    steps_enter(z->prefetch ? "backward, on what stage3_prefetched and "
                              "stage2_bucket gave (TODOs 3, 5)"
                            : "backward, on what stage3_gather and "
                              "stage2_bucket gave (TODOs 3-4)");
    return params;
}

void zero_backward_done(zero_state *z, int layer)
{
    if (z->stage == 2) {
        steps_enter("TODO 3: stage2_backward_done");
        stage2_backward_done(z, layer);
    } else if (z->stage == 3) {
        steps_enter("TODO 4: stage3_backward_done");
        stage3_backward_done(z, layer);
    }
    if (z->stage >= 2)
        steps_enter(ZERO_HOOKS_STEP);
}

void zero_reduce(zero_state *z)
{
    /* Stages 2 and 3 reduced each layer's gradient as backward made it. */
    if (z->stage == 0)
        stage0_reduce(z);
    else if (z->stage == 1) {
        steps_enter("TODO 2: stage1_reduce");
        stage1_reduce(z);
    }
}

void zero_update(zero_state *z, long step)
{
    switch (z->stage) {
    case 0:
        stage0_update(z, step);
        break;
    case 1:
        steps_enter("TODO 2: stage1_update");
        stage1_update(z, step);
        break;
    case 2:
        steps_enter("TODO 3: stage2_update");
        stage2_update(z, step);
        break;
    default:
        steps_enter("TODO 4: stage3_update");
        stage3_update(z, step);
        break;
    }
}
