/* Lesson 07's driver: mixed-precision training with ZeRO-Offload. Forward
 * and backward run on the device (common/device.h: with the cpu backend, a
 * capacity-limited arena that behaves like a small GPU) on bf16
 * parameters; your offload.c sends each layer's gradient down as backward
 * makes it, updates this rank's slice on the host with your CPU Adam, and
 * sends the new parameters back up. On P ranks it runs on your lesson 06
 * stage 2. The loop is common/train.h's, shared with lessons 05 and 06:
 * the step below is what it runs, every step, on every rank.
 *
 *   build/student/07-offload/train_offload --device-memory 1500000
 *   scripts/mpirun -np 2 build/student/07-offload/train_offload --dpu 5
 *   build/student/07-offload/train_offload --no-offload --device-memory 1500000
 *
 * --no-offload keeps everything on the device (lesson 06's stage 0, given
 * code, its step taken by your CPU Adam): 16 bytes a parameter, which a
 * small device refuses at once.
 * With --out, every rank reports to the tests: the parameters, its slice
 * of the fp32 master weights, the peaks of the device's and the host's
 * memory by category, the bytes each way across the bus (the device
 * layer's counters) and over the network (the communication ledger), so
 * what your code claims plays no part. You do not need to change this
 * file. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "check_mpi.h"
#include "cli.h"
#include "collectives.h"
#include "comm_ledger.h"
#include "dataset.h"
#include "device.h"
#include "ledger_watch.h"
#include "memory_ledger.h"
#include "mlp.h"
#include "offload.h"
#include "optimizer.h"
#include "report.h"
#include "timer.h"
#include "train.h"
#include "zero.h"

typedef struct {
    size_t steps, local_batch, samples, held_out, device_memory, dpu;
    int hidden, width, features, classes;
    double learning_rate, weight_decay;
    uint64_t seed;
    bool no_offload;
    const char *backend, *out;
    int rank, ranks;
} run_config;

/* Where the time of a step goes, on this rank (seconds, all steps), each
 * taken by given code: this file's clock around the phases, and, inside
 * the update, the communication ledger's clock of the MPI calls, the
 * device layer's of the copies waited for, and host_task_wait's of the
 * delayed update's task (offload_state.c). What the student's code says
 * about itself plays no part. */
typedef struct {
    double forward, backward, update;
    double update_mpi;        /* inside MPI during the update: the
                                 allgather (without offload, the reduce) */
    double update_copy_waits; /* waiting for copies, either way, during
                                 the update */
    double update_task_wait;  /* in host_task_wait during the update */
} step_times;

typedef struct {
    const run_config *config;
    mlp model;
    offload_state offload;    /* with offload */
    zero_state zero;          /* without: lesson 06's stage 0 */
    ledger_watch memory;      /* the device's and the host's, sampled
                                 after each hook */
    device_traffic traffic;   /* of the training steps */
    step_times times;
    float *widened;           /* the parameters, widened for the report */
    float first_loss, last_loss; /* of step 0 and of the step before */
    /* The delayed update's overlap: of the steps that begin while the
     * previous step's update should still be running on its host task,
     * how many found exactly one task in flight (host_task_watched). */
    long overlap_checked, overlap_in_flight;
} trainer;

/* The clocks an update's time is split by (step_times), read before it. */
typedef struct {
    double mpi, task_wait, start;
    device_traffic copies;
} update_clocks;

/* What the step calls, defined after it. */
static void watch_step_start(trainer *t, long step);
static float forward_loss(trainer *t, const float *inputs, size_t batch,
                          const int *labels, int backward, int *correct);
static void loss_ok(trainer *t, float loss, long step, const char *what);
static void backward_layer(trainer *t, int l);
static void update_state(trainer *t, long step);
static update_clocks read_clocks(const trainer *t);
static void add_update_time(trainer *t, const update_clocks *before);
static void check_parameters(const trainer *t, long step);

/* ---- The step ---------------------------------------------------------- */

