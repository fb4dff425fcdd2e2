/* Lesson 07's given helpers (offload.h): setting up a rank's offload
 * state, filling it with the initial model, freeing it, a host thread for
 * the delayed update, and stopping the job on an error. You do not need
 * to change this file. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_mpi.h"
#include "device.h"
#include "memory_ledger.h"
#include "offload.h"
#include "rng.h"
#include "timer.h"
#include "zero_stages.h"

/* Prints "train_offload: rank R: WHY" and ends the job (every rank). */
_Noreturn void offload_fail(const offload_state *o, const char *why)
{
    char message[600];
    snprintf(message, sizeof message, "train_offload: rank %d: %s",
             o->zero.rank, why);
    mpi_abort_exit(message);
}

void offload_check(offload_state *o, int result)
{
    if (result != 0)
        offload_fail(o, o->error[0] ? o->error : "a device call failed");
}

void offload_check_alloc(offload_state *o, const void *block)
{
    (void)o;
    /* The ledger's line names the rank already (device_open gave it). */
    if (block != NULL)
        return;
    char message[600];
    snprintf(message, sizeof message, "train_offload: %s",
             memory_ledger_last_error());
    mpi_abort_exit(message);
}

void offload_create(offload_state *o, mlp *model, const adamw_config *adamw,
                    long delay_from)
{
    memset(o, 0, sizeof *o);
    /* Lesson 06's stage 2: its partition, layers and communicator. Its
     * buffers are this lesson's (offload_allocate), never allocated by
     * zero_allocate. */
    zero_create(&o->zero, 2, false, model, adamw);
    o->delay_from = delay_from;
    o->own_count = length_of(o->zero.own);
    o->tile_count = (o->own_count + CPU_ADAM_TILE - 1) / CPU_ADAM_TILE;
    o->params_up = calloc(o->tile_count ? o->tile_count : 1,
                          sizeof *o->params_up);
    if (o->params_up == NULL)
        offload_fail(o, "out of memory for the copies' list");
    for (int k = 0; k < 2; k++)
        o->landing_layer[k] = -1;
    o->update_step = -1;
}

void offload_initialize(offload_state *o, uint64_t seed)
{
    const size_t own = o->own_count, total = o->zero.total;
    mlp_init_range(o->zero.model, seed, o->zero.own.begin, own, o->master);
    memset(o->m, 0, own * sizeof *o->m);
    memset(o->v, 0, own * sizeof *o->v);
    /* Every parameter's initial value, rounded, goes up a block at a
     * time through one host block: the same values on every rank. */
    enum { BLOCK = 4096 };
    float values[BLOCK];
    bf16 rounded[BLOCK];
    for (size_t at = 0; at < total; at += BLOCK) {
        size_t n = total - at < BLOCK ? total - at : BLOCK;
        mlp_init_range(o->zero.model, seed, at, n, values);
        bf16_from_floats(rounded, values, n);
        if (device_copy_to_device(o->device_params + at, rounded,
                                  n * sizeof *rounded, o->error,
                                  sizeof o->error) != 0)
            offload_fail(o, o->error);
    }
}

void offload_destroy(offload_state *o)
{
    device_free(o->device_params);
    device_host_free(o->master);
    device_host_free(o->m);
    device_host_free(o->v);
    for (int k = 0; k < 2; k++) {
        device_host_free(o->host_grads[k]);
        device_free(o->landing[k]);
    }
    device_host_free(o->host_params);
    free(o->params_up);
    /* zero_destroy frees lesson 06's buffers; this lesson allocated none
     * of them but a bucket, which stage 2 frees after each layer. */
    o->zero.grads = NULL;
    zero_destroy(&o->zero);
    memset(o, 0, sizeof *o);
}

bf16 *offload_gradient_bucket(offload_state *o, int layer)
{
    return stage2_bucket(&o->zero, layer);
}

zero_part offload_own_part(const offload_state *o, int layer)
{
    const zero_part range = o->zero.layers[layer];
    return zero_owned_part(o->zero.total, o->zero.ranks, o->zero.rank,
                           range.begin, length_of(range));
}

