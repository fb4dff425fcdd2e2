/* Unit tests of the device layer's cpu backend (common/device.h): the
 * capacity is the ledger's cap, copies are real, an asynchronous copy's
 * destination is NaN until its wait, every byte is counted by direction
 * (from two threads at once too), and the bugs the arena exists to catch
 * stop the program with their line. Each test runs in a process of its
 * own (Check's fork mode), so each opens a fresh device. Every expected
 * value is exact: copies and counters involve no arithmetic that rounds. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device.h"
#include "harness.h"
#include "memory_ledger.h"
#include "rng.h"

enum { MIB = 1024 * 1024 };

static void open_cpu(size_t capacity, int rank)
{
    char error[256] = "";
    ck_assert_msg(device_open("cpu", capacity, rank, error, sizeof error) == 0,
                  "device_open(\"cpu\", %zu, %d) failed: %s", capacity, rank,
                  error);
}

/* n random bytes, none 0xff (so that a destination still poisoned can
 * never match them by chance). */
static void fill_bytes(unsigned char *bytes, size_t n, uint64_t seed)
{
    rng_t rng = rng_seeded(seed);
    for (size_t k = 0; k < n; k++)
        bytes[k] = (unsigned char)(rng_next_u64(&rng) % 255);
}

/* The first byte at which two buffers differ, or n. */
static size_t first_difference(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    for (size_t k = 0; k < n; k++)
        if (x[k] != y[k])
            return k;
    return n;
}

static void expect_traffic(uint64_t to_device, uint64_t to_host,
                           uint64_t copies_to_device, uint64_t copies_to_host,
                           const char *when)
{
    device_traffic t = device_traffic_total();
    ck_assert_msg(t.to_device == to_device && t.to_host == to_host &&
                  t.copies_to_device == copies_to_device &&
                  t.copies_to_host == copies_to_host, "%s: traffic %llu B in "
                  "%llu copies to the device, %llu B in %llu to the host; "
                  "expected %llu B in %llu and %llu B in %llu", when,
                  (unsigned long long)t.to_device,
                  (unsigned long long)t.copies_to_device,
                  (unsigned long long)t.to_host,
                  (unsigned long long)t.copies_to_host,
                  (unsigned long long)to_device,
                  (unsigned long long)copies_to_device,
                  (unsigned long long)to_host,
                  (unsigned long long)copies_to_host);
}

/* ---- Capacity ---- */

/* The capacity is the ledger's cap: past it, NULL with the ledger's line
 * and nothing allocated; exactly the capacity fits. (The blocks are never
 * written: they cost address space only.) */
START_TEST(allocation_past_the_capacity_is_refused)
{
    open_cpu(105 * (size_t)MIB, 2);
    ck_assert_str_eq(device_backend_name(), "cpu");
    ck_assert(device_backend_in_use() == DEVICE_CPU);
    ck_assert_uint_eq(device_capacity(), 105 * (size_t)MIB);
    ck_assert_uint_eq(memory_ledger_cap(), 105 * (size_t)MIB);
    void *parameters = device_alloc(MEMORY_PARAMETERS, 100 * (size_t)MIB);
    ck_assert_msg(parameters != NULL, "%s", memory_ledger_last_error());

    const size_t heap = memory_ledger_heap_in_use();
    ck_assert_msg(device_alloc(MEMORY_OPTIMIZER, 12 * (size_t)MIB) == NULL,
                  "12 MiB more than 100 passed a device of 105 MiB");
    ck_assert_str_eq(memory_ledger_last_error(), "rank 2: device out of "
                     "memory: asked 12.0 MiB for optimizer state, free "
                     "5.0 MiB of 105.0 MiB");
    ck_assert_uint_eq(memory_ledger_heap_in_use(), heap);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_OPTIMIZER), 0);
    ck_assert_uint_eq(memory_ledger_current_total(), 100 * (size_t)MIB);

    void *rest = device_alloc(MEMORY_OPTIMIZER, 5 * (size_t)MIB);
    ck_assert_msg(rest != NULL, "exactly the capacity must fit: %s",
                  memory_ledger_last_error());
    ck_assert(device_alloc(MEMORY_GRADIENTS, 1) == NULL);
    ck_assert_str_eq(memory_ledger_last_error(), "rank 2: device out of "
                     "memory: asked 1 B for gradients, free 0 B of "
                     "105.0 MiB");
    device_free(rest);
    device_free(parameters);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
    char error[256] = "";
    ck_assert_msg(device_close(error, sizeof error) == 0, "%s", error);
    ck_assert_msg(memory_ledger_cap() == MEMORY_LEDGER_NO_CAP, "the cap "
                  "outlived the device");
}
END_TEST

/* Host memory beside the device is not the device's: a device of 1 KiB
 * takes its whole KiB beside 3 MiB of host memory, and the totals keep
 * the two apart. */
START_TEST(host_memory_is_not_capped)
{
    open_cpu(1024, -1);
    void *moments = device_host_alloc(MEMORY_HOST_OPTIMIZER, 2 * (size_t)MIB);
    void *staging = device_host_alloc(MEMORY_HOST_STAGING, MIB);
    ck_assert_msg(moments != NULL && staging != NULL, "host memory refused "
                  "under a device's capacity: %s",
                  memory_ledger_last_error());
    void *parameters = device_alloc(MEMORY_PARAMETERS, 1024);
    ck_assert_msg(parameters != NULL, "host memory took the device's room: "
                  "%s", memory_ledger_last_error());
    ck_assert(device_alloc(MEMORY_PARAMETERS, 1) == NULL);
    ck_assert_str_eq(memory_ledger_last_error(), "device out of memory: "
                     "asked 1 B for parameters, free 0 B of 1.0 KiB");
    ck_assert_uint_eq(memory_ledger_current_total(), 1024);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 3 * (size_t)MIB);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_HOST_OPTIMIZER),
                      2 * (size_t)MIB);
    device_host_free(moments);
    device_host_free(staging);
    device_free(parameters);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 0);
    ck_assert_uint_eq(memory_ledger_host_peak_total(), 3 * (size_t)MIB);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
}
END_TEST

/* ---- Copies ---- */

/* A round trip through the device gives the bytes back, and the device's
 * block held them in between (on the cpu a device pointer is an address
 * of this process, so the test can look, between device_access_begin and
 * device_access_end as given kernels do). Lengths odd and even, one byte
 * and past a page. */