/* One training step is these two, in this order (train.h's compute and
 * update; no synchronise of their own: with offload, the gradients are
 * reduced as backward makes them, without it in the update): forward and
 * the loss on the device; backward layer by layer, each layer's gradient
 * sent down to the host by offload.c; then the update on the host, and
 * the new parameters up. */
static float forward_backward(void *context, long step, const float *inputs,
                              const int *labels, size_t batch)
{
    trainer *t = context;
    watch_step_start(t, step);
    double start = timer_now();
    float loss = forward_loss(t, inputs, batch, labels, 1, NULL);
    loss_ok(t, loss, step, "the loss is NaN");
    if (step == 0)
        t->first_loss = loss;
    t->last_loss = loss;
    double middle = timer_now();
    t->times.forward += middle - start;
    for (int l = t->model.layer_count - 1; l >= 0; l--) {
        backward_layer(t, l);
        ledger_watch_sample(&t->memory);
    }
    t->times.backward += timer_now() - middle;
    return loss;
}

static void update(void *context, long step)
{
    trainer *t = context;
    const update_clocks before = read_clocks(t);
    update_state(t, step);
    add_update_time(t, &before);
    check_parameters(t, step);
    ledger_watch_sample(&t->memory);
    if (step + 1 == (long)t->config->steps) {
        /* The peaks at the end of the last step, before the accuracy and
         * the report add anything. */
        ledger_watch_keep_peaks(&t->memory);
        t->traffic = device_traffic_total();
    }
}

/* ---- What the step calls ----------------------------------------------- */

/* Each hook of offload.c runs with its name given to the device layer,
 * which says it when host code touches device memory. */
static const char *const hook_backward_done =
    "offload_backward_done (lessons/07-offload/offload.c, TODO 4, or the "
    "lesson 06 stage 2 it calls, lessons/06-zero/zero.c)";
static const char *const hook_update =
    "offload_update (lessons/07-offload/offload.c, TODOs 5-6, or the CPU "
    "Adam it calls, cpu_adam.c)";
static const char *const hook_finish =
    "offload_finish (lessons/07-offload/offload.c, TODO 6)";
static const char *const hook_allocate =
    "offload_allocate (lessons/07-offload/offload.c, TODO 3)";

/* At the start of each step: the bus's counters from step 0 on, and the
 * delayed update's overlap. With the delay, update(step - 1) left its CPU
 * Adam running on a host task, to run beside this step's forward and
 * backward. */
static void watch_step_start(trainer *t, long step)
{
    if (step == 0)
        device_traffic_reset();
    if (t->config->no_offload)
        return;
    if (t->offload.delay_from >= 0 && step > t->offload.delay_from) {
        const host_task_watch w = host_task_watched();
        t->overlap_checked++;
        if (w.started - w.waited == 1)
            t->overlap_in_flight++;
    }
    host_task_watch_step(&t->offload);
}

/* Prints "train_offload: rank R: WHY" and ends the job (every rank). */
static _Noreturn void fail(const trainer *t, const char *why)
{
    char line[1536];   /* room for fail_nan's longest line whole */
    snprintf(line, sizeof line, "train_offload: rank %d: %s",
             t->config->rank, why);
    mpi_abort_exit(line);
}

/* Stops the job when a per-layer step refused. */
static void model_ok(const trainer *t, int result)
{
    if (result != 0)
        fail(t, t->model.error);
}

/* The device's parameters of layer l. */
static const bf16 *layer_params(trainer *t, int l)
{
    if (t->config->no_offload)
        return zero_forward_params(&t->zero, l);
    return t->offload.device_params + t->offload.zero.layers[l].begin;
}

/* The forward pass and the loss: the model's kernels, run in place on
 * the device's memory (the parameters, the activations: device.h). */
static float forward_loss(trainer *t, const float *inputs, size_t batch,
                          const int *labels, int backward, int *correct)
{
    device_access_begin();
    model_ok(t, mlp_set_inputs(&t->model, inputs, batch));
    for (int l = 0; l < t->model.layer_count; l++)
        model_ok(t, mlp_forward_layer_bf16(&t->model, l,
                                           layer_params(t, l)));
    const float loss = mlp_loss(&t->model, labels, backward, correct);
    device_access_end();
    return loss;
}

