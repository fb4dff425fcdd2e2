/* A device: memory of its own, and copies between it and the host, every
 * byte counted by direction (lesson 07, ZeRO-Offload).
 *
 * ZeRO-Offload keeps the model's bf16 parameters on the device, where
 * forward and backward run, and everything the optimizer needs in the
 * host's memory, where the CPU updates it. What crosses between the two
 * each step is the point of the lesson, so every copy goes through here
 * and is counted.
 *
 * Two backends:
 *   cpu   always there: the device is a capacity-limited arena in this
 *         process's own memory that behaves like a small GPU. Its
 *         capacity is the memory ledger's cap (memory_ledger.h): an
 *         allocation past it fails with the ledger's line, "rank R: device
 *         out of memory: asked X for CATEGORY, free Y of Z". While it is
 *         open, every block of a device category comes from the arena
 *         (device_alloc's, and ledger_alloc's: lesson 06's buckets, the
 *         model's activations). The arena is a mapping of its own that
 *         host code cannot read or write, as it cannot a GPU's memory:
 *         only the device layer's copies, and the given code that
 *         computes on device memory in place (the model's layers, the
 *         collectives, MPI calls; device_access_begin below), reach it.
 *         Anything else that touches it (a memcpy from a device pointer,
 *         a loop over one) stops the program with one line that names
 *         the block it touched and the code that was running, status 1.
 *         Copies are real copies; an asynchronous copy lands only at its
 *         device_wait: until then its destination holds NaN (every byte
 *         0xff: a NaN in fp32 and in bf16), so code that reads it too
 *         early sees NaN instead of a plausible stale value. Its source
 *         must not change before the wait either: a GPU copies it at any
 *         moment in between. The source of a copy (host memory up, device
 *         memory down) is hashed at the start and at the wait, and a
 *         source written in between (by host code; by a kernel, a
 *         collective or a copy) stops the program, naming the copy and
 *         the code that started it. Copies run in the order they start,
 *         as through a GPU's one copy stream: a copy down started after a
 *         copy up into its source delivers what that copy wrote, and one
 *         started before it what was there before. A copy's host end, in
 *         a block of device_host_alloc, is bounds-checked as its device
 *         end is.
 *   cuda  a GPU, through the CUDA runtime (cudaMalloc, pinned host memory,
 *         a stream for copies, events to wait on). Opened only where the
 *         toolkit was built with nvcc and a device is present; otherwise
 *         device_open says why.
 *
 * One device per process (the ledgers are per process too). The counters
 * and the pending copies are guarded by a lock: a thread may start and
 * wait for copies while another computes. Allocation is not
 * (ledger_alloc is not): allocate from one thread. The counters and the
 * pending copies are the device's own: the counters lie in the arena
 * (cpu), out of host code's reach like its blocks, and a pending copy is
 * landed and counted as it was started, whatever its device_copy says
 * meanwhile. */
#ifndef ZZ_DEVICE_H
#define ZZ_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory_ledger.h"

typedef enum { DEVICE_CPU, DEVICE_CUDA } device_backend;

/* Room enough for any error line the functions below write into `error`
 * (a line that names a copy's two ends, its block and the code that
 * started it runs to a few hundred bytes). */
enum { DEVICE_ERROR_LEN = 768 };

/* Opens the device: `backend` by name ("cpu" or "cuda"), with `capacity`
 * bytes of memory (the ledger's cap from now on, on the device's
 * categories; cuda: at most this much of the GPU's, or
 * MEMORY_LEDGER_NO_CAP for all of it). `rank`, the MPI rank or -1, is
 * named in refusals. The traffic counters start at 0. Returns 0, or -1
 * with one line in `error`: an unknown backend ("unknown backend 'gpu':
 * say cpu or cuda"), a capacity of 0, a device open already, cuda where
 * the program was built without it ("cuda: the toolkit was built without
 * nvcc, ...") or there is no device ("cuda: no CUDA device:
 * cudaGetDeviceCount: ...").
 *
 * The rules below that a correct program cannot break (device memory
 * from device_alloc only, host memory from device_host_alloc only, a
 * device open before allocating or copying, no block freed under a
 * pending copy, a pending copy's device_copy left as it was started) are
 * checked: breaking one stops the program with one line on stderr,
 * "FUNCTION: what was wrong", and exit status 1. */
