/* Lesson 06: ZeRO's stages 1, 2 and 3, the pieces that you write in
 * zero.c, and the given helpers they may call (zero_state.c).
 *
 * The model's state is four flat buffers of Ψ elements each, in the
 * layout of common/mlp.h (layer by layer, W then b):
 *
 *     parameters   bf16   2Ψ bytes   what forward and backward read
 *     gradients    bf16   2Ψ         what backward writes
 *     master, m, v fp32  12Ψ         AdamW's state (optimizer.h)
 *
 * Every stage splits the same buffer the same way: rank r of P owns the
 * block block_range(Ψ, P, r) of common/partition.h, its "own" part. Stage 0
 * keeps all four whole on every rank; stage 1 keeps only its own part of
 * the optimizer's state; stage 2 also only its own part of the gradients;
 * stage 3 also only its own part of the parameters. Every stage trains
 * bitwise the same model: the gradients are summed by
 * collective_reduce_scatter_bf16 (rank order, fp32, rounded once) and
 * updated by adamw_step_mixed, element by element, whichever rank does it.
 *
 * The driver (main.c) calls the hooks below, in this order, each step:
 *
 *     for l = 0 .. L-1:     p = zero_forward_params(z, l)
 *                           forward of layer l on p
 *                           zero_forward_done(z, l)
 *     the loss
 *     for l = L-1 .. 0:     p = zero_backward_params(z, l, &g)
 *                           backward of layer l on p, its gradient into g
 *                           zero_backward_done(z, l)
 *     zero_reduce(z)
 *     zero_update(z, step)
 *
 * and, for the held-out accuracy, the forward hooks alone. Each hook
 * moves one kind of data, and the driver counts what each sends (the
 * communication ledger): the parameter hooks and zero_update bf16
 * parameters (or, in stage 0, gradients); zero_backward_done and
 * zero_reduce fp32 partial sums. zero_forward_done sends nothing. */
#ifndef ZZ_LESSON06_ZERO_H
#define ZZ_LESSON06_ZERO_H

#include <stdbool.h>
#include <stddef.h>

#include <mpi.h>

#include "bf16.h"
#include "mlp.h"
#include "optimizer.h"

/* Elements [begin, end) of the flat buffer; empty when begin == end. */
typedef struct {
    size_t begin, end;
} zero_part;

/* TODO 1. The part of the range [offset, offset + count) of a flat buffer
 * of `total` elements that rank `rank` of `ranks` owns under the balanced
 * block partition (the range may be the whole buffer, or one layer). It
 * may be empty (a layer smaller than P, or one that lies in other ranks'
 * blocks): then begin == end, any value. total need not be a multiple of
 * ranks, and may be smaller. */
zero_part zero_owned_part(size_t total, int ranks, int rank, size_t offset,
                          size_t count);

enum { ZERO_MAX_STAGE = 3 };

/* A rank's ZeRO state. zero_create sets the first group; your code sets
 * and uses the second; the driver never touches either. */
typedef struct {
    /* ---- given, read only ---- */
    const char *program;     /* the driver's name, in the messages that
                                end the job: "train_zero" */
    int stage;               /* 0 .. 3 */
    bool prefetch;           /* stage 3 with TODO 5's prefetch */
    MPI_Comm comm;           /* the collectives' own: a duplicate of
                                MPI_COMM_WORLD, so that no other message
                                can ever match theirs */
    int rank, ranks;         /* in comm */
    mlp *model;              /* layer shapes; no storage of its own */
    size_t total;            /* Ψ, the parameters of the whole model */
    int layer_count;         /* L */
    zero_part *layers;       /* (L): layer l's [begin, end), W then b */
    size_t largest_layer;    /* the most parameters of any one layer */
    zero_part own;           /* this rank's block of the whole buffer:
                                zero_owned_part(Ψ, P, rank, 0, Ψ) */
    adamw_config adamw;
    char error[256];         /* for the collectives' error lines */

    /* ---- yours: what this rank holds (NULL where it holds nothing) ----
     * Every buffer through ledger_alloc, with the category of what it
     * holds: the ledger is how the tests see your memory. */
    bf16 *params;            /* MEMORY_PARAMETERS. Stages 0-2: all Ψ;
                                stage 3: the own part, own.end - own.begin */
    bf16 *grads;             /* MEMORY_GRADIENTS. Stages 0-1: all Ψ;
                                stages 2-3: the own part */
    float *master, *m, *v;   /* MEMORY_OPTIMIZER. Stage 0: all Ψ each;
                                stages 1-3: the own part */
    bf16 *bucket;            /* MEMORY_BUCKETS. Stages 2-3: one layer's
                                gradient, from zero_backward_params to
                                zero_backward_done */
    bf16 *gathered[2];       /* MEMORY_GATHERED. Stage 3: layers' whole
                                parameters, gathered for one use; two with
                                prefetch (TODO 5) */
    int gathered_layer[2];   /* which layer each holds, -1 for none */
    /* TODO 5: a prefetch under way into gathered[k], given with P ints of
     * counts and displacements (MPI needs them until it completes) */
    MPI_Request prefetch_request[2];
    int *prefetch_counts[2], *prefetch_displs[2];
} zero_state;