/* Stops the job on a NaN at step `step`, saying the likelier cause: NaN
 * from one step to the next is a buffer read before its copy had landed
 * (the cpu device's copies write NaN until their wait); after a loss that
 * grew without bound, an update that diverges. */
static _Noreturn void fail_nan(const trainer *t, long step, const char *what)
{
    char why[1400];
    /* With the delayed update, a step's gradients come down while the
     * task still reads the last step's: two host sets, alternating. */
    const bool delayed = t->offload.delay_from >= 0 &&
                         step >= t->offload.delay_from;
    if (step >= 1 && !(t->last_loss <= 100 * t->first_loss))
        snprintf(why, sizeof why, "%s at step %ld, after the loss grew from "
                 "%.4g at step 0 to %.4g: the updates diverge. Does your CPU "
                 "Adam give adamw_step_mixed's bits? (TODOs 1-2: their own "
                 "tests say)", what, step, t->first_loss, t->last_loss);
    else
        snprintf(why, sizeof why, "%s at step %ld: something read a buffer "
                 "before its copy had landed, or a part of it no copy "
                 "wrote: the gradients coming down, before the update "
                 "(TODOs 4-5), or the parameters going up, before the "
                 "allgather that spreads them (TODO 5: it reads the slice "
                 "on the device, so every tile's copy up has landed first) "
                 "and the next forward: device_wait for each, and copy each "
                 "part whole (a copy's count is in bytes: elements times "
                 "their size)%s", what, step,
                 delayed ? "; with the delayed update (TODO 6), step s+1's "
                           "gradients come down into the other host set "
                           "(o->grads_set) while the task reads step s's, "
                           "o->host_grads[o->update_set], the set it was "
                           "started with"
                         : "");
    fail(t, why);
}

/* Stops the job on a NaN loss (`what`, at step `step`): the model's
 * refusal when it refused, else fail_nan. */
static void loss_ok(trainer *t, float loss, long step, const char *what)
{
    if (!isnan(loss))
        return;
    if (t->model.error[0])
        fail(t, t->model.error);
    fail_nan(t, step, what);
}

/* Layer l's backward: without offload, through lesson 06's stage 0
 * hooks; with it, into offload.c's gradient bucket on the device, which
 * offload_backward_done sends on. */
static void backward_layer(trainer *t, int l)
{
    if (t->config->no_offload) {
        bf16 *grads = NULL;
        const bf16 *params = zero_backward_params(&t->zero, l, &grads);
        model_ok(t, mlp_backward_layer_bf16(&t->model, l, params, grads));
        zero_backward_done(&t->zero, l);
        return;
    }
    device_name_host_code(hook_backward_done);
    bf16 *grads = offload_gradient_bucket(&t->offload, l);
    device_name_host_code(NULL);
    device_access_begin();
    model_ok(t, mlp_backward_layer_bf16(&t->model, l, layer_params(t, l),
                                        grads));
    device_access_end();
    device_name_host_code(hook_backward_done);
    offload_backward_done(&t->offload, l);
    device_name_host_code(NULL);
}

/* --no-offload's update: lesson 06's stage 0 (zero_reduce, then every rank
 * gathers every sum and takes the same step on all of them), the step by
 * your CPU Adam, which gives adamw_step_mixed's bits. Not lesson 06's
 * zero_update: that would link adamw_step_mixed, the reference your CPU
 * Adam is tested against, into this program, which no program that runs
 * your code may hold (tests/symbols/07-offload.txt). */
static void update_without_offload(zero_state *z, long step)
{
    zero_reduce(z);
    zero_check(z, collective_allgather(z->grads + z->own.begin, z->grads,
                                       MPI_UINT16_T, z->total, 0, z->total,
                                       z->comm, z->error, sizeof z->error));
    const cpu_adam_step adam = cpu_adam_step_of(&z->adamw, step + 1,
                                                1.0f / (float)z->ranks);
    cpu_adam_update(&adam, z->master, z->m, z->v, z->grads, z->params,
                    z->total, NULL, NULL);
}