START_TEST(blocking_copies_are_real)
{
    open_cpu(MIB, -1);
    static const size_t lengths[] = { 1, 7, 64, 4099, 100000 };
    uint64_t to_device = 0;
    int k = 0;
    for (; k < 5; k++) {
        const size_t n = lengths[k];
        unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, n);
        unsigned char *back = device_host_alloc(MEMORY_HOST_STAGING, n);
        unsigned char *block = device_alloc(MEMORY_PARAMETERS, n);
        ck_assert(host != NULL && back != NULL && block != NULL);
        fill_bytes(host, n, 100 + (uint64_t)k);
        memset(back, 0, n);
        char error[256] = "";
        ck_assert_msg(device_copy_to_device(block, host, n, error,
                                            sizeof error) == 0, "%s", error);
        device_access_begin();
        size_t at = first_difference(block, host, n);
        const int seen = at < n ? block[at] : 0;
        device_access_end();
        ck_assert_msg(at == n, "%zu bytes to the device: byte %zu is %d, "
                      "the host's is %d", n, at, seen, at < n ? host[at] : 0);
        ck_assert_msg(device_copy_to_host(back, block, n, error,
                                          sizeof error) == 0, "%s", error);
        at = first_difference(back, host, n);
        ck_assert_msg(at == n, "%zu bytes there and back: byte %zu is %d, "
                      "was %d", n, at, at < n ? back[at] : 0,
                      at < n ? host[at] : 0);
        to_device += n;
        device_free(block);
        device_host_free(back);
        device_host_free(host);
    }
    /* The same bytes went each way, one copy each per length. */
    expect_traffic(to_device, to_device, (uint64_t)k, (uint64_t)k,
                   "after five round trips");
    /* A blocking copy is waited for at once, either way: it hides behind
     * nothing (lesson 07's overlap rules count on it). */
    const device_traffic t = device_traffic_total();
    ck_assert_msg(t.copies_to_device_waited_at_once == (uint64_t)k &&
                  t.copies_to_host_waited_at_once == (uint64_t)k,
                  "blocking copies waited for at once: %" PRIu64 " up, %"
                  PRIu64 " down, of %d each", t.copies_to_device_waited_at_once,
                  t.copies_to_host_waited_at_once, k);
}
END_TEST

/* A bf16 NaN: exponent all ones, mantissa not zero. */
static bool bf16_bits_are_nan(uint16_t bits)
{
    return (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0;
}

/* An asynchronous copy lands only at its wait: before it, its destination
 * is NaN as fp32 and as bf16 (every byte 0xff), in either direction; after
 * it, the source's bytes. The copy is pending in between. */
START_TEST(async_destination_is_nan_until_the_wait)
{
    enum { N = 1000 };
    open_cpu(MIB, -1);
    float *weights = device_host_alloc(MEMORY_HOST_STAGING, N * sizeof *weights);
    uint16_t *gradients = device_alloc(MEMORY_GRADIENTS, N * sizeof *gradients);
    float *on_device = device_alloc(MEMORY_PARAMETERS, N * sizeof *on_device);
    uint16_t *on_host = device_host_alloc(MEMORY_HOST_STAGING,
                                          N * sizeof *on_host);
    ck_assert(weights != NULL && gradients != NULL && on_device != NULL &&
              on_host != NULL);
    rng_t rng = rng_seeded(7);
    device_access_begin();
    for (int i = 0; i < N; i++) {
        weights[i] = (float)(4.0 * rng_next_uniform(&rng) - 2.0);
        /* bf16 bits of finite numbers: sign, exponent 1..254, mantissa. */
        uint64_t r = rng_next_u64(&rng);
        gradients[i] = (uint16_t)((r & 0x8000u) |
                                  (uint16_t)(1 + (r >> 16) % 254) << 7 |
                                  ((r >> 32) & 0x7fu));
        on_device[i] = 1.0f;
        on_host[i] = 0x3f80;   /* 1.0 in bf16 */
    }
    device_access_end();
    char error[256] = "";
    device_copy up, down;
    ck_assert_msg(device_copy_to_device_async(on_device, weights,
                                              N * sizeof *weights, &up,
                                              error, sizeof error) == 0,
                  "%s", error);
    ck_assert_msg(device_copy_to_host_async(on_host, gradients,
                                            N * sizeof *gradients, &down,
                                            error, sizeof error) == 0,
                  "%s", error);
    ck_assert(up.pending && down.pending);
    ck_assert_uint_eq(device_pending_copies(), 2);
    /* What a kernel would read meanwhile. */
    device_access_begin();
    for (int i = 0; i < N; i++) {
        ck_assert_msg(isnan(on_device[i]), "fp32 element %d of a copy to "
                      "the device reads %g before its wait; expected NaN",
                      i, on_device[i]);
        ck_assert_msg(bf16_bits_are_nan(on_host[i]), "bf16 element %d of a "
                      "copy to the host reads 0x%04x before its wait; "
                      "expected a NaN", i, on_host[i]);
        uint16_t halves[2];
        memcpy(halves, &on_device[i], sizeof halves);
        ck_assert_msg(bf16_bits_are_nan(halves[0]) &&
                      bf16_bits_are_nan(halves[1]), "element %d read as bf16 "
                      "is not NaN before the wait", i);
    }
    device_access_end();
    ck_assert_msg(device_wait(&up, error, sizeof error) == 0, "%s", error);
    ck_assert(!up.pending && down.pending);
    ck_assert_uint_eq(device_pending_copies(), 1);
    device_access_begin();
    size_t at = first_difference(on_device, weights, N * sizeof *weights);
    device_access_end();
    ck_assert_msg(at == N * sizeof *weights, "after the wait, byte %zu of "
                  "the copy to the device differs from its source", at);
    ck_assert_msg(device_wait(&down, error, sizeof error) == 0, "%s", error);
    ck_assert_uint_eq(device_pending_copies(), 0);
    device_access_begin();
    at = first_difference(on_host, gradients, N * sizeof *gradients);
    device_access_end();
    ck_assert_msg(at == N * sizeof *gradients, "after the wait, byte %zu of "
                  "the copy to the host differs from its source", at);
    device_host_free(on_host);
    device_free(on_device);
    device_free(gradients);
    device_host_free(weights);
    ck_assert_msg(device_close(error, sizeof error) == 0, "%s", error);
}
END_TEST

/* Every byte counted by direction, when each copy starts: a pending copy
 * counts already, its wait adds nothing, a refused copy nothing; the
 * reset starts again from 0. */
START_TEST(traffic_is_counted_by_direction)
{
    open_cpu(MIB, -1);
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, 70000);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, 70000);
    ck_assert(host != NULL && block != NULL);
    memset(host, 1, 70000);
    expect_traffic(0, 0, 0, 0, "after device_open");
    char error[256] = "";
    static const size_t up[] = { 3, 4096, 65536 }, down[] = { 1, 70000 };
    for (int k = 0; k < 3; k++)
        ck_assert(device_copy_to_device(block, host, up[k], error,
                                        sizeof error) == 0);
    for (int k = 0; k < 2; k++)
        ck_assert(device_copy_to_host(host, block, down[k], error,
                                      sizeof error) == 0);
    expect_traffic(3 + 4096 + 65536, 1 + 70000, 3, 2, "after five blocking "
                   "copies");
    device_copy pending;
    ck_assert(device_copy_to_host_async(host, block, 5000, &pending, error,
                                        sizeof error) == 0);
    expect_traffic(3 + 4096 + 65536, 1 + 70000 + 5000, 3, 3, "once a copy "
                   "of 5000 bytes to the host has started");
    ck_assert(device_copy_to_device(NULL, host, 10, error, sizeof error)
              == -1);
    ck_assert(device_wait(&pending, error, sizeof error) == 0);
    expect_traffic(3 + 4096 + 65536, 1 + 70000 + 5000, 3, 3, "after its "
                   "wait and a refused copy");
    device_traffic_reset();
    expect_traffic(0, 0, 0, 0, "after device_traffic_reset");
    ck_assert(device_copy_to_device_async(block, host, 123, &pending, error,
                                          sizeof error) == 0);
    ck_assert(device_wait(&pending, error, sizeof error) == 0);
    expect_traffic(123, 0, 1, 0, "after one copy of 123 bytes");
    device_free(block);
    device_host_free(host);
}
END_TEST