/* ---- The hooks (zero_stages.c, given: stage 0 is the worked example;
 * each calls the functions of its stage, yours for stages 1-3 in zero.c) */

/* TODO 2-4. Allocates what the stage holds (see zero_state) and sets its
 * pointers. Returns 0, or -1 as soon as ledger_alloc refuses (under
 * --memory-cap), having freed nothing: the driver then says why on every
 * rank and ends. The given zero_initialize fills what it allocated. */
int zero_allocate(zero_state *z);

/* TODO 4 (and 5). Layer l's parameters for its forward: W then b,
 * layers[l].end - layers[l].begin bf16 values, valid until
 * zero_forward_done(z, l). */
const bf16 *zero_forward_params(zero_state *z, int layer);
void zero_forward_done(zero_state *z, int layer);

/* TODO 3-4 (and 5). Layer l's parameters for its backward, and in *grads
 * where backward writes its gradient (as many bf16 values), both valid
 * until zero_backward_done(z, l). In stages 2 and 3, zero_backward_done
 * sends the layer's gradient on at once and keeps only its own part. */
const bf16 *zero_backward_params(zero_state *z, int layer, bf16 **grads);
void zero_backward_done(zero_state *z, int layer);

/* TODO 2. After the whole backward pass: whatever summing of the
 * gradients over the ranks is still to do (stages 0 and 1). */
void zero_reduce(zero_state *z);

/* TODO 2-4. The optimizer step on what this rank updates (`step` counts
 * from 0), and whatever the next step's forward needs gathered (stages 0-2:
 * every rank's whole bf16 parameters). */
void zero_update(zero_state *z, long step);

/* ---- Given (zero_state.c) ---- */

/* Sets up the given part of *z for `stage` on model `model` (made by
 * mlp_create_without_storage) over a duplicate of MPI_COMM_WORLD; every
 * rank calls it. Stops the job when TODO 1's part of the whole buffer is
 * not the collectives' partition (your code and theirs must agree). */
void zero_create(zero_state *z, int stage, bool prefetch, mlp *model,
                 const adamw_config *adamw);

/* After zero_allocate: master from mlp_init_range's values of the
 * elements it holds (all, or own), m = v = 0, params the masters rounded
 * to bf16 (all, or own). */
void zero_initialize(zero_state *z, uint64_t seed);

/* Frees everything the state holds, and its communicator. */
void zero_destroy(zero_state *z);

/* For a collective's result: returns when it is 0; otherwise prints
 * z->error, the line it wrote, and ends the job (MPI_Abort): the other
 * ranks may be waiting in the same collective. */
void zero_check(zero_state *z, int result);

/* For a buffer allocated during a step (a bucket, a gathered layer):
 * returns when `block` is not NULL; otherwise prints the memory ledger's
 * line on the refusal (rank, category, bytes asked, held, cap) and ends
 * the job. */
void zero_check_alloc(zero_state *z, const void *block);

/* Prints "PROGRAM: rank R: WHY" and ends the job (MPI_Abort). */
_Noreturn void zero_abort(zero_state *z, const char *why);

#endif