/* The update of step `step`: offload.c's (the last step's delayed update
 * landing before the accuracy), or without offload the one above. */
static void update_state(trainer *t, long step)
{
    if (t->config->no_offload) {
        update_without_offload(&t->zero, step);
        return;
    }
    device_name_host_code(hook_update);
    offload_update(&t->offload, step);
    if (step + 1 == (long)t->config->steps) {
        device_name_host_code(hook_finish);
        offload_finish(&t->offload);
    }
    device_name_host_code(NULL);
}

static update_clocks read_clocks(const trainer *t)
{
    update_clocks now = { .mpi = comm_ledger_total().seconds,
                          .task_wait = t->offload.task_wait_seconds,
                          .copies = device_traffic_total() };
    now.start = timer_now();
    return now;
}

/* The update's time since `before`, and its parts: inside MPI, waiting
 * for copies either way, waiting for the delayed update's task. */
static void add_update_time(trainer *t, const update_clocks *before)
{
    t->times.update += timer_now() - before->start;
    const device_traffic copies = device_traffic_total();
    t->times.update_mpi += comm_ledger_total().seconds - before->mpi;
    t->times.update_copy_waits +=
        copies.waited_to_host - before->copies.waited_to_host +
        copies.waited_to_device - before->copies.waited_to_device;
    t->times.update_task_wait += t->offload.task_wait_seconds -
                                 before->task_wait;
}

/* After an update, every parameter on the device is a number. A NaN one
 * need not reach the loss: a ReLU turns it into 0 (fmaxf(NaN, 0) is 0),
 * and the model trains on as if its weights were gone. The cpu device's
 * memory is the program's own, read here in place, as a kernel would
 * (device.h); a GPU's copies write no NaN to be found. */
static void check_parameters(const trainer *t, long step)
{
    if (t->config->no_offload || device_backend_in_use() != DEVICE_CPU)
        return;
    const offload_state *o = &t->offload;
    size_t i = 0;
    device_access_begin();
    while (i < o->zero.total && (o->device_params[i] & 0x7fffu) <= 0x7f80u)
        i++;
    device_access_end();
    if (i < o->zero.total) {
        int layer = 0;
        while (layer + 1 < o->zero.layer_count &&
               o->zero.layers[layer + 1].begin <= i)
            layer++;
        char what[448];
        int used = snprintf(what, sizeof what, "parameter %zu (layer %d) on "
                            "the device is NaN after the update", i, layer);
        /* A copy lands at its device_wait: one still pending now was
         * started and never waited for. */
        const size_t pending = device_pending_copies(),
                     up = device_pending_copies_to_device();
        if (pending > 0 && used > 0 && (size_t)used < sizeof what)
            snprintf(what + used, sizeof what - (size_t)used, " (and %zu "
                     "cop%s started %s still pending, never waited for, %zu "
                     "of them up to the device: a copy lands only at its "
                     "device_wait%s)", pending, pending == 1 ? "y" : "ies",
                     pending == 1 ? "is" : "are", up,
                     up > 0 && o->delay_from >= 0 && step >= o->delay_from
                         ? "; with the delayed update, the task's CPU Adam "
                           "sends no tile up (no tile callback, NULL): the "
                           "slice goes up whole in finish_delayed_update"
                         : "");
        fail_nan(t, step, what);
    }
}

/* ---- After the steps: the accuracy and the report ---------------------- */

static size_t classify(void *context, const float *inputs, const int *labels,
                       size_t batch)
{
    trainer *t = context;
    int correct = 0;
    loss_ok(t, forward_loss(t, inputs, batch, labels, 0, &correct),
            (long)t->config->steps, "the loss on the held-out samples is "
            "NaN");
    return (size_t)correct;
}

static size_t parameter_count(const trainer *t)
{
    return t->model.parameter_count;
}