/* ---- Two threads ---- */

enum { THREAD_ROUNDS = 3000, UP_BYTES = 40, DOWN_BYTES = 24 };

typedef struct {
    unsigned char *host, *block;    /* this thread's own */
    atomic_int *ready;
    char error[256];
    int failed;
} copier;

/* Rounds of one blocking copy to the device and one asynchronous copy to
 * the host, waited for at once: the two threads' calls interleave as
 * closely as they can. */
static void *copy_rounds(void *argument)
{
    copier *c = argument;
    atomic_fetch_add(c->ready, 1);
    while (atomic_load(c->ready) < 2) {
    }
    for (int round = 0; round < THREAD_ROUNDS && !c->failed; round++) {
        device_copy copy;
        if (device_copy_to_device(c->block, c->host, UP_BYTES, c->error,
                                  sizeof c->error) != 0 ||
            device_copy_to_host_async(c->host + UP_BYTES, c->block,
                                      DOWN_BYTES, &copy, c->error,
                                      sizeof c->error) != 0 ||
            device_wait(&copy, c->error, sizeof c->error) != 0)
            c->failed = 1;
    }
    return NULL;
}

START_TEST(two_threads_keep_the_counters_exact)
{
    open_cpu(MIB, -1);
    atomic_int ready = 0;
    copier copiers[2];
    pthread_t threads[2];
    for (int t = 0; t < 2; t++) {
        copiers[t] = (copier){ .ready = &ready };
        copiers[t].host = device_host_alloc(MEMORY_HOST_STAGING, 128);
        copiers[t].block = device_alloc(MEMORY_PARAMETERS, 128);
        ck_assert(copiers[t].host != NULL && copiers[t].block != NULL);
        fill_bytes(copiers[t].host, 128, 20 + (uint64_t)t);
    }
    for (int t = 0; t < 2; t++)
        ck_assert(pthread_create(&threads[t], NULL, copy_rounds,
                                 &copiers[t]) == 0);
    for (int t = 0; t < 2; t++) {
        ck_assert(pthread_join(threads[t], NULL) == 0);
        ck_assert_msg(!copiers[t].failed, "thread %d: %s", t,
                      copiers[t].error);
        /* Each thread's copies landed in its own buffers: the first
         * DOWN_BYTES of what it sent up came back after them. */
        size_t at = first_difference(copiers[t].host + UP_BYTES,
                                     copiers[t].host, DOWN_BYTES);
        ck_assert_msg(at == DOWN_BYTES, "thread %d: byte %zu of its copy "
                      "back differs", t, at);
    }
    ck_assert_uint_eq(device_pending_copies(), 0);
    const uint64_t rounds = 2 * (uint64_t)THREAD_ROUNDS;
    expect_traffic(rounds * UP_BYTES, rounds * DOWN_BYTES, rounds, rounds,
                   "two threads, 3000 rounds each");
    for (int t = 0; t < 2; t++) {
        device_free(copiers[t].block);
        device_host_free(copiers[t].host);
    }
}
END_TEST

/* ---- Errors that return a line ---- */

START_TEST(open_refuses_with_a_line)
{
    char error[256] = "";
    ck_assert(device_open("gpu", MIB, 0, error, sizeof error) == -1);
    ck_assert_str_eq(error, "unknown backend 'gpu': say cpu or cuda");
    ck_assert(device_open("cpu", 0, 0, error, sizeof error) == -1);
    ck_assert_str_eq(error, "a device of capacity 0 can hold nothing: give "
                     "it some bytes (MEMORY_LEDGER_NO_CAP for no limit)");
    ck_assert(device_open(NULL, MIB, 0, error, sizeof error) == -1);
    ck_assert_str_eq(error, "unknown backend '(none)': say cpu or cuda");
    ck_assert_msg(device_capacity() == 0 &&
                  memory_ledger_cap() == MEMORY_LEDGER_NO_CAP, "a refused "
                  "device_open left a device or a cap");
    ck_assert(device_close(error, sizeof error) == -1);
    ck_assert_str_eq(error, "the device is not open");
    open_cpu(MIB, 0);
    ck_assert(device_open("cpu", MIB, 0, error, sizeof error) == -1);
    ck_assert_str_eq(error, "the device is open already (one per process): "
                     "device_close it first");
}
END_TEST

