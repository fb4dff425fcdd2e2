/* The device layer: the cpu backend, and the way to the cuda one.
 *
 * The cpu backend's device memory is the memory ledger's, under its cap:
 * device_alloc is ledger_alloc, so a device's peaks are the ledger's and
 * an allocation past the capacity is refused with the ledger's line. Its
 * copies are memcpy. What makes it a device is the asynchronous copy: it
 * lands only at device_wait, and until then its destination reads NaN, so
 * a program that forgets to wait computes with NaN and sees it at once,
 * where a real GPU would hand it plausible stale numbers some of the time.
 *
 * The pending copies form a list, guarded by one lock with the counters.
 * The copies themselves run under the lock too: one copy at a time, as
 * through a GPU's copy engine, and a copy cannot land in a block that
 * another thread is freeing. */
#define _POSIX_C_SOURCE 200809L
#include "device.h"

#include "device_cuda.h"
#include "timer.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    bool open;
    bool opened_once;            /* for the name before the first open */
    device_backend backend;
    size_t capacity;
    int rank;
    const device_cuda_backend *cuda;   /* while the cuda backend is used */
    device_copy *pending;        /* started, not yet waited for */
    size_t pending_count;
    device_traffic traffic;
    /* cpu: the device blocks now allocated, so that a copy's device end
     * can be checked to lie inside one (a GPU would refuse, or corrupt
     * its neighbour, where an arena in the host's heap would corrupt the
     * heap, far from the mistake). */
    struct device_block { uintptr_t start; size_t bytes; } *blocks;
    size_t block_count, block_room;
} device;
static pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;

/* The stand-in for the cuda backend where device_cuda.o is not linked: a
 * weak definition, which that object's own replaces. */
__attribute__((weak)) const device_cuda_backend *device_cuda_linked(void)
{
    return NULL;
}

/* A call that breaks the layer's rules (memory of the wrong kind, no open
 * device, a block freed under a pending copy) is a bug in the caller, not
 * bad input: it stops the program with one line, as CUDA_CHECK does. */
static void device_check_failed(const char *function, const char *why)
{
    fprintf(stderr, "%s: %s\n", function, why);
    exit(1);
}

static void require_open(const char *function)
{
    if (!device.open)
        device_check_failed(function, "the device is not open (device_open "
                            "first)");
}

static void lock(void)
{
    if (pthread_mutex_lock(&device_lock) != 0)
        device_check_failed("device", "pthread_mutex_lock failed");
}

static void unlock(void)
{
    if (pthread_mutex_unlock(&device_lock) != 0)
        device_check_failed("device", "pthread_mutex_unlock failed");
}

int device_open(const char *backend, size_t capacity, int rank, char *error,
                size_t error_len)
{
    if (device.open) {
        snprintf(error, error_len, "the device is open already (one per "
                 "process): device_close it first");
        return -1;
    }
    device_backend chosen;
    if (backend != NULL && strcmp(backend, "cpu") == 0) {
        chosen = DEVICE_CPU;
    } else if (backend != NULL && strcmp(backend, "cuda") == 0) {
        chosen = DEVICE_CUDA;
    } else {
        snprintf(error, error_len, "unknown backend '%s': say cpu or cuda",
                 backend != NULL ? backend : "(none)");
        return -1;
    }
    if (capacity == 0) {
        snprintf(error, error_len, "a device of capacity 0 can hold nothing: "
                 "give it some bytes (MEMORY_LEDGER_NO_CAP for no limit)");
        return -1;
    }
    const device_cuda_backend *cuda = NULL;
    if (chosen == DEVICE_CUDA) {
        cuda = device_cuda_linked();
        if (cuda == NULL) {
            snprintf(error, error_len, "cuda: the toolkit was built without "
                     "nvcc, or this program without the cuda backend");
            return -1;
        }
        if (cuda->open(capacity, rank, error, error_len) != 0)
            return -1;
    }
    /* The capacity is the ledger's cap on the device's categories: on the
     * cpu the arena's whole size, on a GPU what this process may take. */
    memory_ledger_set_cap(capacity, rank);
    lock();
    device.open = true;
    device.opened_once = true;
    device.backend = chosen;
    device.capacity = capacity;
    device.rank = rank;
    device.cuda = cuda;
    device.traffic = (device_traffic){ 0 };
    unlock();
    return 0;
}