/* Every parameter, read back from the device, widened. */
static const float *parameters(void *context)
{
    trainer *t = context;
    const size_t count = parameter_count(t);
    if (t->config->no_offload) {
        /* Lesson 06's stage 0 allocated them through the ledger alone:
         * the cpu device's memory, readable where it lies. */
        t->widened = malloc((count ? count : 1) * sizeof *t->widened);
        if (t->widened == NULL)
            fail(t, "out of memory for the parameters");
        bf16_to_floats(t->widened, t->zero.params, count);
        return t->widened;
    }
    const bf16 *device_params = t->offload.device_params;
    char error[DEVICE_ERROR_LEN] = "";
    bf16 *host = malloc((count ? count : 1) * sizeof *host);
    t->widened = malloc((count ? count : 1) * sizeof *t->widened);
    if (host == NULL || t->widened == NULL ||
        device_copy_to_host(host, device_params, count * sizeof *host,
                            error, sizeof error) != 0)
        fail(t, error[0] ? error : "out of memory for the parameters");
    bf16_to_floats(t->widened, host, count);
    free(host);
    return t->widened;
}

/* Bytes across the bus a training step, each way. */
static uint64_t per_step(uint64_t bytes, const run_config *c)
{
    return bytes / c->steps;
}

static void report_lines(void *context, FILE *report)
{
    trainer *t = context;
    const run_config *c = t->config;
    const zero_state *z = c->no_offload ? &t->zero : &t->offload.zero;
    fprintf(report, "offload %d\ndpu %zu\nbackend %s\ndevice_memory %zu\n"
            "model_parameters %zu\nown %zu %zu\nlargest_layer %zu\n"
            "layers %d\n", c->no_offload ? 0 : 1, c->dpu,
            device_backend_name(), c->device_memory, z->total,
            z->own.begin, z->own.end, z->largest_layer, z->layer_count);
    for (int l = 0; l < z->layer_count; l++)
        fprintf(report, "layer %d %zu %zu\n", l, z->layers[l].begin,
                z->layers[l].end);
    const host_task_watch w = host_task_watched();
    fprintf(report, "host_tasks %ld %ld\nhost_task_runs_changing_master "
            "%ld %ld\nhost_task_caller_changes %ld %ld %ld\n"
            "overlap_in_flight %ld %ld\n", w.started, w.waited,
            w.runs_changing_master, w.runs_watched, w.callers_before_start,
            w.callers_in_flight, w.runs_watched, t->overlap_in_flight,
            t->overlap_checked);
    fprintf(report, "to_host %" PRIu64 "\nto_device %" PRIu64 "\n"
            "copies_to_host %" PRIu64 "\ncopies_to_device %" PRIu64 "\n",
            t->traffic.to_host, t->traffic.to_device,
            t->traffic.copies_to_host, t->traffic.copies_to_device);
    fprintf(report, "copies_to_device_waited_at_once %" PRIu64 "\n"
            "threads_copying_to_device %" PRIu64 "\n"
            "largest_copy_to_device %" PRIu64 "\n"
            "copies_to_host_waited_at_once %" PRIu64 "\n",
            t->traffic.copies_to_device_waited_at_once,
            t->traffic.threads_copying_to_device,
            t->traffic.largest_copy_to_device,
            t->traffic.copies_to_host_waited_at_once);
    ledger_watch_write_peaks(&t->memory, report);
    fprintf(report, "peak device_total %zu\npeak host_total %zu\n",
            t->memory.peak_total, t->memory.host_peak_total);
    ledger_watch_write_growth(&t->memory, report);
    /* This rank's slice of the fp32 master weights. */
    const float *master = c->no_offload ? z->master + z->own.begin
                                        : t->offload.master;
    if (report_write_floats(c->out, "master", z->rank, master,
                            z->own.end - z->own.begin) != 0)
        fail(t, "the master weights could not be written");
}

/* The optimizer step's time, wherever it ran (seconds, all steps): on the
 * main thread, the update's remainder once its measured parts are taken
 * out (time inside MPI, copies waited for, the task waited for); on the
 * delayed update's thread, the task's runs. The remainder is the CPU Adam
 * when it runs on the main thread (without the delay, and in the warm-up
 * steps before it) with the update's small bookkeeping (starting copies
 * and the task, freeing the landing buffers); with the delay, little
 * else. Never below zero: a part measured on another thread (a copy the
 * task waited for) may overlap the main thread's waits. */