START_TEST(copy_errors_return_a_line_and_start_nothing)
{
    open_cpu(MIB, -1);
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, 256);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, 256);
    ck_assert(host != NULL && block != NULL);
    fill_bytes(host, 256, 3);
    char error[256] = "";
    ck_assert(device_copy_to_device(NULL, host, 8, error, sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_device: a NULL destination");
    ck_assert(device_copy_to_host(host, NULL, 8, error, sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_host: a NULL source");
    device_copy copy;
    ck_assert(device_copy_to_device_async(block, NULL, 8, &copy, error,
                                          sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_device_async: a NULL source");
    ck_assert(device_copy_to_host_async(host, block, 8, NULL, error,
                                        sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_host_async: a NULL device_copy");
    expect_traffic(0, 0, 0, 0, "after refused copies");
    ck_assert_uint_eq(device_pending_copies(), 0);

    /* A struct that is pending cannot start another copy: the first one
     * stays as it was and lands at the wait. */
    ck_assert(device_copy_to_device_async(block, host, 256, &copy, error,
                                          sizeof error) == 0);
    char long_error[DEVICE_ERROR_LEN] = "";
    ck_assert(device_copy_to_device_async(block, host + 128, 64, &copy,
                                          long_error, sizeof long_error)
              == -1);
    /* `copy` is a local variable here: the line says what that may mean. */
    ck_assert_str_eq(long_error, "device_copy_to_device_async: this "
                     "device_copy is pending already (256 bytes to the "
                     "device): device_wait for it before starting another "
                     "with it, or start the other with a device_copy of its "
                     "own (one for each copy in flight). It lies on a "
                     "stack: if it is a local variable of a function that "
                     "has returned since, its copy is still pending at this "
                     "place on the stack and nothing can wait for it. A "
                     "copy's device_copy must live until its device_wait, "
                     "in the state your code keeps, not on the stack of a "
                     "function that returns before the wait");
    ck_assert(device_copy_to_host_async(host, block, 64, &copy, error,
                                        sizeof error) == -1);
    ck_assert_uint_eq(device_pending_copies(), 1);
    expect_traffic(256, 0, 1, 0, "after one copy and two refused");
    /* One that is no local variable: the line says only that it is
     * pending. */
    static device_copy kept;
    ck_assert(device_copy_to_device_async(block + 128, host, 8, &kept, error,
                                          sizeof error) == 0);
    ck_assert(device_copy_to_device_async(block + 128, host, 8, &kept, error,
                                          sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_device_async: this device_copy "
                     "is pending already (8 bytes to the device): "
                     "device_wait for it before starting another with it, "
                     "or start the other with a device_copy of its own (one "
                     "for each copy in flight)");
    ck_assert(device_wait(&kept, error, sizeof error) == 0);
    ck_assert(device_wait(&copy, error, sizeof error) == 0);
    device_access_begin();
    ck_assert_uint_eq(first_difference(block, host, 256), 256);
    device_access_end();

    ck_assert(device_wait(&copy, error, sizeof error) == -1);
    ck_assert_str_eq(error, "device_wait: this copy is not pending (never "
                     "started, or waited for already)");
    device_copy never_started;
    memset(&never_started, 0xff, sizeof never_started);  /* pending: true */
    ck_assert(device_wait(&never_started, error, sizeof error) == -1);
    ck_assert(device_wait(NULL, error, sizeof error) == -1);
    ck_assert_str_eq(error, "device_wait: a NULL device_copy");
    /* The device end of a copy lies inside one device block: past its
     * end, or in no block at all, is refused with a line (a GPU would
     * refuse or corrupt its neighbour; the arena would corrupt the heap,
     * far from the mistake). */
    ck_assert(device_copy_to_host_async(host, block + 200, 64, &copy, error,
                                        sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_host_async: the source, 64 bytes "
                     "from 200 bytes into a device block of 256 "
                     "bytes (device_alloc), runs 8 "
                     "bytes past the block's end: check the copy's offset "
                     "and count, and the size the block was allocated "
                     "with");
    ck_assert(device_copy_to_device(host + 8, host, 8, error,
                                    sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_device: the destination (8 "
                     "bytes) is not in any device block: device memory "
                     "comes from device_alloc, host memory goes on the "
                     "other end");
    /* A range that starts a little before a block and runs into it (an
     * offset off by an element), and one in the arena that no block holds
     * (the padding after a block of 100 bytes, which spans 128): each
     * named for what it is. First fit: the next block starts at 128. */
    unsigned char *short_block = device_alloc(MEMORY_PARAMETERS, 100);
    unsigned char *next_block = device_alloc(MEMORY_PARAMETERS, 256);
    ck_assert_ptr_eq(next_block, short_block + 128);
    ck_assert(device_copy_to_device(next_block - 2, host, 64, error,
                                    sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_device: the destination (64 "
                     "bytes) starts 2 bytes before a device block of 256 "
                     "and runs into it: a copy's device end lies inside one "
                     "block; check the offset you add to the block's "
                     "pointer");
    ck_assert(device_copy_to_host(host, short_block + 110, 8, error,
                                  sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_host: the source (8 bytes) lies "
                     "in the device's memory but in no block of it (one "
                     "freed already, or an offset past a block's end): a "
                     "copy's device end lies inside a live block of "
                     "device_alloc");
    device_free(next_block);
    device_free(short_block);
    ck_assert(device_copy_to_host(host, block + 192, 64, error,
                                  sizeof error) == 0);
    expect_traffic(256 + 8, 64, 2, 1, "after the refused ranges");
    device_free(block);
    device_host_free(host);
}
END_TEST

/* An asynchronous copy's host end lies in a block of device_host_alloc:
 * one past a block's end (an offset into a whole buffer where the block
 * holds a part) is refused, naming the gap and the block, before it can
 * write the heap; plain memory is refused for an asynchronous copy, and
 * taken by a blocking one, whose bounds nothing here knows. A copy of 0
 * bytes is taken from anywhere. */
START_TEST(async_host_end_outside_the_host_blocks)
{
    open_cpu(MIB, -1);
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, 256);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, 256);
    unsigned char *plain = malloc(64);
    ck_assert(host != NULL && block != NULL && plain != NULL);
    char error[512] = "";
    device_copy copy;
    ck_assert(device_copy_to_host_async(host + 300, block, 64, &copy, error,
                                        sizeof error) == -1);
    ck_assert_msg(strstr(error, "device_copy_to_host_async: the destination "
                         "of an asynchronous copy (64 bytes at ") == error &&
                  strstr(error, ") is in no block of device_host_alloc: its "
                         "host memory is page-locked memory from "
                         "device_host_alloc, as on a GPU; it starts 44 bytes "
                         "past the end of a host block of 256 bytes") != NULL,
                  "%s", error);
    ck_assert(device_copy_to_device_async(block, plain, 64, &copy, error,
                                          sizeof error) == -1);
    ck_assert_msg(strstr(error, "the source of an asynchronous copy") != NULL,
                  "%s", error);
    ck_assert_msg(device_copy_to_host(plain, block, 64, error,
                                      sizeof error) == 0, "%s", error);
    ck_assert_msg(device_copy_to_host_async(host + 192, block, 64, &copy,
                                            error, sizeof error) == 0,
                  "%s", error);
    ck_assert_msg(device_wait(&copy, error, sizeof error) == 0, "%s", error);
    /* 0 bytes read no address, as on a GPU: an empty part's offset may
     * point anywhere. */
    ck_assert_msg(device_copy_to_host_async(host + 300, block, 0, &copy,
                                            error, sizeof error) == 0,
                  "a copy of 0 bytes: %s", error);
    ck_assert_msg(device_wait(&copy, error, sizeof error) == 0, "%s", error);
    ck_assert_msg(device_copy_to_device_async(block + 4096, host + 300, 0,
                                              &copy, error,
                                              sizeof error) == 0,
                  "a copy of 0 bytes: %s", error);
    ck_assert_msg(device_wait(&copy, error, sizeof error) == 0, "%s", error);
    free(plain);
    device_free(block);
    device_host_free(host);
    ck_assert_msg(device_close(error, sizeof error) == 0, "%s", error);
}
END_TEST

/* device_close with a copy pending fails and leaves the device open;
 * after the wait it closes. */
START_TEST(close_fails_while_copies_are_pending)
{
    open_cpu(MIB, -1);
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, 64);
    unsigned char *back = device_host_alloc(MEMORY_HOST_STAGING, 32);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, 64);
    ck_assert(host != NULL && back != NULL && block != NULL);
    memset(host, 5, 64);
    char error[256] = "";
    device_copy first, second;
    /* The copy back lands in memory of its own: into `host`, it would
     * write the first copy's source before that copy's wait. */
    ck_assert(device_copy_to_device_async(block, host, 64, &first, error,
                                          sizeof error) == 0);
    ck_assert(device_copy_to_host_async(back, block, 32, &second, error,
                                        sizeof error) == 0);
    ck_assert(device_close(error, sizeof error) == -1);
    ck_assert_str_eq(error, "2 copies are still pending: device_wait for "
                     "each before device_close");
    ck_assert(device_wait(&first, error, sizeof error) == 0);
    ck_assert(device_close(error, sizeof error) == -1);
    ck_assert_str_eq(error, "1 copy is still pending: device_wait for each "
                     "before device_close");
    ck_assert_msg(device_capacity() == MIB && memory_ledger_cap() == MIB,
                  "a refused device_close closed the device");
    ck_assert(device_wait(&second, error, sizeof error) == 0);
    ck_assert_msg(device_close(error, sizeof error) == 0, "%s", error);
    ck_assert_uint_eq(device_capacity(), 0);
    device_free(block);
    device_host_free(back);
    device_host_free(host);
}
END_TEST

/* ---- Bugs that stop the program ---- */

/* What a child process that broke a rule did: its exit status (or -1
 * when a signal ended it), what it wrote on stderr, and the line the
 * test expected of it. */
typedef struct {
    int status;
    char err[1024];
    char expected[512];
} stopped;

/* Runs body in a child whose stderr goes to a pipe; body writes the line
 * it expects (computed by the test from the addresses it allocated) with
 * expect() before it breaks the rule. */
static int expected_fd = -1;

__attribute__((format(printf, 1, 2)))
static void expect(const char *format, ...)
{
    char line[512];
    va_list arguments;
    va_start(arguments, format);
    int length = vsnprintf(line, sizeof line, format, arguments);
    va_end(arguments);
    if (length < 0 || length >= (int)sizeof line ||
        write(expected_fd, line, (size_t)length) != length)
        _exit(90);
}

static stopped run_stopping(void (*body)(void))
{
    int err_pipe[2], expected_pipe[2];
    ck_assert(pipe(err_pipe) == 0 && pipe(expected_pipe) == 0);
    pid_t child = fork();
    ck_assert(child >= 0);
    if (child == 0) {
        close(err_pipe[0]);
        close(expected_pipe[0]);
        dup2(err_pipe[1], STDERR_FILENO);
        expected_fd = expected_pipe[1];
        body();
        _exit(0);    /* the rule was not enforced */
    }
    close(err_pipe[1]);
    close(expected_pipe[1]);
    stopped result = { .status = -1 };
    const int fds[2] = { err_pipe[0], expected_pipe[0] };
    char *const into[2] = { result.err, result.expected };
    const size_t room[2] = { sizeof result.err, sizeof result.expected };
    for (int k = 0; k < 2; k++) {
        size_t used = 0;
        ssize_t got;
        while (used + 1 < room[k] &&
               (got = read(fds[k], into[k] + used, room[k] - 1 - used)) > 0)
            used += (size_t)got;
        into[k][used] = '\0';
        close(fds[k]);
    }
    int wait_status = 0;
    ck_assert(waitpid(child, &wait_status, 0) == child);
    if (WIFEXITED(wait_status))
        result.status = WEXITSTATUS(wait_status);
    return result;
}

static void expect_stopped(const stopped *s, const char *what)
{
    ck_assert_msg(s->status == 1, "%s: exit status %d, expected 1 (stderr: "
                  "%s)", what, s->status, s->err);
    ck_assert_msg(strcmp(s->err, s->expected) == 0, "%s: stderr said\n  %s"
                  "expected one line\n  %s", what, s->err, s->expected);
}

/* A copy of 128 bytes pending into the middle of a block of 1024: freeing
 * that block stops; freeing another block beside it does not. */
static void free_the_destination(void)
{
    open_cpu(MIB, -1);
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, 128);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, 1024);
    unsigned char *beside = device_alloc(MEMORY_PARAMETERS, 1024);
    char error[256];
    device_copy copy;
    if (host == NULL || block == NULL || beside == NULL ||
        device_copy_to_device_async(block + 256, host, 128, &copy, error,
                                    sizeof error) != 0)
        _exit(91);
    device_free(beside);
    expect("device_free: block %p (%zu bytes) is the destination of a "
           "pending copy of %zu bytes to the device, from %p to %p: "
           "device_wait for that copy before freeing it\n", (void *)block,
           (size_t)1024, (size_t)128, (void *)host, (void *)(block + 256));
    device_free(block);
}

START_TEST(freeing_a_block_under_a_pending_copy_stops)
{
    stopped s = run_stopping(free_the_destination);
    expect_stopped(&s, "device_free of a block a pending copy writes");
}
END_TEST

/* In a child: a host block and a device block of 300 bytes, the host's
 * filled with 3s, and a copy of `bytes` of it from byte `from` started up
 * into the device block's start. */
static void start_a_copy_up(unsigned char **host, unsigned char **block,
                            size_t from, size_t bytes, device_copy *copy)
{
    char error[256];
    open_cpu(MIB, 4);
    *host = device_host_alloc(MEMORY_HOST_STAGING, 300);
    *block = device_alloc(MEMORY_PARAMETERS, 300);
    if (*host == NULL || *block == NULL)
        _exit(91);
    memset(*host, 3, 300);
    if (device_copy_to_device_async(*block, *host + from, bytes, copy, error,
                                    sizeof error) != 0)
        _exit(91);
}

/* The same for the host block a pending copy to the device reads. */
static void free_the_source(void)
{
    unsigned char *host, *block;
    device_copy copy;
    start_a_copy_up(&host, &block, 299, 1, &copy);
    expect("device_host_free: block %p (%zu bytes) is the source of a "
           "pending copy of %zu bytes to the device, from %p to %p: "
           "device_wait for that copy before freeing it\n", (void *)host,
           (size_t)300, (size_t)1, (void *)(host + 299), (void *)block);
    device_host_free(host);
}

START_TEST(freeing_a_source_under_a_pending_copy_stops)
{
    stopped s = run_stopping(free_the_source);
    expect_stopped(&s, "device_host_free of a block a pending copy reads");
}
END_TEST

/* A source written between its copy's start and its wait: the cpu device
 * copies at the wait, so the new byte would arrive; a GPU copies in
 * between. One byte changed, the last of 300, is enough. */
static void write_the_source(void)
{
    unsigned char *host, *block;
    char error[256];
    device_copy copy;
    start_a_copy_up(&host, &block, 0, 300, &copy);
    host[299] = 4;
    expect("device_wait: the host memory at %p that a pending copy of %zu "
           "bytes to the device reads (started by host code) was written "
           "between the copy's start and its wait. A GPU copies it at any "
           "moment in between, so some of the new bytes would not arrive: "
           "finish writing a source before you start its copy, and leave "
           "it alone until device_wait returns\n", (void *)host,
           (size_t)300);
    device_wait(&copy, error, sizeof error);
}

START_TEST(writing_a_source_under_a_pending_copy_stops)
{
    stopped s = run_stopping(write_the_source);
    expect_stopped(&s, "a source written before its copy's wait");
}
END_TEST

/* The same for a copy down, whose source is device memory, written here
 * by a blocking copy into its last byte (as a kernel or a collective would
 * write it): the cpu device would deliver the new byte, a GPU maybe not. */
static void write_the_device_source(void)
{
    unsigned char *host, *block, four = 4;
    char error[256];
    device_copy copy;
    open_cpu(MIB, 4);
    host = device_host_alloc(MEMORY_HOST_STAGING, 300);
    block = device_alloc(MEMORY_PARAMETERS, 300);
    if (host == NULL || block == NULL ||
        device_copy_to_host_async(host, block, 300, &copy, error,
                                  sizeof error) != 0 ||
        device_copy_to_device(block + 299, &four, 1, error,
                              sizeof error) != 0)
        _exit(91);
    expect("device_wait: the device memory at %p that a pending copy of %zu "
           "bytes to the host reads (started by host code) was written "
           "between the copy's start and its wait (by a kernel, a "
           "collective or a copy). A GPU copies it at any moment in "
           "between, so some of the new bytes would not arrive: start a "
           "copy down after the last write to its source (a gradient: "
           "after the collective that sums it), and leave it alone until "
           "device_wait returns\n", (void *)block, (size_t)300);
    device_wait(&copy, error, sizeof error);
}

START_TEST(writing_a_device_source_under_a_pending_copy_stops)
{
    stopped s = run_stopping(write_the_device_source);
    expect_stopped(&s, "a device source written before its copy's wait");
}
END_TEST

/* Copies run in the order they start, as on a GPU's one copy stream,
 * whichever is waited for first: a copy down started after a copy up into
 * its source delivers what the copy up wrote; a copy down started before a
 * copy up into its source delivers what was there before. Neither is a
 * source written under a pending copy. */
START_TEST(copies_run_in_the_order_they_start)
{
    open_cpu(MIB, -1);
    enum { N = 200 };
    unsigned char *old = device_host_alloc(MEMORY_HOST_STAGING, N);
    unsigned char *new = device_host_alloc(MEMORY_HOST_STAGING, N);
    unsigned char *back = device_host_alloc(MEMORY_HOST_STAGING, N);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, N);
    ck_assert(old != NULL && new != NULL && back != NULL && block != NULL);
    fill_bytes(old, N, 1);
    fill_bytes(new, N, 2);
    char error[256] = "";
    ck_assert(device_copy_to_device(block, old, N, error, sizeof error) == 0);
    for (int waits_down_first = 0; waits_down_first <= 1; waits_down_first++) {
        device_copy up, down;
        /* Up, then down: the new bytes come back. */
        ck_assert(device_copy_to_device_async(block, new, N, &up, error,
                                              sizeof error) == 0);
        ck_assert(device_copy_to_host_async(back, block, N, &down, error,
                                            sizeof error) == 0);
        ck_assert_msg(device_wait(waits_down_first ? &down : &up, error,
                                  sizeof error) == 0, "%s", error);
        ck_assert_msg(device_wait(waits_down_first ? &up : &down, error,
                                  sizeof error) == 0, "%s", error);
        ck_assert_msg(memcmp(back, new, N) == 0, "a copy down started after "
                      "a copy up into its source did not deliver the copy "
                      "up's bytes (waits: %s first)",
                      waits_down_first ? "down" : "up");
        /* Down, then up (the old bytes back in): the new bytes come back,
         * what the block held when the copy down started. */
        ck_assert(device_copy_to_host_async(back, block, N, &down, error,
                                            sizeof error) == 0);
        ck_assert(device_copy_to_device_async(block, old, N, &up, error,
                                              sizeof error) == 0);
        ck_assert_msg(device_wait(waits_down_first ? &down : &up, error,
                                  sizeof error) == 0, "%s", error);
        ck_assert_msg(device_wait(waits_down_first ? &up : &down, error,
                                  sizeof error) == 0, "%s", error);
        ck_assert_msg(memcmp(back, new, N) == 0, "a copy down started before "
                      "a copy up into its source did not deliver what the "
                      "source held at its start (waits: %s first)",
                      waits_down_first ? "down" : "up");
    }
    device_free(block);
    device_host_free(back);
    device_host_free(new);
    device_host_free(old);
    ck_assert_msg(device_close(error, sizeof error) == 0, "%s", error);
}
END_TEST

/* After the wait, the same frees go through. */
START_TEST(freeing_after_the_wait_is_fine)
{
    open_cpu(MIB, -1);
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, 128);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, 128);
    ck_assert(host != NULL && block != NULL);
    memset(host, 9, 128);
    char error[256] = "";
    device_copy copy;
    ck_assert(device_copy_to_device_async(block, host, 128, &copy, error,
                                          sizeof error) == 0);
    ck_assert(device_wait(&copy, error, sizeof error) == 0);
    device_free(block);
    device_host_free(host);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 0);
}
END_TEST

static void device_memory_in_a_host_category(void)
{
    open_cpu(MIB, -1);
    expect("device_alloc: MEMORY_HOST_STAGING is a category of host "
           "memory, which device_host_alloc allocates; device_alloc "
           "allocates device memory, whose categories are every other "
           "(MEMORY_PARAMETERS, MEMORY_GRADIENTS, MEMORY_OPTIMIZER, ...)\n");
    device_alloc(MEMORY_HOST_STAGING, 16);
}

static void host_memory_in_a_device_category(void)
{
    open_cpu(MIB, -1);
    expect("device_host_alloc: MEMORY_OPTIMIZER is a category of device "
           "memory, which device_alloc allocates; device_host_alloc "
           "allocates host memory, whose categories are "
           "MEMORY_HOST_OPTIMIZER or MEMORY_HOST_STAGING\n");
    device_host_alloc(MEMORY_OPTIMIZER, 16);
}

static void allocating_with_no_device(void)
{
    expect("device_alloc: the device is not open (device_open first)\n");
    device_alloc(MEMORY_PARAMETERS, 16);
}

/* A block freed twice (a pointer kept after its free): said by
 * device_free, not by the fault of the ledger reading its header. */
static void freeing_a_block_twice(void)
{
    open_cpu(MIB, -1);
    void *block = device_alloc(MEMORY_GRADIENTS, 1000);
    if (block == NULL)
        _exit(91);
    device_free(block);
    expect("device_free: %p starts no block of device memory now: freed "
           "already (a second device_free of the same block, through a "
           "pointer kept after the first?), or a pointer into a block, not "
           "its start\n", block);
    device_free(block);
}

START_TEST(memory_of_the_wrong_kind_stops)
{
    void (*const bodies[])(void) = { device_memory_in_a_host_category,
                                     host_memory_in_a_device_category,
                                     allocating_with_no_device,
                                     freeing_a_block_twice };
    const char *const what[] = { "device_alloc(MEMORY_HOST_STAGING)",
                                 "device_host_alloc(MEMORY_OPTIMIZER)",
                                 "device_alloc before device_open",
                                 "device_free twice" };
    for (int k = 0; k < 4; k++) {
        stopped s = run_stopping(bodies[k]);
        expect_stopped(&s, what[k]);
    }
}
END_TEST

/* ---- The arena: device memory that host code cannot touch ---- */

static const char *const touch_tail =
    ". Device memory is the device's, as a GPU's is: host code moves it "
    "with device_copy_to_host and device_copy_to_device (or their _async "
    "forms, common/device.h) and never reads or writes it in place; a "
    "memcpy, a loop or a function of your own on a device pointer stops "
    "here\n";

/* A read in place, as a student's loop over device gradients would be. */
static void read_device_gradients(void)
{
    open_cpu(MIB, -1);
    volatile unsigned char *block = device_alloc(MEMORY_GRADIENTS, 1000);
    if (block == NULL)
        _exit(91);
    device_name_host_code("the test's loop");
    expect("device: the test's loop touched device memory outside the "
           "device layer: byte 10 of a device block of 1000 bytes of "
           "gradients, at %p%s", (void *)(block + 10), touch_tail);
    (void)block[10];
}

/* A write with memcpy, on a rank, with nothing named: host code. */
static void memcpy_into_device(void)
{
    open_cpu(MIB, 3);
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, 256);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, 4096);
    if (host == NULL || block == NULL)
        _exit(91);
    memset(host, 1, 256);
    expect("device: rank 3: host code touched device memory outside the "
           "device layer: byte 0 of a device block of 4096 bytes of "
           "parameters, at %p%s", (void *)block, touch_tail);
    /* 8 bytes, one store at byte 0 however it is compiled: a longer
     * memcpy may store its last bytes first (clang's inlined copy of 256
     * bytes faulted at byte 224). */
    memcpy(block, host, 8);
}

/* The books (the traffic counters) lie where the blocks do. */
static void write_the_books(void)
{
    open_cpu(MIB, -1);
    const void *start = NULL;
    size_t bytes = 0;
    device_arena_range(&start, &bytes);
    if (start == NULL || bytes == 0)
        _exit(91);
    expect("device: host code touched device memory outside the device "
           "layer: the device's books (its traffic counters), at %p%s",
           start, touch_tail);
    *(volatile uint64_t *)start = 0;
}

/* Between device_access_begin and device_access_end (nested too), host
 * code reads and writes device memory; once the last has ended, a read
 * stops the program. */
static void touch_after_the_access_ends(void)
{
    open_cpu(MIB, -1);
    volatile unsigned char *block = device_alloc(MEMORY_ACTIVATIONS, 64);
    if (block == NULL)
        _exit(91);
    device_access_begin();
    device_access_begin();
    block[0] = 7;
    device_access_end();
    block[1] = block[0];
    device_access_end();
    device_name_host_code("code after device_access_end");
    expect("device: code after device_access_end touched device memory "
           "outside the device layer: byte 1 of a device block of 64 bytes "
           "of activations, at %p%s", (void *)(block + 1), touch_tail);
    (void)block[1];
}

START_TEST(host_code_that_touches_device_memory_stops)
{
    void (*const bodies[])(void) = { read_device_gradients,
                                     memcpy_into_device, write_the_books,
                                     touch_after_the_access_ends };
    const char *const what[] = { "a read of device gradients in place",
                                 "a memcpy into device memory",
                                 "a write to the device's books",
                                 "a read after device_access_end" };
    for (int k = 0; k < 4; k++) {
        stopped s = run_stopping(bodies[k]);
        expect_stopped(&s, what[k]);
    }
}
END_TEST

/* While a cpu device is open, every block of a device category comes
 * from the arena, the ledger's and the device's alike, and host memory
 * does not; the ledger knows their bytes and categories. Closed, with no
 * block left, the ledger is back on the heap. */
START_TEST(device_categories_live_in_the_arena)
{
    open_cpu(MIB, -1);
    const void *start = NULL;
    size_t bytes = 0;
    device_arena_range(&start, &bytes);
    ck_assert_msg(start != NULL && bytes > 2 * (size_t)MIB, "the arena of a "
                  "device of 1 MiB: %zu bytes at %p", bytes, start);
    const uintptr_t first = (uintptr_t)start, end = first + bytes;
    void *bucket = ledger_alloc(MEMORY_BUCKETS, 1000);
    void *parameters = device_alloc(MEMORY_PARAMETERS, 3000);
    void *staging = device_host_alloc(MEMORY_HOST_STAGING, 5000);
    ck_assert(bucket != NULL && parameters != NULL && staging != NULL);
    ck_assert_msg((uintptr_t)bucket >= first && (uintptr_t)bucket < end &&
                  (uintptr_t)parameters >= first &&
                  (uintptr_t)parameters < end, "device blocks %p and %p lie "
                  "outside the arena [%p, +%zu)", bucket, parameters, start,
                  bytes);
    ck_assert_msg((uintptr_t)staging < first || (uintptr_t)staging >= end,
                  "host memory %p lies in the arena", staging);
    ck_assert_uint_eq((uintptr_t)bucket % 64, 0);
    ck_assert_uint_eq(ledger_block_bytes(bucket), 1000);
    ck_assert(ledger_block_category(bucket) == MEMORY_BUCKETS);
    ck_assert_uint_eq(ledger_block_bytes(parameters), 3000);
    ck_assert_uint_eq(memory_ledger_current_total(), 4000);
    /* A copy between two device blocks is no copy across the bus. */
    char error[256] = "";
    ck_assert(device_copy_to_device(parameters, bucket, 8, error,
                                    sizeof error) == -1);
    ck_assert_str_eq(error, "device_copy_to_device: the source (8 bytes) is "
                     "device memory: a copy goes between device memory and "
                     "host memory (device_host_alloc)");
    ledger_free(bucket);
    device_free(parameters);
    device_host_free(staging);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
    ck_assert_msg(device_close(error, sizeof error) == 0, "%s", error);
    device_arena_range(&start, &bytes);
    ck_assert_msg(start == NULL && bytes == 0, "a closed device with no "
                  "block kept its arena");
    void *heap = ledger_alloc(MEMORY_BUCKETS, 100);
    ck_assert_uint_eq(ledger_block_bytes(heap), 100);
    ledger_free(heap);
}
END_TEST

/* A pending copy lands as it was started: a device_copy changed before
 * its wait (more bytes than were counted) stops the program. */
static void change_a_pending_copy(void)
{
    open_cpu(MIB, -1);
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, 4096);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, 4096);
    char error[256];
    device_copy copy;
    if (host == NULL || block == NULL ||
        device_copy_to_device_async(block, host, 64, &copy, error,
                                    sizeof error) != 0)
        _exit(91);
    copy.bytes = 4096;
    expect("device_wait: the device_copy of a pending copy of 64 bytes to "
           "the device was changed (its bytes) between its start and its "
           "wait: the device copies what was started; leave the struct "
           "alone until device_wait returns\n");
    device_wait(&copy, error, sizeof error);
}

