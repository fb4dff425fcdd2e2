/* Lesson 07's producer (tests/harness/producer.h): runs your CPU Adam on
 * the tests' cases and writes what it computed, together with what the
 * given callback saw of how it ran. It decides nothing; the tests
 * (tests/test_07-offload.c) do. The inputs are generated here and there
 * from the seeds of 07-offload.h.
 *   tile K FIRST LAST     cpu_adam_tile, steps 1 .. CASE_STEPS, on elements
 *                         [o, o + n) of buffers of CASE_ROOM + n +
 *                         CASE_ROOM elements, n = case_lengths[K], for
 *                         each offset o = FIRST .. LAST
 *   update K FIRST LAST   cpu_adam_update on the same, given the
 *                         pointers master + o, m + o, ... and count n; at
 *                         step 2 with no callback (tile_done NULL), at the
 *                         others with one that notes each tile; for the
 *                         longest length, then one step on WHOLE_TILES
 *                         tiles exactly, its tiles noted (tiles-whole)
 *   instructions          cpu_adam_tile, step 1, on INSTRUCTION_LENGTHS
 *                         elements, each call a counted region
 *                         (producer.h): the instructions it executed
 *   threads               cpu_adam_update, step 1, THREADS_CASE_LENGTH
 *                         elements, with the callback that watches the
 *                         threads (below)
 * tile and update write, for each offset o, the whole buffers as the
 * steps left them: master-o, m-o, v-o, params-o (and grads-o, which must
 * only be read); update also tiles-o, three uint64 per callback (step,
 * begin, end), begin and end counted from the pointers it was given.
 *
 * threads: before the update, an OpenMP region of the producer's own notes
 * each thread's CPU time (starts.bin, thread_start records). Then each
 * callback notes, in the order callbacks begin (notes.bin, tile_note
 * records, and count.bin, one uint64: how many callbacks there were): the
 * tile, which thread called, that thread's CPU time, and how many sampled
 * parameters had been written by then; and it copies the tile's outputs
 * as they are at that moment (seen-master, seen-m, seen-v, seen-params),
 * as the offload driver would start copying them to the device. Then the
 * parameters as the update left them (params). The tests run it with
 * OMP_WAIT_POLICY=passive: a waiting thread sleeps, so its CPU time counts
 * only work. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "07-offload.h"
#include "cpu_adam.h"
#include "producer.h"
#include "signal_chain.h"

/* A case's buffers (07-offload.h): (room) elements each, 64-byte aligned. */
static void *aligned_or_exit(size_t count, size_t size, const char *what)
{
    size_t bytes = (count * size + 63) / 64 * 64;
    void *memory = aligned_alloc(64, bytes > 0 ? bytes : 64);
    if (memory == NULL) {
        fprintf(stderr, "producer: out of memory for %s (%zu bytes)\n", what,
                bytes);
        exit(1);
    }
    return memory;
}

static buffers buffers_alloc(size_t room)
{
    buffers b = { room, aligned_or_exit(room, sizeof(float), "master"),
                  aligned_or_exit(room, sizeof(float), "m"),
                  aligned_or_exit(room, sizeof(float), "v"),
                  aligned_or_exit(room, sizeof(bf16), "grads"),
                  aligned_or_exit(room, sizeof(bf16), "params") };
    return b;
}

/* ARG k, at most `high`; a bad command line exits with status 2, as
 * producer_main does for its own checks. */
static size_t arg_at_most(int k, size_t high, const char *what)
{
    size_t value = producer_arg(k);
    if (value > high) {
        fprintf(stderr, "producer: %s %zu is over %zu\n", what, value, high);
        exit(2);
    }
    return value;
}

static void produce_buffers(const buffers *b, size_t offset)
{
    char name[48];
    snprintf(name, sizeof name, "master-%zu", offset);
    produce(name, b->master, sizeof(float), b->room);
    snprintf(name, sizeof name, "m-%zu", offset);
    produce(name, b->m, sizeof(float), b->room);
    snprintf(name, sizeof name, "v-%zu", offset);
    produce(name, b->v, sizeof(float), b->room);
    snprintf(name, sizeof name, "grads-%zu", offset);
    produce(name, b->grads, sizeof(bf16), b->room);
    snprintf(name, sizeof name, "params-%zu", offset);
    produce(name, b->params, sizeof(bf16), b->room);
}

/* ---- tile and update ---- */