static double adam_seconds(const trainer *t)
{
    const step_times *times = &t->times;
    double main_thread = times->update - times->update_mpi -
                         times->update_copy_waits - times->update_task_wait;
    return (main_thread > 0 ? main_thread : 0) +
           t->offload.task_run_seconds;
}

/* Per step, in ms. Measured: forward_ms, backward_ms and update_ms (this
 * file's clock around each phase); wait_down_ms and wait_up_ms (the device
 * layer's clock of the copies waited for, the whole step); mpi_ms (the
 * communication ledger's clock of the MPI calls made during the update:
 * the allgather, or without offload the reduce; time waiting for the
 * other ranks included); task_wait_ms (the update's time in
 * host_task_wait: the delayed update's task not yet done). A remainder:
 * adam_ms (adam_seconds). With the delay, the task's share of adam_ms
 * runs beside the next step's forward and backward, not inside update_ms:
 * adam_ms may exceed update_ms then, and only then. */
static void summary_keys(void *context, FILE *out)
{
    const trainer *t = context;
    const double ms = 1e3 / (double)t->config->steps;
    fprintf(out, " offload=%d dpu=%zu device_peak_bytes=%zu "
            "host_peak_bytes=%zu down_bytes_per_step=%" PRIu64
            " up_bytes_per_step=%" PRIu64 " forward_ms=%.3f backward_ms=%.3f"
            " update_ms=%.3f wait_down_ms=%.3f wait_up_ms=%.3f mpi_ms=%.3f"
            " adam_ms=%.3f task_wait_ms=%.3f",
            t->config->no_offload ? 0 : 1, t->config->dpu,
            t->memory.peak_total, t->memory.host_peak_total,
            per_step(t->traffic.to_host, t->config),
            per_step(t->traffic.to_device, t->config),
            t->times.forward * ms, t->times.backward * ms,
            t->times.update * ms, t->traffic.waited_to_host * ms,
            t->traffic.waited_to_device * ms, t->times.update_mpi * ms,
            adam_seconds(t) * ms, t->times.update_task_wait * ms);
}

/* Rank 0's closing lines: the most it held on the device and on the
 * host, by category, what crossed the bus, and where a step's time went. */
static void print_totals(const trainer *t)
{
    const run_config *c = t->config;
    const size_t *peaks = t->memory.peaks;
    printf("rank 0 held at most %zu bytes on the device: parameters %zu, "
           "buckets %zu, gradients %zu, comm %zu, activations %zu\n",
           t->memory.peak_total, peaks[MEMORY_PARAMETERS],
           peaks[MEMORY_BUCKETS], peaks[MEMORY_GRADIENTS],
           peaks[MEMORY_COMM], peaks[MEMORY_ACTIVATIONS]);
    printf("and %zu bytes in host memory: optimizer %zu, staging %zu\n",
           t->memory.host_peak_total, peaks[MEMORY_HOST_OPTIMIZER],
           peaks[MEMORY_HOST_STAGING]);
    printf("rank 0 copied %" PRIu64 " bytes a step down and %" PRIu64
           " up\n", per_step(t->traffic.to_host, c),
           per_step(t->traffic.to_device, c));
    /* The device layer's own clock says how long the program waited for
     * copies to land: down during backward (and at the update's start),
     * up during the update. */
    const double ms = 1e3 / (double)c->steps;
    printf("rank 0's step: forward %.2f ms, backward and gradients down "
           "%.2f ms, update %.2f ms; of these, waiting for copies down "
           "%.2f ms and up %.2f ms\n", t->times.forward * ms,
           t->times.backward * ms, t->times.update * ms,
           t->traffic.waited_to_host * ms, t->traffic.waited_to_device * ms);
}

/* ---- The run ----------------------------------------------------------- */

/* The device, or the reason why not, said once; every rank ends with
 * status 2 when any could not open it. A cpu device larger than this
 * machine's memory is a mistake, not a small GPU. */
