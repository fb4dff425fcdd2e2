/* Lesson 07, ZeRO-Offload: reference solution.
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
    /* TODO 3 start */
    const size_t all = o->zero.total, own = o->own_count;
    if ((o->device_params = device_alloc(MEMORY_PARAMETERS,
                                         all * sizeof(bf16))) == NULL ||
        (o->master = device_host_alloc(MEMORY_HOST_OPTIMIZER,
                                       own * sizeof(float))) == NULL ||
        (o->m = device_host_alloc(MEMORY_HOST_OPTIMIZER,
                                  own * sizeof(float))) == NULL ||
        (o->v = device_host_alloc(MEMORY_HOST_OPTIMIZER,
                                  own * sizeof(float))) == NULL ||
        (o->host_grads[0] = device_host_alloc(MEMORY_HOST_STAGING,
                                              own * sizeof(bf16))) == NULL ||
        (o->host_params = device_host_alloc(MEMORY_HOST_STAGING,
                                            own * sizeof(bf16))) == NULL)
        return -1;
    /* The delayed update reads one step's gradients while the next step's
     * come down: a second set. */
    if (o->delay_from >= 0 &&
        (o->host_grads[1] = device_host_alloc(MEMORY_HOST_STAGING,
                                              own * sizeof(bf16))) == NULL)
        return -1;
    return 0;
    /* TODO 3 end */
}

/* Finishes slot k: once its copy down has landed (a rank that owns none
 * of the layer started none), the slot's device buffer is freed and the
 * slot is free again (landing_layer -1), for offload_landing. */
static void finish_landing(offload_state *o, int slot)
{
    /* TODO 4 start */
    if (o->grads_down[slot].pending)
        offload_check(o, device_wait(&o->grads_down[slot], o->error,
                                     sizeof o->error));
    device_free(o->landing[slot]);
    o->landing[slot] = NULL;
    o->landing_layer[slot] = -1;
    /* TODO 4 end */
}

void offload_backward_done(offload_state *o, int layer)
{
    /* TODO 4 start */
    /* The other slot may hold the layer above, still on its way down. */
    const int slot = o->landing_layer[0] < 0 ? 0 : 1;
    bf16 *landing = offload_landing(o, layer, slot);
    /* Lesson 06: the P ranks' gradients of the layer summed in rank
     * order, this rank's part into `landing`, the bucket freed. */
    stage2_backward_done(&o->zero, layer);
    const zero_part part = offload_own_part(o, layer);
    const size_t count = part.end - part.begin;
    if (count > 0)
        offload_check(o, device_copy_to_host_async(
                             o->host_grads[o->grads_set] +
                                 (part.begin - o->zero.own.begin),
                             landing, count * sizeof(bf16),
                             &o->grads_down[slot], o->error,
                             sizeof o->error));
    /* The copy of the layer above had all of this layer's backward to
     * travel: now it must have landed, and its buffer goes. */
    const int other = 1 - slot;
    if (o->landing_layer[other] >= 0)
        finish_landing(o, other);
    /* TODO 4 end */
}

/* Called by the thread that finished the tile [begin, end) of the slice:
 * its new bf16 parameters start up at once, while other tiles are still
 * being updated. */
static void send_tile_up(void *context, size_t begin, size_t end)
{
    /* TODO 5 start */
    offload_state *o = context;
    char error[DEVICE_ERROR_LEN];
    if (device_copy_to_device_async(
            o->device_params + o->zero.own.begin + begin,
            o->host_params + begin, (end - begin) * sizeof(bf16),
            &o->params_up[begin / CPU_ADAM_TILE], error, sizeof error) != 0)
        offload_fail(o, error);
    /* TODO 5 end */
}

/* Every rank's new slice, from the device's own part to all Ψ. */
static void gather_parameters(offload_state *o)
{
    /* TODO 5 start */
    zero_state *z = &o->zero;
    zero_check(z, collective_allgather(o->device_params + z->own.begin,
                                       o->device_params, MPI_UINT16_T,
                                       z->total, 0, z->total, z->comm,
                                       z->error, sizeof z->error));
    /* TODO 5 end */
}

/* The delayed update: the step's CPU Adam on its own thread, nothing sent
 * up until the next step's backward is over (the device is reading the
 * parameters meanwhile). */
static void delayed_update(void *context)
{
    /* TODO 6 start */
    offload_state *o = context;
    const cpu_adam_step step = offload_adam_step(o, o->update_step);
    cpu_adam_update(&step, o->master, o->m, o->v,
                    o->host_grads[o->update_set], o->host_params,
                    o->own_count, NULL, NULL);
    /* TODO 6 end */
}

/* The delayed update's parameters, once it has finished: up, gathered. */
static void finish_delayed_update(offload_state *o)
{
    if (!o->update_pending)
        return;
    /* TODO 6 start */
    host_task_wait(o, &o->update_task);
    offload_check(o, device_copy_to_device(
                         o->device_params + o->zero.own.begin,
                         o->host_params, o->own_count * sizeof(bf16),
                         o->error, sizeof o->error));
    gather_parameters(o);
    o->update_pending = false;
    /* TODO 6 end */
}

void offload_update(offload_state *o, long step)
{
    /* TODO 5 start */
    /* The last layers' gradients may still be on their way. */
    for (int slot = 0; slot < 2; slot++)
        if (o->landing_layer[slot] >= 0)
            finish_landing(o, slot);
    /* TODO 5 end */
    /* TODO 6 start */
    if (o->delay_from >= 0 && step >= o->delay_from) {
        finish_delayed_update(o);
        o->update_step = step;
        o->update_set = o->grads_set;
        o->update_pending = true;
        /* This step's gradients are read by the task; the next step's
         * come down into the other set meanwhile. */
        o->grads_set = 1 - o->grads_set;
        host_task_start(o, &o->update_task, delayed_update, o);
        return;
    }
    /* TODO 6 end */
    /* TODO 5 start */
    const cpu_adam_step adam = offload_adam_step(o, step);
    cpu_adam_update(&adam, o->master, o->m, o->v, o->host_grads[o->grads_set],
                    o->host_params, o->own_count, send_tile_up, o);
    for (size_t tile = 0; tile < o->tile_count; tile++)
        if (o->params_up[tile].pending)
            offload_check(o, device_wait(&o->params_up[tile], o->error,
                                         sizeof o->error));
    gather_parameters(o);
    /* TODO 5 end */
}

void offload_finish(offload_state *o)
{
    finish_delayed_update(o);
}
