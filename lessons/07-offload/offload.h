/* Lesson 07: ZeRO-Offload, the pieces that you write in offload.c, and
 * the given helpers they may call (offload_state.c).
 *
 * What lives where, per rank of P, with Ψ parameters and this rank's slice
 * S = own.end - own.begin of the balanced partition (lesson 06's TODO 1):
 *
 *     device  parameters        bf16  2Ψ   forward and backward read them
 *             a layer's gradient bf16       backward writes it (lesson 06's
 *                                           bucket), reduce-scattered
 *             its own part       bf16       where the reduce-scatter lands,
 *                                           until its copy down has landed
 *             activations
 *     host    master, m, v       fp32 12S   AdamW's state (optimizer.h)
 *             gradients          bf16  2S   the slice's, come down (two
 *                                           sets with the delayed update)
 *             parameters         bf16  2S   the slice's, new, go up
 *
 * Forward and backward stay on the device. Only the optimizer step moves
 * to the CPU: the gradients come down (2S bytes a step), the CPU Adam of
 * TODOs 1-2 updates the slice, the new bf16 parameters go up (2S) and are
 * allgathered on the device. On one rank S = Ψ: 4Ψ bytes cross a step.
 *
 * The driver (main.c) calls the hooks below, in this order, each step:
 *
 *     for l = 0 .. L-1:     forward of layer l on device_params
 *     the loss
 *     for l = L-1 .. 0:     g = offload_gradient_bucket(o, l)   (given)
 *                           backward of layer l, its gradient into g
 *                           offload_backward_done(o, l)         TODO 4
 *     offload_update(o, step)                                   TODO 5, 6
 *
 * and offload_finish(o) once after the last step. Every buffer comes
 * from the device layer (common/device.h), so the ledgers and the copy
 * counters are how the tests see where your data lives and what crosses. */
#ifndef ZZ_LESSON07_OFFLOAD_H
#define ZZ_LESSON07_OFFLOAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "bf16.h"
#include "cpu_adam.h"
#include "device.h"
#include "zero.h"

/* A job that runs on a host thread of its own while the caller goes on
 * (given: the delayed parameter update's CPU step, TODO 6). */
typedef struct {
    pthread_t thread;
    bool running;
    void (*run)(void *context);
    void *context;
    double run_seconds;       /* how long run took on its thread */
} host_task;

/* A rank's offload state. offload_create sets the first group; your code
 * sets and uses the second; the driver changes neither (it reads the
 * task clocks for its time split). */
typedef struct {
    /* ---- given, read only ---- */
    zero_state zero;          /* lesson 06's state at stage 2: the
                                 communicator, the layers, this rank's own
                                 part. Your lesson 06 stage 2 reduce-
                                 scatters each layer's gradient with it. */
    long delay_from;          /* the delayed update from this step on
                                 (TODO 6); -1: never */
    size_t own_count;         /* S */
    double task_run_seconds;  /* the host tasks' runs on their thread, */
    double task_wait_seconds; /* and the callers' time in host_task_wait,
                                 summed by host_task_wait (the driver's
                                 time split) */

    /* ---- yours (TODO 3): what this rank holds ---- */
    bf16 *device_params;      /* device, MEMORY_PARAMETERS: all Ψ */
    float *master, *m, *v;    /* host, MEMORY_HOST_OPTIMIZER: S each */
    bf16 *host_grads[2];      /* host, MEMORY_HOST_STAGING: S each; the
                                 second only with the delayed update */
    bf16 *host_params;        /* host, MEMORY_HOST_STAGING: S */

    /* ---- yours (TODO 4): the gradients on their way down ---- */
    bf16 *landing[2];         /* device, MEMORY_GRADIENTS: a layer's own
                                 part, from the reduce-scatter until its
                                 copy down has landed */
    int landing_layer[2];     /* which layer each holds, -1 for none */
    device_copy grads_down[2];
    int grads_set;            /* which host_grads this step fills */

    /* ---- yours (TODO 5): the parameters on their way up ---- */
    device_copy *params_up;   /* one per tile of the slice: tile k is
                                 [k TILE, (k+1) TILE) (cpu_adam.h); given,
                                 made by offload_create */
    size_t tile_count;

    /* ---- yours (TODO 6): the delayed update ---- */
    host_task update_task;
    long update_step;         /* the step the task updates */
    int update_set;           /* the host_grads it reads */
    bool update_pending;      /* its parameters not yet up */

    char error[DEVICE_ERROR_LEN]; /* for the device layer's error lines */
} offload_state;

/* ---- Yours (offload.c) ---- */

/* TODO 3. Allocates what this rank holds (see offload_state): device
 * memory with device_alloc, host memory with device_host_alloc, each with
 * the category above. Returns 0, or -1 as soon as one is refused, having
 * freed nothing: the driver then says why on every rank and ends. */
int offload_allocate(offload_state *o);