static void open_device(const run_config *c)
{
    char error[256] = "";
    int failed = 0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const double physical = pages > 0 && page > 0
                                ? (double)pages * (double)page : 0;
    if (strcmp(c->backend, "cpu") == 0 && physical > 0 &&
        (double)c->device_memory > physical) {
        snprintf(error, sizeof error, "--device-memory %zu bytes is more "
                 "than this machine's memory (%.0f bytes): a cpu device "
                 "plays a small GPU inside it", c->device_memory, physical);
        failed = 1;
    } else
        failed = device_open(c->backend, c->device_memory, c->rank, error,
                             sizeof error) != 0;
    /* The cuda backend allocates and copies on a GPU, but this driver's
     * layers are the CPU's code (common/mlp.h), which cannot read a GPU's
     * memory: said at once rather than found by a crash. */
    if (!failed && device_backend_in_use() == DEVICE_CUDA) {
        snprintf(error, sizeof error, "--backend cuda: the device layer "
                 "opened the GPU, but the model's layers run on the CPU "
                 "only (common/mlp.h): train with --backend cpu");
        failed = 1;
    }
    mpi_exit_if_any(failed, "train_offload", error);
}

/* The model, its activations on the device: a device too small even for
 * them is refused here, with the device's line, once. */
static void create_model(const run_config *c, const dataset *train_set,
                         mlp *model)
{
    char error[256];
    mlp_config shape = { train_set->features, train_set->classes, c->hidden,
                         c->width, ACTIVATION_RELU };
    int failed = mlp_create_without_storage(model, &shape, c->local_batch,
                                            error, sizeof error) != 0;
    char why[512];
    snprintf(why, sizeof why, "%s%s", memory_ledger_last_error()[0]
                                          ? "the activations do not fit the "
                                            "device: " : "",
             memory_ledger_last_error()[0] ? memory_ledger_last_error()
                                           : error);
    mpi_exit_if_any(failed, "train_offload", why);
}

/* Allocates and fills the state (with offload, or lesson 06's stage 0
 * without); if the device refuses on any rank, every rank that was
 * refused says why (its own line: rank, what was asked, what was free)
 * and all end with status 2. */
static void allocate_state(const run_config *c, trainer *t)
{
    device_name_host_code(c->no_offload ? NULL : hook_allocate);
    bool refused = c->no_offload ? zero_allocate(&t->zero) != 0
                                 : offload_allocate(&t->offload) != 0;
    device_name_host_code(NULL);
    char why[512];
    snprintf(why, sizeof why, "%s: %s",
             c->no_offload ? "without offload, the model state does not "
                             "fit the device"
                           : "the offloaded state does not fit",
             memory_ledger_last_error());
    mpi_exit_if_any_each_says(refused, "train_offload", why);
    if (c->no_offload)
        zero_initialize(&t->zero, c->seed);
    else
        offload_initialize(&t->offload, c->seed);
}

/* The training run; the report goes to c->out. */
static void train(const run_config *c, const dataset *train_set,
                  const dataset *held, FILE *report, trainer *t)
{
    const train_steps steps = {
        .context = t,
        .shard = train_shard_interleaved, .shard_name = "the shard of the batch",
        .compute = forward_backward,
        /* Marks with the TODOs whose code runs in them: a crash there
         * is said to be in the student's code, not in given code. */
        .compute_mark = "forward and backward, with TODO 4's gradients "
                        "down (offload.c)",
        .synchronise = NULL,
        .update = update,
        .update_mark = "TODOs 5-6: offload_update",
        .classify = classify,
        .parameters = parameters,
        .report_lines = report_lines,
        .summary_keys = summary_keys,
        .parameter_count = parameter_count(t),
        .timed_work = "forward, backward and the update",
    };
    const train_setup setup = { c->steps, c->local_batch, train_set, held,
                                c->rank, c->ranks, report, c->out };
    train_run_or_exit("train_offload", &setup, &steps);
}

/* The flags, parsed by every rank alike; bad ones end every rank with
 * status 2 (rank 0 says why). */