int device_open(const char *backend, size_t capacity, int rank, char *error,
                size_t error_len);

/* Frees nothing the caller allocated, and removes the cap; fails (returns
 * -1, with a line, the device still open) if copies are still pending,
 * which would be a bug in the caller. (cpu: blocks still allocated keep
 * the arena until they are freed with device_free or ledger_free.) */
int device_close(char *error, size_t error_len);

device_backend device_backend_in_use(void);
const char *device_backend_name(void);   /* "cpu", "cuda"; "none" before
                                            the first device_open */
size_t device_capacity(void);            /* 0 while none is open */

/* Device memory, `bytes`, counted under `category` (not a MEMORY_HOST_*
 * one) in the memory ledger (the device's own ledger: its peaks are what
 * a device holds). NULL with nothing allocated and the reason in
 * memory_ledger_last_error() when it does not fit. Free with
 * device_free. */
void *device_alloc(memory_category category, size_t bytes);

/* A block with a copy still pending into or out of it (any of its bytes)
 * is not freed: the program stops with a line naming the block and the
 * copy, "device_free: block 0x... (N bytes) is the destination of a
 * pending copy of ...", status 1 (the bug the arena exists to catch: a
 * GPU would copy freed memory). NULL: nothing. */
void device_free(void *block);

/* Host memory for copies to and from the device (cuda: pinned, which an
 * asynchronous copy needs; cpu: the ledger's), counted under `category`
 * (MEMORY_HOST_*, which the cap does not limit). NULL and the ledger's
 * line when the system has none. Free with device_host_free, which stops
 * the program as device_free does under a pending copy. */
void *device_host_alloc(memory_category category, size_t bytes);
void device_host_free(void *block);

/* The start of the block of device_host_alloc (not freed) that holds all
 * of [start, start + bytes), or NULL where none does: given code checks
 * that what must live in host memory does, in a block of its own or in a
 * part of a larger one. */
void *device_host_block_of(const void *start, size_t bytes);

/* Blocking copies: when they return 0, dst holds src's bytes. -1 with a
 * line in `error`: a NULL pointer, a device end outside every device
 * block, a host end in device memory, or (cuda) a failed copy. */
int device_copy_to_device(void *device_dst, const void *host_src,
                          size_t bytes, char *error, size_t error_len);
int device_copy_to_host(void *host_dst, const void *device_src,
                        size_t bytes, char *error, size_t error_len);

/* An asynchronous copy, started by one of the two functions below and
 * finished by device_wait. The caller owns the struct and keeps it (and
 * both ends of the copy) alive and unchanged until the wait: the device
 * keeps its own record of each pending copy, and device_wait stops the
 * program if the struct no longer says what the copy was. */
typedef struct device_copy {
    void *dst;
    const void *src;
    size_t bytes;
    int to_device;              /* 1: host to device, 0: device to host */
    bool pending;               /* true from the copy's start until its
                                   device_wait returns: read it to know
                                   whether a wait is due */
    void *event;                /* cuda: the event recorded after it */
} device_copy;

/* Starts a copy and returns at once; dst is NaN (cpu) or undefined (cuda)
 * until device_wait(copy). The host end lies in a block of
 * device_host_alloc (page-locked, as a GPU's asynchronous copies need).
 * Returns 0, or -1 with a line in `error` and nothing started (a struct
 * already pending, a NULL pointer, a host end outside the host blocks or
 * past one's end). A copy of 0 bytes checks no address (CUDA's read
 * none): it starts, moves nothing, and is waited for like any. The device
 * checks against its own list of pending copies, not the struct's flag:
 * a fresh, uninitialised struct counts as not pending, whatever its
 * bytes. */