int device_close(char *error, size_t error_len)
{
    if (!device.open) {
        snprintf(error, error_len, "the device is not open");
        return -1;
    }
    lock();
    const size_t pending = device.pending_count;
    unlock();
    if (pending > 0) {
        snprintf(error, error_len, "%zu cop%s still pending: device_wait for "
                 "each before device_close", pending,
                 pending == 1 ? "y is" : "ies are");
        return -1;
    }
    if (device.cuda != NULL && device.cuda->close(error, error_len) != 0)
        return -1;
    memory_ledger_set_cap(MEMORY_LEDGER_NO_CAP, device.rank);
    lock();
    free(device.blocks);
    device.blocks = NULL;
    device.block_count = device.block_room = 0;
    unlock();
    device.open = false;
    return 0;
}

device_backend device_backend_in_use(void)
{
    return device.backend;
}

const char *device_backend_name(void)
{
    if (!device.opened_once)
        return "none";
    return device.backend == DEVICE_CUDA ? "cuda" : "cpu";
}

size_t device_capacity(void)
{
    return device.open ? device.capacity : 0;
}

/* ---- Memory ---------------------------------------------------------------- */

void *device_alloc(memory_category category, size_t bytes)
{
    require_open("device_alloc");
    if (memory_category_is_host(category))
        device_check_failed("device_alloc", "a host category for device "
                            "memory: use device_host_alloc");
    if (device.cuda != NULL)
        return device.cuda->alloc(category, bytes);
    void *block = ledger_alloc(category, bytes);
    if (block == NULL)
        return NULL;
    lock();
    if (device.block_count == device.block_room) {
        size_t room = device.block_room ? 2 * device.block_room : 64;
        struct device_block *grown = realloc(device.blocks,
                                             room * sizeof *grown);
        if (grown == NULL) {
            unlock();
            device_check_failed("device_alloc", "no memory for the list of "
                                "device blocks");
        }
        device.blocks = grown;
        device.block_room = room;
    }
    device.blocks[device.block_count++] =
        (struct device_block){ (uintptr_t)block, bytes };
    unlock();
    return block;
}

/* Takes a freed block off the list (cpu). (Called with the lock held.) */
static void forget_block(const void *block)
{
    for (size_t k = 0; k < device.block_count; k++)
        if (device.blocks[k].start == (uintptr_t)block) {
            device.blocks[k] = device.blocks[--device.block_count];
            return;
        }
}

/* cpu: 0 when [start, start + bytes) lies inside one device block;
 * otherwise -1 with a line saying where it lies. (Called with the lock
 * held.) */
static int check_device_range(const char *function, const char *end,
                              const void *start, size_t bytes, char *error,
                              size_t error_len)
{
    if (device.cuda != NULL)
        return 0;
    const uintptr_t first = (uintptr_t)start;
    for (size_t k = 0; k < device.block_count; k++) {
        const struct device_block *b = &device.blocks[k];
        if (first < b->start || first - b->start > b->bytes)
            continue;
        const size_t offset = first - b->start;
        if (bytes <= b->bytes - offset)
            return 0;
        snprintf(error, error_len, "%s: %s, %zu bytes from %zu bytes into "
                 "a device block of %zu, runs %zu bytes past the block's end:"
                 " copy only what the block holds", function, end, bytes,
                 offset, b->bytes, bytes - (b->bytes - offset));
        return -1;
    }
    snprintf(error, error_len, "%s: %s (%zu bytes) is not in any device "
             "block: device memory comes from device_alloc, host memory "
             "goes on the other end", function, end, bytes);
    return -1;
}

/* The first pending copy that reads or writes [start, start + bytes), or
 * NULL; `end` says which of its ends lies there. A range of 0 bytes
 * touches the byte its pointer names. (Called with the lock held.) */
