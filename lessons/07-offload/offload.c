/* Lesson 07, ZeRO-Offload.
 * You write: what lives where (TODO 3); each layer's gradient reduce-
 * scattered by your lesson 06 stage 2 and its own part sent down to the
 * host as soon as backward has made it (TODO 4); the update of the slice
 * on the host by your CPU Adam, the new parameters sent up tile by tile
 * and allgathered on the device (TODO 5); the delayed parameter update
 * (TODO 6).
 * Given: the CPU Adam's API (cpu_adam.h, TODOs 1-2 in cpu_adam.c), the
 * helpers in offload_state.c, lesson 06's state and your stage 2, the
 * device layer, the collectives and the ledgers (common/). */
#include <stdio.h>

#include "collectives.h"
#include "cpu_adam.h"
#include "device.h"
#include "memory_ledger.h"
#include "not_done.h"
#include "offload.h"
#include "zero_stages.h"

int offload_allocate(offload_state *o)
{
    /* TODO 3 start: the device keeps the bf16 parameters, all Ψ of them
     * (device_alloc); the host keeps the optimizer's state of this rank's
     * slice, S = o->own_count elements of each of master, m and v, and
     * the slice's bf16 gradients coming down and parameters going up
     * (device_host_alloc): each with its category in offload_state. With
     * the delayed update (o->delay_from >= 0), a second set of host
     * gradients. Return -1 at the first allocation refused. */
    NOT_DONE();
    /* TODO 3 end */
}

/* Finishes slot k: once its copy down has landed (a rank that owns none
 * of the layer started none), the slot's device buffer is freed and the
 * slot is free again (landing_layer -1), for offload_landing. */
static void finish_landing(offload_state *o, int slot)
{
    /* TODO 4 start: if the slot's copy down is pending
     * (o->grads_down[slot].pending: set when the copy started, cleared
     * by its device_wait), wait for it; then free the landing buffer
     * (device_free), set o->landing[slot] to NULL and mark the slot empty
     * (landing_layer -1). */
    NOT_DONE();
    /* TODO 4 end */
}

void offload_backward_done(offload_state *o, int layer)
{
    /* TODO 4 start: take a free landing slot (the other may hold the
     * layer above, still on its way down) with offload_landing, first:
     * it points o->zero.grads, where stage 2 writes, at the landing. Then
     * reduce-scatter the layer with your lesson 06 stage2_backward_done;
     * start the own part's copy down into host_grads[o->grads_set] at its
     * place in the slice (device_copy_to_host_async; a rank may own none
     * of a layer); then finish the other slot's copy. */
    NOT_DONE();
    /* TODO 4 end */
}

/* Called by the thread that finished the tile [begin, end) of the slice:
 * its new bf16 parameters start up at once, while other tiles are still
 * being updated. */
static void send_tile_up(void *context, size_t begin, size_t end)
{
    /* TODO 5 start: an asynchronous copy of host_params [begin, end) to
     * the device's parameters at the slice's place, with the tile's own
     * device_copy (o->params_up[begin / CPU_ADAM_TILE]). This runs on
     * the CPU Adam's threads: stop with offload_fail on an error, from a
     * buffer of your own (char error[DEVICE_ERROR_LEN]). */
    NOT_DONE();
    /* TODO 5 end */
}

/* Every rank's new slice, from the device's own part to all Ψ. */
static void gather_parameters(offload_state *o)
{
    /* TODO 5 start: lesson 06's allgather of the whole buffer, on the
     * device's parameters, in place. */
    NOT_DONE();
    /* TODO 5 end */
}

/* The delayed update: the step's CPU Adam on its own thread, nothing sent
 * up until the next step's backward is over (the device is reading the
 * parameters meanwhile). */
static void delayed_update(void *context)
{
    /* TODO 6 start: the CPU Adam of step o->update_step on the gradients
     * of set o->update_set, with no tile callback. */
    NOT_DONE();
    /* TODO 6 end */
}

/* The delayed update's parameters, once it has finished: up, gathered. */
static void finish_delayed_update(offload_state *o)
{
    if (!o->update_pending)
        return;
    /* TODO 6 start: wait for its task, send the whole slice up (a
     * blocking copy), gather the parameters; none is pending any more. */
    NOT_DONE();
    /* TODO 6 end */
}

void offload_update(offload_state *o, long step)
{
    /* TODO 5 start: the last layers' gradients may still be on their way:
     * finish every slot that holds a layer. */
    NOT_DONE();
    /* TODO 5 end */
    /* TODO 6 start: from step o->delay_from on (when it is >= 0): finish
     * the previous step's update, then start this one's on
     * o->update_task (host_task_start) and return at once. The next
     * step's gradients come down into the other set of host_grads. */
    if (o->delay_from >= 0 && step >= o->delay_from)
        NOT_DONE();
    /* TODO 6 end */
    /* TODO 5 start: update the slice with your CPU Adam
     * (offload_adam_step(o, step) gives its settings: pass the step as it
     * is), sending each tile up as it finishes (send_tile_up); wait for
     * every tile's copy; gather. */
    /* TODO 5 end */
}

void offload_finish(offload_state *o)
{
    finish_delayed_update(o);
}