int device_copy_to_device_async(void *device_dst, const void *host_src,
                                size_t bytes, device_copy *copy,
                                char *error, size_t error_len);
int device_copy_to_host_async(void *host_dst, const void *device_src,
                              size_t bytes, device_copy *copy, char *error,
                              size_t error_len);

/* Waits until the copy has landed; then dst holds src's bytes as they
 * were when the copy started (cpu: as they were when the device copied
 * them, at this wait or, for a copy to the device, earlier, when the
 * device opened its memory for another copy; keep src unchanged until
 * the wait). Waiting for a copy that is not pending is an error (-1). */
int device_wait(device_copy *copy, char *error, size_t error_len);

/* How many copies are pending now. */
size_t device_pending_copies(void);

/* How many of them go to the device (copies up). */
size_t device_pending_copies_to_device(void);

/* Bytes copied since the last reset, by direction, counted when each copy
 * starts (blocking and asynchronous alike), and how many copies. */
typedef struct {
    uint64_t to_device, to_host;
    uint64_t copies_to_device, copies_to_host;
    /* Seconds the callers spent in blocking copies and device_wait, by
     * direction: what the copies cost the program where they were not
     * hidden (cpu: the copies themselves, made at the wait). */
    double waited_to_device, waited_to_host;
    /* Copies to the device waited for at once: blocking ones, and
     * asynchronous ones waited for by the thread that started them before
     * it started another copy up (busy work in between is no other tile),
     * or after under DEVICE_AT_ONCE_S of work (its CPU time) between the
     * start and the wait, so the copy hid behind nothing (a tile of the
     * CPU Adam takes some 50 us here; the calls around a copy, well under
     * 10); and
     * how many threads started copies to the device. A thread's last copy
     * of a phase may be waited so with nothing left to hide it behind;
     * every one of them is not overlap. */
    uint64_t copies_to_device_waited_at_once;
    uint64_t threads_copying_to_device;
    /* The most bytes one copy to the device carried. */
    uint64_t largest_copy_to_device;
    /* Copies to the host waited for at once: blocking ones, and
     * asynchronous ones waited for by the thread that started them, in the
     * same call of a student's hook as the start (device_name_host_code
     * marks the calls), so that none of the given code run between the
     * calls (the next layer's backward) hid them. */
    uint64_t copies_to_host_waited_at_once;
} device_traffic;

#define DEVICE_AT_ONCE_S 10e-6

device_traffic device_traffic_total(void);
void device_traffic_reset(void);

/* ---- For given code only (tests/symbols refuses these in a student's file)
 *
 * Given code that computes on device memory in place runs between
 * device_access_begin and device_access_end: the model's layer steps (the
 * drivers), the collectives (collectives.c), every MPI call and every MPI
 * request still in flight (comm_ledger.c: MPI reads and writes the
 * buffers it is given, device memory or not, and another rank's MPI may
 * read this rank's buffers while a request is open). The pairs nest, on
 * any thread; while any is open the arena can be read and written by
 * every thread of the process (the protection is the process's, not a
 * thread's). Nothing without a cpu device. device_access_begin returns
 * whether it opened anything: a section that may outlive the device (or
 * begin before it) calls device_access_end only when it did. */
bool device_access_begin(void);
void device_access_end(void);

/* Names the host code that this thread runs from now on, for the line
 * that stops a program whose host code touched device memory:
 * "offload_update (lessons/07-offload/offload.c, TODOs 5-6)"; NULL for
 * none. A thread that names nothing is said to run what the thread that
 * opened the device named last. The string must outlive the naming. */
void device_name_host_code(const char *where);

/* The arena's address range, [*start, *start + *bytes), or *bytes = 0
 * where there is none (cuda, no device): for given code that must tell
 * device memory from host memory. */
void device_arena_range(const void **start, size_t *bytes);

#endif