/* The tiles of update's steps: (step, begin, end) each. */
typedef struct {
    uint64_t *entries;
    size_t count, capacity;
    int step;
    atomic_flag busy;
} tile_list;

static void note_tile(void *context, size_t begin, size_t end)
{
    tile_list *list = context;
    /* Callbacks come from several threads at once. */
    while (atomic_flag_test_and_set_explicit(&list->busy,
                                             memory_order_acquire))
        ;
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 256;
        uint64_t *grown = realloc(list->entries, 3 * capacity *
                                  sizeof *grown);
        if (grown == NULL) {
            fprintf(stderr, "producer: out of memory for the tile list\n");
            exit(1);
        }
        list->entries = grown;
        list->capacity = capacity;
    }
    uint64_t *entry = &list->entries[3 * list->count++];
    entry[0] = (uint64_t)list->step;
    entry[1] = begin;
    entry[2] = end;
    atomic_flag_clear_explicit(&list->busy, memory_order_release);
}

static void run_case(bool whole_update)
{
    size_t k = arg_at_most(0, case_length_count - 1, "K");
    size_t first = arg_at_most(1, CASE_MAX_OFFSET, "FIRST");
    size_t last = arg_at_most(2, CASE_MAX_OFFSET, "LAST");
    const size_t n = case_lengths[k];
    const uint64_t seed = case_seed((int)k);
    buffers b = buffers_alloc(CASE_ROOM + n + CASE_ROOM);
    omp_set_dynamic(0);
    for (size_t o = first; o <= last; o++) {
        tile_list tiles = { NULL, 0, 0, 0, ATOMIC_FLAG_INIT };
        case_fill_state(seed, b.room, b.master, b.m, b.v, b.params);
        for (int step = 1; step <= CASE_STEPS; step++) {
            case_fill_grads(seed, step, b.room, b.grads);
            const cpu_adam_step constants =
                cpu_adam_step_of(&case_config, step, CASE_SCALE);
            if (whole_update) {
                tiles.step = step;
                cpu_adam_update(&constants, b.master + o, b.m + o, b.v + o,
                                b.grads + o, b.params + o, n,
                                step == 2 ? NULL : note_tile,
                                step == 2 ? NULL : &tiles);
            } else {
                cpu_adam_tile(&constants, b.master, b.m, b.v, b.grads,
                              b.params, o, o + n);
            }
        }
        produce_buffers(&b, o);
        if (whole_update) {
            char name[48];
            snprintf(name, sizeof name, "tiles-%zu", o);
            produce(name, tiles.entries, 3 * sizeof(uint64_t), tiles.count);
            free(tiles.entries);
        }
    }
    if (whole_update && n > CASE_EVERY_OFFSET) {
        tile_list tiles = { NULL, 0, 0, 1, ATOMIC_FLAG_INIT };
        const cpu_adam_step constants =
            cpu_adam_step_of(&case_config, 1, CASE_SCALE);
        cpu_adam_update(&constants, b.master, b.m, b.v, b.grads, b.params,
                        (size_t)WHOLE_TILES * CPU_ADAM_TILE, note_tile,
                        &tiles);
        produce("tiles-whole", tiles.entries, 3 * sizeof(uint64_t),
                tiles.count);
        free(tiles.entries);
    }
    buffers_free(&b);
}

static void run_tile(void)
{
    run_case(false);
}

static void run_update(void)
{
    run_case(true);
}

/* ---- threads ---- */

static uint64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int64_t system_thread(void)
{
    return (int64_t)syscall(SYS_gettid);
}

/* What the watching callback needs. */
typedef struct {
    const buffers *b;
    float *seen_master, *seen_m, *seen_v;
    bf16 *seen_params;
    tile_note *notes;
    atomic_ulong begun;
} watch;

/* How many of the sampled parameters hold a value by now. Other threads
 * write parameters while this reads them, on purpose (it watches them):
 * volatile, so that every sample is read now, from memory, and left out
 * of ThreadSanitizer's view (make grade's race pass runs this producer),
 * which would take the watch for a race of the student's code. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize)
__attribute__((no_sanitize("thread")))
#endif
#endif
__attribute__((noinline))
static uint64_t written_samples(const buffers *b)
{
    const volatile bf16 *params = b->params;
    uint64_t written = 0;
    for (size_t i = 0; i < b->room; i += SAMPLE_STRIDE)
        written += params[i] != PARAM_UNWRITTEN;
    return written;
}

/* Notes a tile (tile_note) and copies its outputs, in the order callbacks
 * begin. Its own work, the copy and the scan, is timed apart, so that the
 * tests can leave it out of the thread's CPU time. */