bf16 *offload_landing(offload_state *o, int layer, int slot)
{
    const zero_part part = offload_own_part(o, layer);
    const size_t count = length_of(part);
    bf16 *landing = device_alloc(MEMORY_GRADIENTS, count * sizeof *landing);
    offload_check_alloc(o, landing);
    o->landing[slot] = landing;
    o->landing_layer[slot] = layer;
    /* Lesson 06's stage 2 reduce-scatters into zero.grads, the storage of
     * the whole own slice (own[i - own.begin]). Only this layer's part is
     * written, so the slice's storage needs to exist for that part alone:
     * the address where own.begin would lie, computed as an integer (an
     * address outside the buffer, never read or written, where pointer
     * arithmetic would be undefined). */
    const size_t shift = (count ? part.begin : o->zero.own.begin) -
                         o->zero.own.begin;
    o->zero.grads = (bf16 *)((uintptr_t)landing - shift * sizeof(bf16));
    return landing;
}

cpu_adam_step offload_adam_step(const offload_state *o, long step)
{
    return cpu_adam_step_of(&o->zero.adamw, step + 1,
                            1.0f / (float)o->zero.ranks);
}

/* ---- A host thread for the delayed update ------------------------------ */

/* What host_task_watched reports: file-static, so that the code it
 * watches has no name for it. One task is in flight at a time in this
 * lesson, so one fingerprint is kept, with the sample it was taken on. */
static host_task_watch watch;
static uint64_t master_at_start;
static size_t sample_first;

/* The fingerprint looks at a sample of the slice, not all of it: hashed
 * whole, 3.2 million master weights took some 10 ms twice a step on the
 * main thread, more than the CPU Adam it watches. An update changes
 * (nearly) every master weight, so a sample of this many tells whether a
 * task updated them as surely as the whole slice does; the sample's
 * first element is drawn afresh for each task. */
enum { MASTER_SAMPLE = 1024 };

/* Every sample_stride(o)-th element from sample_first is in the sample. */
static size_t sample_stride(const offload_state *o)
{
    return o->own_count > MASTER_SAMPLE ? o->own_count / MASTER_SAMPLE : 1;
}

/* Draws the sample's first element for the next task. */
static void draw_sample(const offload_state *o)
{
    static rng_t draws;
    static bool seeded;
    if (!seeded) {
        draws = rng_seeded((uint64_t)(timer_now() * 1e9));
        seeded = true;
    }
    sample_first = (size_t)(rng_next_u64(&draws) % sample_stride(o));
}

/* FNV-1a over the bytes of the sample's master weights: an update of a
 * sampled element changes it, but for a collision of one in 2^64. */
static uint64_t master_fingerprint(const offload_state *o)
{
    const size_t stride = sample_stride(o);
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = sample_first; i < o->own_count; i += stride) {
        const unsigned char *bytes = (const unsigned char *)&o->master[i];
        for (size_t k = 0; k < sizeof *o->master; k++)
            hash = (hash ^ bytes[k]) * 1099511628211ull;
    }
    return hash;
}

/* Whether the slice has master weights to watch: none on a rank whose
 * slice is empty, nor before TODO 3 allocates them. */
static bool master_watchable(const offload_state *o)
{
    return o->master != NULL && o->own_count > 0;
}

host_task_watch host_task_watched(void)
{
    return watch;
}

/* The run's time is taken on its own thread: what the job cost there,
 * whether or not the caller was waiting for it meanwhile. */
static void *host_task_main(void *argument)
{
    host_task *task = argument;
    const double start = timer_now();
    task->run(task->context);
    task->run_seconds = timer_now() - start;
    return NULL;
}

void host_task_start(offload_state *o, host_task *task,
                     void (*run)(void *context), void *context)
{
    if (task->running)
        offload_fail(o, "host_task_start: the task is still running "
                         "(wait for it first)");
    task->run = run;
    task->context = context;
    /* Before the thread exists: nothing else writes master meanwhile. */
    if (master_watchable(o)) {
        draw_sample(o);
        master_at_start = master_fingerprint(o);
    }
    if (pthread_create(&task->thread, NULL, host_task_main, task) != 0)
        offload_fail(o, "host_task_start: no thread could be started");
    task->running = true;
    watch.started++;
}

void host_task_wait(offload_state *o, host_task *task)
{
    if (!task->running)
        offload_fail(o, "host_task_wait: no task is running");
    const double start = timer_now();
    if (pthread_join(task->thread, NULL) != 0)
        offload_fail(o, "host_task_wait: the thread could not be joined");
    o->task_wait_seconds += timer_now() - start;
    /* Read after the join, which orders the thread's write before it. */
    o->task_run_seconds += task->run_seconds;
    task->running = false;
    watch.waited++;
    if (master_watchable(o)) {
        watch.runs_watched++;
        if (master_fingerprint(o) != master_at_start)
            watch.runs_changing_master++;
    }
}
