/* Lesson 07's given helpers (offload.h): setting up a rank's offload
 * state, filling it with the initial model, freeing it, a host thread for
 * the delayed update, and stopping the job on an error. You do not need
 * to change this file. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check_mpi.h"
#include "device.h"
#include "memory_ledger.h"
#include "offload.h"
#include "rng.h"
#include "signal_chain.h"
#include "timer.h"
#include "zero_stages.h"

/* Prints "train_offload: rank R: WHY" and ends the job (every rank). */
_Noreturn void offload_fail(const offload_state *o, const char *why)
{
    char message[DEVICE_ERROR_LEN + 64];
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
    char message[DEVICE_ERROR_LEN + 64];
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
    o->zero.program = "train_offload";
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

/* What offload_allocate must put in host memory, in blocks of
 * device_host_alloc (one each, or parts of a larger one), none over
 * another: checked before anything writes them, so that a buffer put on
 * the device, or one too small, is named here, not by a fault or a free
 * much later. */
static void check_host_placement(const offload_state *o)
{
    const size_t own = o->own_count;
    const struct { const void *start; size_t bytes; const char *what; } host[] = {
        { o->master, own * sizeof(float), "o->master (the fp32 master "
                                          "weights)" },
        { o->m, own * sizeof(float), "o->m (Adam's first moment)" },
        { o->v, own * sizeof(float), "o->v (Adam's second moment)" },
        { o->host_grads[0], own * sizeof(bf16), "o->host_grads[0] (the "
                                                "gradients that come down)" },
        { o->host_params, own * sizeof(bf16), "o->host_params (the "
                                              "parameters that go up)" },
        /* The delayed update's second set of gradients. */
        { o->host_grads[1], own * sizeof(bf16), "o->host_grads[1] (the "
                                                "delayed update's second "
                                                "set of gradients)" },
    };
    const size_t count = sizeof host / sizeof host[0] - (o->delay_from < 0);
    char why[560];
    for (size_t k = 0; k < count && own > 0; k++) {
        if (device_host_block_of(host[k].start, host[k].bytes) != NULL)
            continue;
        const bool partly = device_host_block_of(host[k].start, 1) != NULL;
        const void *arena;
        size_t arena_bytes;
        device_arena_range(&arena, &arena_bytes);
        const uintptr_t at = (uintptr_t)host[k].start;
        const char *where =
            partly ? "in a host block too small for it (it runs past the "
                     "block's end)"
            : host[k].start == NULL ? "NULL, never allocated"
            : at >= (uintptr_t)arena && at - (uintptr_t)arena < arena_bytes
                ? "in device memory"
                : "outside every block of device_host_alloc (memory of "
                  "malloc or calloc is not one: the device copies to and "
                  "from those blocks only)";
        snprintf(why, sizeof why, "offload_allocate (TODO 3) left %s %s: it "
                 "lives on the host (the CPU Adam reads and writes it "
                 "there), S = %zu elements in a block of device_host_alloc "
                 "(MEMORY_HOST_OPTIMIZER for the optimizer's state, "
                 "MEMORY_HOST_STAGING for what is copied)", host[k].what,
                 where, own);
        offload_fail(o, why);
    }
    for (size_t a = 0; a < count && own > 0; a++)
        for (size_t b = a + 1; b < count; b++) {
            const uintptr_t a0 = (uintptr_t)host[a].start,
                            b0 = (uintptr_t)host[b].start;
            if (a0 < b0 + host[b].bytes && b0 < a0 + host[a].bytes) {
                snprintf(why, sizeof why, "offload_allocate (TODO 3) left "
                         "%s over %s: each holds S = %zu elements of its "
                         "own (parts of one block must not overlap)",
                         host[b].what, host[a].what, own);
                offload_fail(o, why);
            }
        }
}

void offload_initialize(offload_state *o, uint64_t seed)
{
    check_host_placement(o);
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

/* Frees the host blocks that hold the buffers offload_allocate made,
 * each once: a buffer may be a block of its own or a part of a larger
 * one (m and v after master, in one block of 3S floats). A pointer in no
 * host block goes to device_host_free as it is, which says what it is. */
static void free_host_buffers(offload_state *o)
{
    void *buffers[] = { o->master, o->m, o->v, o->host_grads[0],
                        o->host_grads[1], o->host_params };
    enum { BUFFERS = sizeof buffers / sizeof buffers[0] };
    void *blocks[BUFFERS];
    /* Every block first: a freed block holds nothing any more. */
    for (int k = 0; k < BUFFERS; k++) {
        void *block = buffers[k] == NULL
                          ? NULL : device_host_block_of(buffers[k], 0);
        blocks[k] = block != NULL ? block : buffers[k];
    }
    for (int k = 0; k < BUFFERS; k++) {
        bool freed = false;
        for (int j = 0; j < k && !freed; j++)
            freed = blocks[j] == blocks[k];
        if (!freed)
            device_host_free(blocks[k]);
    }
}

void offload_destroy(offload_state *o)
{
    device_free(o->device_params);
    free_host_buffers(o);
    for (int k = 0; k < 2; k++) {
        /* A free slot holds no block: a pointer left behind is one
         * finish_landing freed already, and freeing it again would touch
         * memory the device no longer has. */
        if (o->landing[k] != NULL && o->landing_layer[k] < 0) {
            char why[256];
            snprintf(why, sizeof why, "at the end, landing slot %d is free "
                     "(o->landing_layer[%d] is -1) but o->landing[%d] still "
                     "points at a block. Hint: TODO 4: finish_landing frees "
                     "the slot's block and sets o->landing[slot] to NULL",
                     k, k, k);
            offload_fail(o, why);
        }
        device_free(o->landing[k]);
    }
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
    /* The slot must be free: a busy one still holds a layer's part on
     * its way down, and taking it would lose that block and reuse its
     * copy while it is pending. */
    if (slot < 0 || slot > 1 || o->landing_layer[slot] >= 0) {
        char why[256];
        if (slot < 0 || slot > 1)
            snprintf(why, sizeof why, "offload_landing: slot %d: there are "
                     "two, 0 and 1. Hint: TODO 4", slot);
        else
            snprintf(why, sizeof why, "offload_landing: slot %d still "
                     "holds layer %d, whose copy down is not finished. "
                     "Hint: TODO 4: take the free slot (landing_layer -1), "
                     "or finish this one first (finish_landing)", slot,
                     o->landing_layer[slot]);
        offload_fail(o, why);
    }
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
    /* The loop's steps count from 0: a negative one was never set (the
     * delayed update's o->update_step starts at -1). */
    if (step < 0) {
        char why[256];
        snprintf(why, sizeof why, "offload_adam_step got step %ld: the "
                 "training loop's steps count from 0. Hint: TODO 6: the "
                 "delayed update's task takes the step it was started for, "
                 "o->update_step, set before host_task_start", step);
        offload_fail(o, why);
    }
    return cpu_adam_step_of(&o->zero.adamw, step + 1,
                            1.0f / (float)o->zero.ranks);
}

/* ---- A host thread for the delayed update ------------------------------
 *
 * What tells an overlapped update from a synchronous one, which gives the
 * same bits. In an overlapped update the master weights change while the
 * host task's function runs, on the task's thread (or the threads it
 * starts, OpenMP's), and nowhere else: not on the caller's thread before
 * it starts the task in the same step, and not on the caller's thread
 * while the task is in flight, from host_task_start to host_task_wait,
 * whether before the task's function begins, while it runs, or after it
 * has returned. A synchronous update with a stand-in task breaks one of
 * these: its CPU Adam ran on the caller before the start, or after it
 * (beside the stand-in, or once the stand-in had returned), and a
 * stand-in that changes nothing, or puts back what it changed, leaves the
 * weights as it found them.
 *
 * Given code looks at each of those moments, from where it happens. A
 * fingerprint of a sample of the master weights is taken
 *   R  at the start of a step with no task in flight (the driver calls
 *      host_task_watch_step), and at each task's wait, for the next task;
 *   S  in host_task_start, on the caller's thread, before the task's
 *      thread exists;
 *   B  and E on the task's own thread, just before and just after its
 *      function runs;
 *   W  in host_task_wait, on the caller's thread, after the join.
 * R != S: the caller changed them before starting the task. S != B or
 * E != W: the caller changed them in flight, around the task's run.
 * B == E: the task's function did not change them. What fingerprints
 * cannot see is the caller writing while the task's function runs. For
 * that, a few whole pages inside the master weights are made read-only at
 * the start: the first write to each faults, and the handler notes, on
 * the writing thread, whether it is the caller's thread and whether the
 * task's function is running, then gives the page back. A page first
 * written by the caller's thread, or by any thread while the task's
 * function is not running, is a change in flight.
 *
 * Not caught: a caller that leaves the writing to other threads of its
 * own (OpenMP's, its own thread writing none of the watched pages), or a
 * task that first writes every page and then waits while the caller's
 * thread runs the update, or one that copies in results the caller
 * computed elsewhere (4S bytes of fp32 that the memory checks would have
 * to miss): deliberate evasions, which the weights, the memory and the
 * traffic do not betray either.
 *
 * The watch's state is file-static, so that the code it watches has no
 * name for it. One task is in flight at a time in this lesson. */
static host_task_watch watch;

/* The fingerprint's sample: SAMPLE_RUNS runs of RUN consecutive master
 * weights (one 64-byte line each), evenly spaced from a first element
 * drawn afresh for each task. Hashed whole, 3.2 million master weights
 * took some 10 ms twice a step on the main thread, more than the CPU Adam
 * they watch; 128 lines cost one cache miss each. An update changes
 * (nearly) every master weight, so the sample tells whether one ran, and
 * a caller that updated a part of the slice (a tenth of it) is in the
 * sample but for a chance of one in 10^5. */
enum { SAMPLE_RUNS = 128, RUN = 16 };
static const float *sampled_master;    /* the slice the watch looks at */
static size_t sampled_count, sample_first, sample_stride;

static rng_t draws;
static bool draws_seeded;

static uint64_t draw(uint64_t below)
{
    if (!draws_seeded) {
        draws = rng_seeded((uint64_t)(timer_now() * 1e9));
        draws_seeded = true;
    }
    return below > 0 ? rng_next_u64(&draws) % below : 0;
}

/* Whether the slice has master weights to watch: none on a rank whose
 * slice is empty, nor before TODO 3 allocates them. */
static bool master_watchable(const offload_state *o)
{
    return o->master != NULL && o->own_count > 0;
}

/* Draws the sample for the next task, on o's slice. */
static void draw_sample(const offload_state *o)
{
    sampled_master = o->master;
    sampled_count = o->own_count;
    const size_t runs = sampled_count / RUN < SAMPLE_RUNS
                            ? sampled_count / RUN : SAMPLE_RUNS;
    if (runs == 0) {
        /* Fewer weights than a run: all of them. */
        sample_first = 0;
        sample_stride = RUN;
        return;
    }
    sample_stride = sampled_count / runs;
    sample_first = (size_t)draw(sample_stride - RUN + 1);
}

/* FNV-1a over the 32-bit words of the sample: a change of a sampled
 * weight changes it, but for a collision of one in 2^64. */
static uint64_t master_fingerprint(void)
{
    uint64_t hash = 14695981039346656037ull;
    for (size_t run = sample_first; run < sampled_count;
         run += sample_stride) {
        const size_t end = sampled_count - run < RUN ? sampled_count
                                                     : run + RUN;
        for (size_t i = run; i < end; i++) {
            uint32_t word;
            memcpy(&word, &sampled_master[i], sizeof word);
            hash = (hash ^ word) * 1099511628211ull;
        }
    }
    return hash;
}

/* The fingerprints of the task in flight (and R, for the next). B and E
 * are written on the task's thread; the join orders them before the
 * caller reads them. */
static uint64_t fingerprint_reference, fingerprint_start,
    fingerprint_begin, fingerprint_end;
static bool reference_taken, task_watched, changed_before_start;

/* ---- The watched pages ---- */

enum { WATCHED_PAGES = 8 };
enum { UNWRITTEN, BY_TASK, BY_CALLER, OUTSIDE_RUN };
static struct {
    unsigned char *start;
    atomic_int first_writer;
} watched[WATCHED_PAGES];
static atomic_size_t watched_count;
static size_t page_bytes;
static atomic_bool task_running;
static pthread_t caller_thread;
static struct sigaction previous_segv, previous_bus;
static bool handler_installed;

/* The one place the watch changes a page's protection: read-only for the
 * task's flight, or writable again. 0, or -1 with errno. */
static int protect_watched_page(unsigned char *page, int protection)
{
    return mprotect(page, page_bytes, protection);
}

/* Makes a watched page writable again; a page that stayed read-only
 * would fault on every write from now on, so a failure ends the program
 * (from the fault handler too: write and _exit are safe there). */
static void give_page_back(unsigned char *page)
{
    if (protect_watched_page(page, PROT_READ | PROT_WRITE) == 0)
        return;
    static const char line[] = "train_offload: the host task's watch could "
                               "not make a page of the master weights "
                               "writable again (mprotect failed)\n";
    if (write(STDERR_FILENO, line, sizeof line - 1) < 0) {
        /* Nothing more to say where stderr is gone. */
    }
    _exit(1);
}

/* A write to a watched page: who wrote it first, and the page back. Any
 * other fault goes to the handler that was there before (the device
 * layer's, MPI's, the system's). */
static void watched_page_fault(int signal_number, siginfo_t *info,
                               void *context)
{
    const uintptr_t at = (uintptr_t)info->si_addr;
    const size_t count = atomic_load(&watched_count);
    for (size_t k = 0; k < count; k++) {
        const uintptr_t page = (uintptr_t)watched[k].start;
        if (at < page || at - page >= page_bytes)
            continue;
        int writer = pthread_equal(pthread_self(), caller_thread)
                         ? BY_CALLER
                         : atomic_load(&task_running) ? BY_TASK
                                                      : OUTSIDE_RUN;
        int unwritten = UNWRITTEN;
        atomic_compare_exchange_strong(&watched[k].first_writer, &unwritten,
                                       writer);
        give_page_back(watched[k].start);
        return;
    }
    signal_chain(signal_number == SIGBUS ? &previous_bus : &previous_segv,
          signal_number, info, context);
}

static void install_page_handler(offload_state *o)
{
    if (handler_installed)
        return;
    long page = sysconf(_SC_PAGESIZE);
    page_bytes = page > 0 ? (size_t)page : 4096;
    if (signal_chain_install(watched_page_fault, &previous_segv,
                             &previous_bus) != 0)
        offload_fail(o, "host_task_start: sigaction failed for the watch "
                        "of the master weights");
    handler_installed = true;
}

/* Makes up to WATCHED_PAGES whole pages inside the slice's master weights
 * read-only, spread over it from a page drawn afresh: none where the
 * slice holds no whole page. */
static void watch_pages(offload_state *o)
{
    install_page_handler(o);
    const uintptr_t begin = (uintptr_t)o->master;
    const uintptr_t end = begin + o->own_count * sizeof *o->master;
    const uintptr_t first = (begin + page_bytes - 1) / page_bytes *
                            page_bytes;
    const size_t pages = end / page_bytes * page_bytes > first
                             ? (end / page_bytes * page_bytes - first) /
                                   page_bytes
                             : 0;
    const size_t count = pages < WATCHED_PAGES ? pages : WATCHED_PAGES;
    if (count == 0)
        return;
    const size_t stride = pages / count;
    const size_t offset = (size_t)draw(stride);
    caller_thread = pthread_self();
    for (size_t k = 0; k < count; k++) {
        watched[k].start =
            (unsigned char *)(first + (offset + k * stride) * page_bytes);
        atomic_store(&watched[k].first_writer, UNWRITTEN);
    }
    atomic_store(&watched_count, count);
    for (size_t k = 0; k < count; k++)
        if (protect_watched_page(watched[k].start, PROT_READ) != 0)
            offload_fail(o, "host_task_start: mprotect failed for the "
                            "watch of the master weights");
}

/* After the join: whether the caller's thread wrote a watched page while
 * the task was in flight, or any thread wrote one while the task's
 * function was not running; every page writable again. */
static bool pages_written_in_flight(void)
{
    bool caller_wrote = false;
    const size_t count = atomic_load(&watched_count);
    for (size_t k = 0; k < count; k++) {
        const int writer = atomic_load(&watched[k].first_writer);
        if (writer == BY_CALLER || writer == OUTSIDE_RUN)
            caller_wrote = true;
        if (writer == UNWRITTEN)
            give_page_back(watched[k].start);
    }
    atomic_store(&watched_count, 0);
    return caller_wrote;
}

host_task_watch host_task_watched(void)
{
    return watch;
}

void host_task_watch_step(const offload_state *o)
{
    if (watch.started != watch.waited || !master_watchable(o))
        return;
    draw_sample(o);
    fingerprint_reference = master_fingerprint();
    reference_taken = true;
}

/* The run's time is taken on its own thread: what the job cost there,
 * whether or not the caller was waiting for it meanwhile. So are the
 * fingerprints B and E around the run. */
static void *host_task_main(void *argument)
{
    host_task *task = argument;
    device_name_host_code("the delayed update's host task (lessons/"
                          "07-offload/offload.c, TODO 6)");
    if (task_watched)
        fingerprint_begin = master_fingerprint();
    atomic_store(&task_running, true);
    const double start = timer_now();
    task->run(task->context);
    task->run_seconds = timer_now() - start;
    atomic_store(&task_running, false);
    if (task_watched)
        fingerprint_end = master_fingerprint();
    return NULL;
}

void host_task_start(offload_state *o, host_task *task,
                     void (*run)(void *context), void *context)
{
    if (task->running)
        offload_fail(o, "host_task_start: the task is still running: "
                         "the last delayed update was never finished "
                         "(TODO 6: start a task only after "
                         "finish_delayed_update has waited for the one "
                         "before, host_task_wait; it does so only when "
                         "o->update_pending says an update is in flight: "
                         "was it set when that task started?)");
    task->run = run;
    task->context = context;
    /* Before the thread exists: nothing else writes master meanwhile. */
    task_watched = master_watchable(o);
    if (task_watched) {
        if (!reference_taken || sampled_master != o->master) {
            /* No reference in this step (the driver did not take one):
             * nothing to compare with. */
            draw_sample(o);
            fingerprint_reference = master_fingerprint();
        }
        fingerprint_start = master_fingerprint();
        changed_before_start = fingerprint_start != fingerprint_reference;
        watch_pages(o);
    }
    reference_taken = false;
    if (pthread_create(&task->thread, NULL, host_task_main, task) != 0)
        offload_fail(o, "host_task_start: no thread could be started");
    task->running = true;
    watch.started++;
}

void host_task_wait(offload_state *o, host_task *task)
{
    if (!task->running)
        offload_fail(o, "host_task_wait: no task is running: it was "
                     "waited for already, or never started. Hint: TODO 6: "
                     "each task host_task_start starts is waited for once, "
                     "in finish_delayed_update before its parameters go up "
                     "(a wait right after the start leaves nothing to wait "
                     "for there, and nothing overlapped)");
    const double start = timer_now();
    if (pthread_join(task->thread, NULL) != 0)
        offload_fail(o, "host_task_wait: the thread could not be joined");
    o->task_wait_seconds += timer_now() - start;
    /* Read after the join, which orders the thread's writes before it. */
    o->task_run_seconds += task->run_seconds;
    task->running = false;
    watch.waited++;
    if (!task_watched)
        return;
    const bool pages_in_flight = pages_written_in_flight();
    const uint64_t at_wait = master_fingerprint();
    watch.runs_watched++;
    if (fingerprint_end != fingerprint_begin)
        watch.runs_changing_master++;
    if (changed_before_start)
        watch.callers_before_start++;
    if (fingerprint_begin != fingerprint_start ||
        at_wait != fingerprint_end || pages_in_flight)
        watch.callers_in_flight++;
    task_watched = false;
    /* The next task's reference: from here to its start, only the caller
     * runs. */
    if (master_watchable(o)) {
        draw_sample(o);
        fingerprint_reference = master_fingerprint();
        reference_taken = true;
    }
}