static void watch_tile(void *context, size_t begin, size_t end)
{
    watch *w = context;
    uint64_t cpu_in = thread_cpu_ns();
    unsigned long order = atomic_fetch_add(&w->begun, 1);
    const buffers *b = w->b;
    size_t n = begin <= end && end <= b->room ? end - begin : 0;
    memcpy(w->seen_master + begin, b->master + begin, n * sizeof(float));
    memcpy(w->seen_m + begin, b->m + begin, n * sizeof(float));
    memcpy(w->seen_v + begin, b->v + begin, n * sizeof(float));
    memcpy(w->seen_params + begin, b->params + begin, n * sizeof(bf16));
    uint64_t written = written_samples(b);
    unsigned long begun_after = atomic_load(&w->begun);
    if (order < TILE_LOG_CAPACITY) {
        tile_note note = { order, begin, end, omp_get_thread_num(),
                           system_thread(), cpu_in, thread_cpu_ns(),
                           written, begun_after };
        w->notes[order] = note;
    }
}

/* ---- side by side (07-offload.h's rendezvous_note) ---- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RENDEZVOUS_ARMED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RENDEZVOUS_ARMED 0
#endif
#endif
#ifndef RENDEZVOUS_ARMED
#define RENDEZVOUS_ARMED 1
#endif

/* The protected pages, and what the handler has seen. */
static uintptr_t guard_begin, guard_end;
static atomic_bool guard_open = true;
static atomic_long first_reader;       /* its system thread id; 0: none */
static atomic_bool second_reader_came;
static rendezvous_note rendezvous = { RENDEZVOUS_OUTCOME_UNARMED, -1, 0 };
static struct sigaction previous_segv, previous_bus;

static void open_guard(void)
{
    if (!atomic_exchange(&guard_open, true))
        mprotect((void *)guard_begin, guard_end - guard_begin,
                 PROT_READ | PROT_WRITE);
}

/* Async-signal-safe, all of it: atomics, syscall, nanosleep, mprotect
 * (a system call on the systems the toolkit runs on), and the OpenMP
 * runtime's thread-local queries. */
static void hold_first_reader(int signal_number, siginfo_t *info,
                              void *context)
{
    const uintptr_t at = (uintptr_t)info->si_addr;
    if (at < guard_begin || at >= guard_end) {
        /* Not ours: a fault of the student's code. */
        signal_chain(signal_number == SIGBUS ? &previous_bus
                                             : &previous_segv,
                     signal_number, info, context);
        return;
    }
    if (atomic_load(&guard_open))
        return;  /* raced with the opening: retried, the read passes */
    const long me = (long)syscall(SYS_gettid);
    long none = 0;
    if (!atomic_compare_exchange_strong(&first_reader, &none, me)) {
        if (none != me)
            atomic_store(&second_reader_came, true);
        open_guard();
        return;
    }
    if (!omp_in_parallel() || omp_get_num_threads() < 2) {
        rendezvous.outcome = RENDEZVOUS_OUTCOME_OUTSIDE;
        open_guard();
        return;
    }
    rendezvous.held_omp_thread = omp_get_thread_num();
    /* Looks again after 1 ms, then less and less often, up to every
     * 64 ms: a held thread that is not let go soon spends next to no CPU
     * time looking (the tests count each thread's). */
    int64_t held = 0, tick_ms = 1;
    while (!atomic_load(&second_reader_came) && held < RENDEZVOUS_MS) {
        const struct timespec tick = { 0, tick_ms * 1000000 };
        nanosleep(&tick, NULL);
        held += tick_ms;
        if (tick_ms < 64)
            tick_ms *= 2;
    }
    rendezvous.held_ms = held;
    rendezvous.outcome = atomic_load(&second_reader_came)
                             ? RENDEZVOUS_OUTCOME_MET
                             : RENDEZVOUS_OUTCOME_ALONE;
    open_guard();
}

/* Read-protects the whole pages of grads[0, n) and holds the first reader;
 * in the sanitized builds, nothing. */