START_TEST(a_pending_copy_changed_before_its_wait_stops)
{
    stopped s = run_stopping(change_a_pending_copy);
    expect_stopped(&s, "a pending copy's bytes raised before its wait");
}
END_TEST

/* ---- The cuda backend ---- */

static bool starts_with(const char *text, const char *start)
{
    return strncmp(text, start, strlen(start)) == 0;
}

/* Where this program has the cuda backend (the Makefile links it where
 * nvcc is found) and a GPU, the same promises on the GPU: the capacity's
 * line, real copies (seen through a round trip: the test cannot read GPU
 * memory), exact counters, the checks on pending copies. Elsewhere
 * device_open says why not, and the test is skipped with that reason. */
START_TEST(cuda_backend_keeps_the_same_promises)
{
    char error[256] = "";
    if (device_open("cuda", 64 * (size_t)MIB, 1, error, sizeof error) != 0) {
#ifdef ZZ_DEVICE_CUDA_LINKED
        ck_assert_msg(starts_with(error, "cuda: no CUDA device: "), "with "
                      "its backend linked, device_open(\"cuda\") may fail "
                      "only for want of a GPU; it said: %s", error);
#else
        ck_assert_msg(starts_with(error, "cuda: the toolkit was built "
                                  "without nvcc"), "without its backend, "
                      "device_open(\"cuda\") said: %s", error);
#endif
        ck_assert_msg(memory_ledger_cap() == MEMORY_LEDGER_NO_CAP &&
                      device_capacity() == 0, "a refused device_open left "
                      "a device or a cap");
        HARNESS_SKIP("the cuda backend: %s", error);
    }
    ck_assert_str_eq(device_backend_name(), "cuda");
    ck_assert(device_backend_in_use() == DEVICE_CUDA);
    void *most = device_alloc(MEMORY_PARAMETERS, 60 * (size_t)MIB);
    ck_assert_msg(most != NULL, "%s", memory_ledger_last_error());
    ck_assert(device_alloc(MEMORY_OPTIMIZER, 5 * (size_t)MIB) == NULL);
    ck_assert_str_eq(memory_ledger_last_error(), "rank 1: device out of "
                     "memory: asked 5.0 MiB for optimizer state, free "
                     "4.0 MiB of 64.0 MiB");
    device_free(most);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);

    enum { N = 100003 };
    unsigned char *host = device_host_alloc(MEMORY_HOST_STAGING, N);
    unsigned char *back = device_host_alloc(MEMORY_HOST_STAGING, N);
    unsigned char *block = device_alloc(MEMORY_PARAMETERS, N);
    unsigned char *other = device_alloc(MEMORY_GRADIENTS, N);
    ck_assert_msg(host != NULL && back != NULL && block != NULL &&
                  other != NULL, "%s", memory_ledger_last_error());
    ck_assert_uint_eq(memory_ledger_host_current_total(), 2 * (size_t)N);
    ck_assert_uint_eq(memory_ledger_current_total(), 2 * (size_t)N);
    fill_bytes(host, N, 77);
    memset(back, 0, N);
    ck_assert_msg(device_copy_to_device(block, host, N, error,
                                        sizeof error) == 0, "%s", error);
    device_copy up, down;
    ck_assert_msg(device_copy_to_device_async(other, host, N, &up, error,
                                              sizeof error) == 0, "%s",
                  error);
    ck_assert(device_close(error, sizeof error) == -1);
    ck_assert_msg(device_wait(&up, error, sizeof error) == 0, "%s", error);
    ck_assert_msg(device_copy_to_host_async(back, other, N, &down, error,
                                            sizeof error) == 0, "%s", error);
    ck_assert_msg(device_wait(&down, error, sizeof error) == 0, "%s", error);
    size_t at = first_difference(back, host, N);
    ck_assert_msg(at == N, "an async round trip through the GPU: byte %zu "
                  "differs", at);
    memset(back, 0, N);
    ck_assert_msg(device_copy_to_host(back, block, N, error, sizeof error)
                  == 0, "%s", error);
    at = first_difference(back, host, N);
    ck_assert_msg(at == N, "a blocking round trip through the GPU: byte "
                  "%zu differs", at);
    expect_traffic(2 * (uint64_t)N, 2 * (uint64_t)N, 2, 2, "two round "
                   "trips on the GPU");
    device_free(other);
    device_free(block);
    device_host_free(back);
    device_host_free(host);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 0);
    ck_assert_msg(device_close(error, sizeof error) == 0, "%s", error);
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("common: device");
    harness_add(suite, "device: past the capacity refused, exactly it fits",
                allocation_past_the_capacity_is_refused, 0, 10);
    harness_add(suite, "device: host memory is not capped",
                host_memory_is_not_capped, 0, 10);
    harness_add(suite, "device: blocking copies are real",
                blocking_copies_are_real, 0, 10);
    harness_add(suite, "device: an async copy's destination is NaN until "
                "its wait", async_destination_is_nan_until_the_wait, 0, 10);
    harness_add(suite, "device: traffic counted by direction",
                traffic_is_counted_by_direction, 0, 10);
    harness_add(suite, "device: two threads keep the counters exact",
                two_threads_keep_the_counters_exact, 0, 30);
    harness_add(suite, "device: bad backend, capacity 0: a line",
                open_refuses_with_a_line, 0, 10);
    harness_add(suite, "device: copy errors return a line, start nothing",
                copy_errors_return_a_line_and_start_nothing, 0, 10);
    harness_add(suite, "device: an asynchronous copy's host end outside "
                "the host blocks is refused (0 bytes: taken)",
                async_host_end_outside_the_host_blocks, 0, 10);
    harness_add(suite, "device: close fails while copies are pending",
                close_fails_while_copies_are_pending, 0, 10);
    harness_add(suite, "device: freeing a copy's destination stops, "
                "status 1", freeing_a_block_under_a_pending_copy_stops, 0,
                10);
    harness_add(suite, "device: freeing a copy's source stops, status 1",
                freeing_a_source_under_a_pending_copy_stops, 0, 10);
    harness_add(suite, "device: writing a copy's source before its wait "
                "stops, status 1", writing_a_source_under_a_pending_copy_stops,
                0, 10);
    harness_add(suite, "device: copies run in the order they start",
                copies_run_in_the_order_they_start, 0, 10);
    harness_add(suite, "device: writing a copy down's device source before "
                "its wait stops, status 1",
                writing_a_device_source_under_a_pending_copy_stops, 0, 10);
    harness_add(suite, "device: freeing after the wait is fine",
                freeing_after_the_wait_is_fine, 0, 10);
    harness_add(suite, "device: memory of the wrong kind stops, status 1",
                memory_of_the_wrong_kind_stops, 0, 10);
    harness_add(suite, "device: host code that touches device memory "
                "stops, status 1", host_code_that_touches_device_memory_stops,
                0, 10);
    harness_add(suite, "device: device categories live in the arena",
                device_categories_live_in_the_arena, 0, 10);
    harness_add(suite, "device: a pending copy changed before its wait "
                "stops, status 1",
                a_pending_copy_changed_before_its_wait_stops, 0, 10);
    harness_add(suite, "device: the cuda backend keeps the same promises",
                cuda_backend_keeps_the_same_promises, 0, 30);
    return suite;
}