static const device_copy *copy_touching(const void *start, size_t bytes,
                                        const char **end)
{
    const uintptr_t begin = (uintptr_t)start;
    const uintptr_t finish = begin + (bytes > 0 ? bytes : 1);
    for (const device_copy *c = device.pending; c != NULL; c = c->next) {
        const void *const ends[2] = { c->dst, c->src };
        for (int k = 0; k < 2; k++) {
            const uintptr_t first = (uintptr_t)ends[k];
            const uintptr_t last = first + (c->bytes > 0 ? c->bytes : 1);
            if (first < finish && last > begin) {
                *end = k == 0 ? "the destination" : "the source";
                return c;
            }
        }
    }
    return NULL;
}

/* Stops the program if a pending copy reads or writes the block: a GPU
 * would go on copying into or out of memory that is no longer the
 * block's. */
static void check_no_copy_touches(const char *function, void *block,
                                  size_t bytes)
{
    const char *end = NULL;
    char why[320];
    lock();
    const device_copy *c = copy_touching(block, bytes, &end);
    if (c != NULL)
        snprintf(why, sizeof why, "block %p (%zu bytes) is %s of a pending "
                 "copy of %zu bytes %s, from %p to %p: device_wait for that "
                 "copy before freeing it", block, bytes, end, c->bytes,
                 c->to_device ? "to the device" : "to the host", c->src,
                 c->dst);
    unlock();
    if (c != NULL)
        device_check_failed(function, why);
}

void device_free(void *block)
{
    if (block == NULL)
        return;
    if (device.cuda != NULL) {
        check_no_copy_touches("device_free", block,
                              device.cuda->block_bytes(block));
        device.cuda->free(block);
        return;
    }
    if (memory_category_is_host(ledger_block_category(block)))
        device_check_failed("device_free", "a block of host memory: free it "
                            "with device_host_free");
    check_no_copy_touches("device_free", block, ledger_block_bytes(block));
    lock();
    forget_block(block);
    unlock();
    ledger_free(block);
}

void *device_host_alloc(memory_category category, size_t bytes)
{
    require_open("device_host_alloc");
    if (!memory_category_is_host(category))
        device_check_failed("device_host_alloc", "a device category for "
                            "host memory: say MEMORY_HOST_OPTIMIZER or "
                            "MEMORY_HOST_STAGING");
    if (device.cuda != NULL)
        return device.cuda->host_alloc(category, bytes);
    return ledger_alloc(category, bytes);
}

void device_host_free(void *block)
{
    if (block == NULL)
        return;
    if (device.cuda != NULL) {
        check_no_copy_touches("device_host_free", block,
                              device.cuda->host_block_bytes(block));
        device.cuda->host_free(block);
        return;
    }
    if (!memory_category_is_host(ledger_block_category(block)))
        device_check_failed("device_host_free", "a block of device memory: "
                            "free it with device_free");
    check_no_copy_touches("device_host_free", block,
                          ledger_block_bytes(block));
    ledger_free(block);
}

/* ---- Copies ---------------------------------------------------------------- */

/* The checks every copy makes before it starts: 0, or -1 with the line. */
static int check_copy(const char *function, const void *dst, const void *src,
                      size_t bytes, int to_device, char *error,
                      size_t error_len)
{
    require_open(function);
    if (dst == NULL || src == NULL) {
        snprintf(error, error_len, "%s: a NULL %s", function,
                 dst == NULL ? "destination" : "source");
        return -1;
    }
    lock();
    int status = check_device_range(function,
                                    to_device ? "the destination"
                                              : "the source",
                                    to_device ? dst : src, bytes, error,
                                    error_len);
    unlock();
    return status;
}

/* Counts a copy that starts now. (Called with the lock held.) */
static void count_copy(size_t bytes, int to_device)
{
    if (to_device) {
        device.traffic.to_device += bytes;
        device.traffic.copies_to_device++;
    } else {
        device.traffic.to_host += bytes;
        device.traffic.copies_to_host++;
    }
}

/* Seconds the caller waited for copies in one direction (with the lock
 * held). */
static void count_waiting(int to_device, double seconds)
{
    if (to_device)
        device.traffic.waited_to_device += seconds;
    else
        device.traffic.waited_to_host += seconds;
}

static int copy_blocking(const char *function, void *dst, const void *src,
                         size_t bytes, int to_device, char *error,
                         size_t error_len)
{
    if (check_copy(function, dst, src, bytes, to_device, error,
                   error_len) != 0)
        return -1;
    const double start = timer_now();
    lock();
    count_copy(bytes, to_device);
    int status = 0;
    if (device.cuda != NULL)
        status = device.cuda->copy(dst, src, bytes, to_device, error,
                                   error_len);
    else
        memcpy(dst, src, bytes);
    count_waiting(to_device, timer_now() - start);
    unlock();
    return status;
}