static void arm_rendezvous(const bf16 *grads, size_t n)
{
    if (!RENDEZVOUS_ARMED)
        return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    guard_begin = ((uintptr_t)grads + page - 1) / page * page;
    guard_end = ((uintptr_t)(grads + n)) / page * page;
    if (guard_end <= guard_begin)
        return;
    if (signal_chain_install(hold_first_reader, &previous_segv,
                             &previous_bus) != 0 ||
        mprotect((void *)guard_begin, guard_end - guard_begin,
                 PROT_NONE) != 0) {
        perror("producer: the gradients' guard");
        exit(1);
    }
    rendezvous.outcome = RENDEZVOUS_OUTCOME_OUTSIDE;  /* until a read */
    atomic_store(&guard_open, false);
}

static void disarm_rendezvous(void)
{
    if (!RENDEZVOUS_ARMED || guard_end <= guard_begin)
        return;
    open_guard();
    sigaction(SIGSEGV, &previous_segv, NULL);
    sigaction(SIGBUS, &previous_bus, NULL);
}

static void run_threads(void)
{
    const size_t n = THREADS_CASE_LENGTH;
    buffers b = buffers_alloc(n);
    case_fill_state(THREADS_CASE_SEED, n, b.master, b.m, b.v, NULL);
    case_fill_grads(THREADS_CASE_SEED, 1, n, b.grads);
    for (size_t i = 0; i < n; i++)
        b.params[i] = PARAM_UNWRITTEN;
    watch w = { &b, producer_alloc(n, sizeof(float), "seen master"),
                producer_alloc(n, sizeof(float), "seen m"),
                producer_alloc(n, sizeof(float), "seen v"),
                producer_alloc(n, sizeof(bf16), "seen params"),
                producer_alloc(TILE_LOG_CAPACITY, sizeof(tile_note), "notes"),
                0 };
    /* Touched before the update, so that no page fault lands in it. */
    for (size_t i = 0; i < n; i++)
        w.seen_params[i] = PARAM_UNWRITTEN;
    omp_set_dynamic(0);
    int threads = omp_get_max_threads();
    thread_start *starts = producer_alloc((size_t)threads, sizeof *starts,
                                          "starts");
    #pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num();
        if (t < threads) {
            starts[t].system_thread = system_thread();
            starts[t].cpu_ns = thread_cpu_ns();
        }
    }
    const cpu_adam_step constants = cpu_adam_step_of(&case_config, 1,
                                                     CASE_SCALE);

    arm_rendezvous(b.grads, n);
    cpu_adam_update(&constants, b.master, b.m, b.v, b.grads, b.params, n,
                    watch_tile, &w);
    disarm_rendezvous();

    uint64_t count = atomic_load(&w.begun);
    size_t noted = count < TILE_LOG_CAPACITY ? (size_t)count
                                             : TILE_LOG_CAPACITY;
    produce("starts", starts, sizeof *starts, (size_t)threads);
    produce("count", &count, sizeof count, 1);
    produce("notes", w.notes, sizeof(tile_note), noted);
    produce("seen-master", w.seen_master, sizeof(float), n);
    produce("seen-m", w.seen_m, sizeof(float), n);
    produce("seen-v", w.seen_v, sizeof(float), n);
    produce("seen-params", w.seen_params, sizeof(bf16), n);
    produce("params", b.params, sizeof(bf16), n);
    produce("rendezvous", &rendezvous, sizeof rendezvous, 1);
    free(w.seen_master);
    free(w.seen_m);
    free(w.seen_v);
    free(w.seen_params);
    free(w.notes);
    free(starts);
    buffers_free(&b);
}

/* ---- instructions ---- */

static void run_instructions(void)
{
    const size_t lengths[] = INSTRUCTION_LENGTHS;
    const size_t room = lengths[INSTRUCTION_LENGTH_COUNT - 1];
    buffers b = buffers_alloc(room);
    const uint64_t seed = case_seed(0);
    const cpu_adam_step constants = cpu_adam_step_of(&case_config, 1,
                                                     CASE_SCALE);
    for (int k = 0; k < INSTRUCTION_LENGTH_COUNT; k++) {
        case_fill_state(seed, room, b.master, b.m, b.v, b.params);
        case_fill_grads(seed, 1, room, b.grads);
        producer_region();
        cpu_adam_tile(&constants, b.master, b.m, b.v, b.grads, b.params, 0,
                      lengths[k]);
        producer_region();
    }
    buffers_free(&b);
}

int main(int argc, char **argv)
{
    static const producer_case cases[] = {
        { "tile", 3, run_tile, false },
        { "update", 3, run_update, false },
        { "instructions", 0, run_instructions, true },
        { "threads", 0, run_threads, false },
    };
    return producer_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