/* TODO 4. Backward has written layer l's whole gradient into lesson 06's
 * bucket (o->zero.bucket). Reduce-scatter it with your stage 2, its own
 * part landing on the device (offload_landing gives where), start that
 * part's copy down to host_grads at once, and let the previous layer's
 * copy finish: at most two layers' own parts wait on the device. */
void offload_backward_done(offload_state *o, int layer);

/* TODO 5 (and 6). After the whole backward pass: wait for the gradients
 * still on their way, update this rank's slice on the host with your CPU
 * Adam (offload_adam_step(o, step) gives its settings: pass the loop's
 * step as it is, it adds the 1 of AdamW's bias correction and the scale
 * 1/P itself), send each tile's
 * new bf16 parameters up as soon as it is done, and allgather the
 * parameters on the device. With the delayed update (step >=
 * o->delay_from): run this step's update on o->update_task instead, and
 * first finish the previous step's. */
void offload_update(offload_state *o, long step);

/* TODO 6. After the last step: nothing left on its way (a delayed update
 * finished, its parameters up and gathered). */
void offload_finish(offload_state *o);

/* ---- Given (offload_state.c) ---- */

/* Sets up the given part of *o on `model` (made by
 * mlp_create_without_storage, its activations on the device) over a
 * duplicate of MPI_COMM_WORLD, with lesson 06's state at stage 2 (which
 * checks your lesson 06 TODO 1); every rank calls it. */
void offload_create(offload_state *o, mlp *model, const adamw_config *adamw,
                    long delay_from);

/* After offload_allocate: master from mlp_init_range's values of the own
 * slice, m = v = 0, device_params all Ψ initial values rounded to bf16
 * (copied up once, not counted as a step's traffic: the driver resets the
 * counters before the first step). */
void offload_initialize(offload_state *o, uint64_t seed);

/* Frees everything the state holds, and its communicator. */
void offload_destroy(offload_state *o);

/* Where backward writes layer l's gradient: your lesson 06
 * stage2_bucket (a device buffer of the whole layer, in o->zero.bucket). */
bf16 *offload_gradient_bucket(offload_state *o, int layer);

/* A device buffer for layer l's own part (MEMORY_GRADIENTS), in slot
 * `slot` of o->landing, which must be free (o->landing_layer[slot] is -1:
 * finish_landing frees a slot), and o->zero.grads set so that your stage 2's
 * reduce-scatter of layer l writes that part there: its own[i - own.begin]
 * for i in the part is landing[i - part.begin]. (A pointer of the own
 * slice's shape that only this layer's part of is memory: lesson 06's
 * stage 2 writes nothing else.) Returns the buffer. */
bf16 *offload_landing(offload_state *o, int layer, int slot);

/* Layer l's own part: [begin, end), empty when this rank owns none. */
zero_part offload_own_part(const offload_state *o, int layer);

/* The CPU Adam's settings for update `step` of the slice. Pass the loop's
 * step, which counts from 0, as it is: AdamW's bias correction counts from
 * 1, and this adds the 1 (pass step + 1 and every update is corrected as
 * the next one's). Scale 1/P: the mean of the P ranks' summed gradients. */
cpu_adam_step offload_adam_step(const offload_state *o, long step);

/* Runs task->run(task->context) on a new thread; host_task_wait returns
 * when it has finished, adding the run's time and its own to o's
 * task_run_seconds and task_wait_seconds. Both stop the job on a
 * failure. */
void host_task_start(offload_state *o, host_task *task,
                     void (*run)(void *context), void *context);
void host_task_wait(offload_state *o, host_task *task);

/* For the driver, which checks the delayed update's overlap with it,
 * kept by offload_state.c (which says how each is seen): how many tasks
 * host_task_start started and host_task_wait waited for; of the tasks
 * waited for on a rank with master weights, how many changed them while
 * their function ran, seen on the task's own thread; in how many updates
 * the caller's thread changed them before it started the task; and in
 * how many it changed them while the task was in flight, between its
 * start and its wait. An overlapped update is one whose CPU Adam ran on
 * the task: changing, and no caller's change before or in flight. */
typedef struct {
    long started, waited;
    long runs_watched, runs_changing_master;
    long callers_before_start, callers_in_flight;
} host_task_watch;
host_task_watch host_task_watched(void);

/* For the driver, at the start of each step: with no task in flight, the
 * master weights as they are now are what the step's update must leave
 * alone until it starts its task. */
void host_task_watch_step(const offload_state *o);

/* For the device layer's results: returns when `result` is 0; otherwise
 * prints o->error and ends the job. */
void offload_check(offload_state *o, int result);

/* Prints "train_offload: rank R: WHY" and ends the job (every rank). */
_Noreturn void offload_fail(const offload_state *o, const char *why);

/* For a device allocation during a step: returns when `block` is not
 * NULL; otherwise prints the device's line and ends the job. */
void offload_check_alloc(offload_state *o, const void *block);

#endif