static void read_flags(run_config *c, int *argc, char ***argv)
{
    const cli_option options[] = {
        { "backend", CLI_STRING, &c->backend, "the device: cpu (an arena "
          "that behaves like a small GPU) or cuda", 0, 0 },
        { "device-memory", CLI_SIZE, &c->device_memory, "bytes of device "
          "memory each rank may hold", 1, 1e15 },
        { "no-offload", CLI_FLAG, &c->no_offload, "keep the optimizer on "
          "the device too (16 bytes a parameter)", 0, 0 },
        { "dpu", CLI_SIZE, &c->dpu, "delayed parameter update after this "
          "many warm-up steps (TODO 6; 0: none)", 0, 1e7 },
        TRAIN_RUN_OPTIONS(*c),
    };
    const cli_spec spec = { "train_offload", "lesson 07: mixed-precision "
                            "training with ZeRO-Offload", options,
                            sizeof options / sizeof options[0] };
    mpi_start_or_exit(argc, argv, &spec, &c->rank, &c->ranks);
    mpi_exit_if_any(c->no_offload && c->dpu > 0, "train_offload",
                    "--dpu delays the host's update: it needs offload");
}

int main(int argc, char **argv)
{
    run_config c = { .steps = 300, .local_batch = 32, .samples = 8192,
                     .held_out = 2048, .device_memory = (size_t)1 << 30,
                     .hidden = 2, .width = 128, .features = 64,
                     .classes = 10, .learning_rate = 1e-3, .seed = 1,
                     .backend = "cpu" };
    read_flags(&c, &argc, &argv);
    FILE *report = mpi_report_open_or_exit("train_offload", c.out, c.rank);
    /* The data first: it lives in the host's memory, outside the device
     * (made through the ledger a piece at a time, before the cap). */
    dataset train_set = { 0 }, held = { 0 };
    train_generate_or_exit("train_offload", c.samples, c.held_out,
                           c.features, c.classes, c.seed, &train_set, &held);
    open_device(&c);
    /* Without offload, all of it is lesson 06's given stage 0 on the
     * device's memory, read and written in place from start to end (no
     * code of yours runs): the device's memory stays open throughout. */
    if (c.no_offload)
        device_access_begin();
    trainer t = { .config = &c };
    create_model(&c, &train_set, &t.model);

    const adamw_config adamw = { (float)c.learning_rate, 0.9f, 0.999f, 1e-8f,
                                 (float)c.weight_decay };
    ledger_watch_start_threads();
    /* From here on your code runs: behind the boundary when graded. */
    train_enter_boundary_or_exit("train_offload", report, c.out, c.rank,
                                 (const char *const[]){ "master", NULL });
    if (c.no_offload) {
        zero_create(&t.zero, 0, false, &t.model, &adamw);
        t.zero.program = "train_offload";
    } else
        offload_create(&t.offload, &t.model, &adamw,
                       c.dpu > 0 ? (long)c.dpu : -1);
    ledger_watch_start(&t.memory, true);
    allocate_state(&c, &t);
    const zero_state *z = c.no_offload ? &t.zero : &t.offload.zero;
    if (c.rank == 0)
        printf("train_offload: %s on %d rank%s x %zu samples a step, %zu "
               "parameters in %d layers, a %s device of %zu bytes a rank%s\n",
               c.no_offload ? "everything on the device"
                            : "ZeRO-Offload (the optimizer on the host)",
               c.ranks, c.ranks == 1 ? "" : "s", c.local_batch, z->total,
               z->layer_count, device_backend_name(), c.device_memory,
               c.dpu > 0 ? ", delayed update after warm-up" : "");
    train(&c, &train_set, &held, report, &t);
    if (c.rank == 0)
        print_totals(&t);
    free(t.widened);
    if (c.no_offload)
        zero_destroy(&t.zero);
    else
        offload_destroy(&t.offload);
    mlp_free(&t.model);
    train_data_free(&train_set);
    if (c.no_offload)
        device_access_end();
    char close_error[DEVICE_ERROR_LEN];
    if (device_close(close_error, sizeof close_error) != 0)
        fprintf(stderr, "train_offload: rank %d: %s\n", c.rank, close_error);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