int device_copy_to_device(void *device_dst, const void *host_src,
                          size_t bytes, char *error, size_t error_len)
{
    return copy_blocking("device_copy_to_device", device_dst, host_src,
                         bytes, 1, error, error_len);
}

int device_copy_to_host(void *host_dst, const void *device_src, size_t bytes,
                        char *error, size_t error_len)
{
    return copy_blocking("device_copy_to_host", host_dst, device_src, bytes,
                         0, error, error_len);
}

/* Whether `copy` is in the list of pending copies: the list, not the
 * struct's own flag, decides, so that a struct the caller never set up
 * cannot pass for a pending one. (Called with the lock held.) */
static bool is_pending(const device_copy *copy)
{
    for (const device_copy *c = device.pending; c != NULL; c = c->next)
        if (c == copy)
            return true;
    return false;
}

static int copy_async(const char *function, void *dst, const void *src,
                      size_t bytes, int to_device, device_copy *copy,
                      char *error, size_t error_len)
{
    if (check_copy(function, dst, src, bytes, to_device, error,
                   error_len) != 0)
        return -1;
    if (copy == NULL) {
        snprintf(error, error_len, "%s: a NULL device_copy", function);
        return -1;
    }
    lock();
    if (is_pending(copy)) {
        unlock();
        snprintf(error, error_len, "%s: this device_copy is pending already "
                 "(%zu bytes %s): device_wait for it before starting another "
                 "with it", function, copy->bytes,
                 copy->to_device ? "to the device" : "to the host");
        return -1;
    }
    *copy = (device_copy){ .dst = dst, .src = src, .bytes = bytes,
                           .to_device = to_device, .pending = true };
    if (device.cuda != NULL) {
        if (device.cuda->copy_async(copy, error, error_len) != 0) {
            unlock();
            copy->pending = false;
            return -1;
        }
    } else {
        /* Every byte 0xff: NaN in fp32 and in bf16, until the wait. */
        memset(dst, 0xff, bytes);
    }
    count_copy(bytes, to_device);
    copy->next = device.pending;
    device.pending = copy;
    device.pending_count++;
    unlock();
    return 0;
}

int device_copy_to_device_async(void *device_dst, const void *host_src,
                                size_t bytes, device_copy *copy, char *error,
                                size_t error_len)
{
    return copy_async("device_copy_to_device_async", device_dst, host_src,
                      bytes, 1, copy, error, error_len);
}

int device_copy_to_host_async(void *host_dst, const void *device_src,
                              size_t bytes, device_copy *copy, char *error,
                              size_t error_len)
{
    return copy_async("device_copy_to_host_async", host_dst, device_src,
                      bytes, 0, copy, error, error_len);
}

int device_wait(device_copy *copy, char *error, size_t error_len)
{
    if (copy == NULL) {
        snprintf(error, error_len, "device_wait: a NULL device_copy");
        return -1;
    }
    lock();
    if (!is_pending(copy)) {
        unlock();
        snprintf(error, error_len, "device_wait: this copy is not pending "
                 "(never started, or waited for already)");
        return -1;
    }
    int status = 0;
    const double start = timer_now();
    if (device.cuda != NULL)
        status = device.cuda->wait(copy, error, error_len);
    else
        memcpy(copy->dst, copy->src, copy->bytes);
    count_waiting(copy->to_device, timer_now() - start);
    device_copy **link = &device.pending;
    while (*link != copy)
        link = &(*link)->next;
    *link = copy->next;
    copy->next = NULL;
    copy->pending = false;
    device.pending_count--;
    unlock();
    return status;
}

size_t device_pending_copies(void)
{
    lock();
    const size_t pending = device.pending_count;
    unlock();
    return pending;
}

device_traffic device_traffic_total(void)
{
    lock();
    const device_traffic traffic = device.traffic;
    unlock();
    return traffic;
}

void device_traffic_reset(void)
{
    lock();
    device.traffic = (device_traffic){ 0 };
    unlock();
}
