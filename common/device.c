/* The device layer: the cpu backend, and the way to the cuda one.
 *
 * The cpu backend's device memory is an arena: one anonymous mapping of
 * its own, outside the heap, that the memory ledger takes every block of
 * a device category from while the device is open
 * (ledger_use_device_memory), so a device's peaks are the ledger's and an
 * allocation past the capacity is refused with the ledger's line. The
 * arena is PROT_NONE: host code cannot read or write it, as it cannot a
 * GPU's memory. It opens (PROT_READ | PROT_WRITE) only while the device
 * layer copies into or out of it, and while given code that computes on
 * device memory in place runs between device_access_begin and
 * device_access_end; the opens nest, counted in arena.access. A touch at
 * any other time faults, and the fault handler below says which block it
 * hit and which code was running, and ends the program with status 1.
 *
 * Every change of the arena's mapping goes through three functions:
 * arena_map (at device_open), arena_unmap (when the device is closed and
 * its last block freed) and arena_protect (every open and close, the only
 * one that runs during training). A run-time boundary that forbids
 * changing the arena's protection from anywhere else needs to allow just
 * those three.
 *
 * The device's books (the bytes copied each way, and how many copies)
 * live in the arena's first page, as far from host code as the blocks
 * are. The pending copies are the device's own records, not the callers'
 * structs: a copy lands, and is booked, as it was started, and
 * device_wait stops the program if the caller's device_copy no longer
 * says what the copy was. A copy counts from its start: the books take it
 * when it lands, and until then device_traffic_total adds the pending
 * records.
 *
 * What makes the arena a device is the asynchronous copy: it lands only
 * at device_wait, and until then its destination reads NaN, so a program
 * that forgets to wait computes with NaN and sees it at once, where a real
 * GPU would hand it plausible stale numbers some of the time. A copy to
 * the host has its destination, host memory, set to NaN when it starts. A
 * copy to the device is settled only when the arena next opens, since
 * nothing can read its destination before then: for a kernel, its
 * destination becomes NaN; for another copy, it lands early (open_arena
 * says why that is safe), and its own wait has nothing left to do. A run
 * of tiles sent up and then waited for costs one pass over their bytes
 * and one open of the arena.
 *
 * The pending copies, the counters and the arena's tables are guarded by
 * one lock. The copies themselves run under it too: one copy at a time,
 * as through a GPU's copy engine, and a copy cannot land in a block that
 * another thread is freeing. */
#define _DEFAULT_SOURCE
#include "device.h"

#include "boundary.h"

#include "device_cuda.h"
#include "signal_chain.h"
#include "stack.h"
#include "timer.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* What the books hold: device_traffic's byte and copy counts. */
typedef struct {
    uint64_t to_device, to_host, copies_to_device, copies_to_host;
} device_books;

/* A copy started and not yet waited for, as it was started. */
typedef struct {
    device_copy *copy;          /* the caller's struct, which names it */
    void *dst;
    const void *src;
    size_t bytes;
    int to_device;
    void *event;                /* cuda: the event recorded after it */
    /* cpu, to the device: what its destination holds. Nothing can read
     * it while the arena is closed (UNSEEN); code that may read any block
     * finds NaN there (POISONED); a copy landed early, when the arena
     * opened for another copy, holds its source's bytes (LANDED). To the
     * host: LANDED when a later copy up was to overwrite its source. */
    enum { UNSEEN, POISONED, LANDED } destination;
    bool booked;                /* the books have it (landed early) */
    /* cpu: a hash of the source when the copy started (host memory for a
     * copy to the device, device memory for one to the host), and the
     * host code that started it (device_name_host_code). */
    uint64_t source_hash;
    const char *started_in;
    uint64_t order;             /* copies started before it: fewer */
    const void *thread;         /* the thread that started it (its mark) */
    double thread_cpu;          /* that thread's CPU time then */
    uint64_t hook_entry;        /* the opener's hook call it started in */
    uint64_t ups_then;          /* its thread's copies up started by then */
} pending_copy;

static struct {
    bool open;
    bool opened_once;            /* for the name before the first open */
    device_backend backend;
    size_t capacity;
    int rank;
    const device_cuda_backend *cuda;   /* while the cuda backend is used */
    pending_copy *pending;       /* started, not yet waited for */
    size_t pending_count, pending_room;
    uint64_t copies_started;     /* the next copy's order */
    /* Copies to the device waited for at once, and the threads that
     * started copies to the device (their marks), since the last reset. */
    uint64_t up_waited_at_once, down_waited_at_once;
    const void *up_threads[64];
    size_t up_thread_count;
    size_t largest_up;           /* the most bytes one copy up carried */
    /* The blocks device_host_alloc gave, so that a copy's host end is
     * bounds-checked as its device end is. */
    struct host_block {
        uintptr_t start;
        size_t bytes;
        const char *allocated_in;  /* the host code then, or NULL */
    } *host_blocks;
    size_t host_block_count, host_block_room;
    double waited_to_device, waited_to_host;
    device_books cuda_books;     /* the books where there is no arena */
} device;
static pthread_mutex_t device_lock = PTHREAD_MUTEX_INITIALIZER;

/* The cpu device's arena. Its tables are the heap's (the fault handler
 * reads them); its books are its first page. */
static struct {
    unsigned char *base;         /* the mapping, NULL when there is none */
    size_t size;
    device_books *books;         /* at base */
    int access;                  /* opens now in force */
    /* The blocks allocated, and the stretches free between them, each
     * table in address order (gaps) or in none (blocks). A block's span is
     * its bytes rounded up to the 64-byte alignment (at least 64). */
    struct arena_block {
        uintptr_t start;
        size_t bytes, span;
        memory_category category;
        const char *allocated_in;  /* the host code then, or NULL */
    } *blocks;
    size_t block_count, block_room;
    struct arena_gap { uintptr_t start; size_t bytes; } *gaps;
    size_t gap_count, gap_room;
} arena;
/* Whether the arena is mapped: read without the lock by
 * device_access_begin's fast path and by the fault handler. */
static atomic_bool arena_mapped;

enum { BLOCK_ALIGNMENT = 64, BOOKS_BYTES = 4096 };
/* The arena's start, aligned so that the kernel can back it with 2 MiB
 * pages: an open or a close then changes a few page-table entries, not
 * one for every 4 KiB. */
#define ARENA_ALIGNMENT ((size_t)2 << 20)

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

/* ---- The arena's mapping and protection --------------------------------- */

/* The one place the arena's protection changes: PROT_NONE, or PROT_READ |
 * PROT_WRITE, over the whole mapping (books and blocks). */
static void arena_protect(int protection)
{
    /* Through the boundary's gate: behind the grader's boundary, no other
     * call may change the arena's protection (boundary.h). */
    if (boundary_gate(SYS_mprotect, (long)(uintptr_t)arena.base,
                      (long)arena.size, protection) != 0) {
        char why[160];
        snprintf(why, sizeof why, "mprotect of the cpu device's arena (%zu "
                 "bytes at %p) failed: %s", arena.size, (void *)arena.base,
                 strerror(errno));
        device_check_failed("device", why);
    }
}

/* Maps `bytes` of arena, inaccessible, at an address aligned to
 * ARENA_ALIGNMENT, and asks for large pages: base and size set, or -1
 * with errno set by mmap. */
static int arena_map(size_t bytes)
{
    const size_t size = (bytes + ARENA_ALIGNMENT - 1) / ARENA_ALIGNMENT *
                        ARENA_ALIGNMENT;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#ifdef MAP_NORESERVE
    /* Address space, not memory: only pages written are the system's. */
    flags |= MAP_NORESERVE;
#endif
    unsigned char *raw = mmap(NULL, size + ARENA_ALIGNMENT, PROT_NONE, flags,
                              -1, 0);
    if (raw == MAP_FAILED)
        return -1;
    const uintptr_t aligned = ((uintptr_t)raw + ARENA_ALIGNMENT - 1) /
                              ARENA_ALIGNMENT * ARENA_ALIGNMENT;
    const size_t head = aligned - (uintptr_t)raw;
    const size_t tail = ARENA_ALIGNMENT - head;
    if ((head > 0 && munmap(raw, head) != 0) ||
        (tail > 0 && munmap((unsigned char *)aligned + size, tail) != 0))
        device_check_failed("device", "munmap of the arena's unaligned "
                            "ends failed");
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    /* Advice: where large pages are not to be had, small ones do. Under
     * the grader, which counts a rank's resident memory from outside
     * (boundary.h), small ones always: a device block of a few bytes would
     * otherwise be 2 MiB of the kernel's count. */
    (void)madvise((void *)aligned, size, getenv("ZZ_BOUNDARY") != NULL
                                             ? MADV_NOHUGEPAGE
                                             : MADV_HUGEPAGE);
#endif
    arena.base = (unsigned char *)aligned;
    arena.size = size;
    boundary_guard_range(arena.base, arena.size);
    return 0;
}

static void arena_unmap(void)
{
    if (boundary_gate(SYS_munmap, (long)(uintptr_t)arena.base,
                      (long)arena.size, 0) != 0)
        device_check_failed("device", "munmap of the cpu device's arena "
                            "failed");
}

static void book(size_t bytes, int to_device);

/* A pending copy made now, ahead of its wait, its bytes booked: for the
 * device's own reasons (the arena opened for another copy, stream order),
 * never visibly to the caller. (Arena open, lock held.) */
static void land(pending_copy *p)
{
    memcpy(p->dst, p->src, p->bytes);
    p->destination = LANDED;
    if (!p->booked) {
        book(p->bytes, p->to_device);
        p->booked = true;
    }
}

/* Opens the arena (or counts one more open), and settles what the
 * destinations of pending copies to the device hold, before anything can
 * read them. Code that may read any block (device_start NULL: a kernel, a
 * collective) finds NaN in every one. A copy, whose device end is
 * [device_start, device_start + bytes), finds NaN in those it overlaps,
 * but for the copies to the device started before it (order below
 * `after`): it reads what they wrote, as a GPU's one copy stream runs its
 * copies in the order they start. When it is the only thing to open the
 * arena, the others land now, early. That is safe: their sources are what
 * they will be at their waits (the caller keeps them unchanged until
 * then, and device_wait checks), only this copy runs with the arena open
 * until it closes again, and the next kernel to open it finds NaN there
 * again if they are still pending. Their waits then need no open of their
 * own: a run of tiles sent up and then waited for one by one costs one
 * open, not one a tile. (Called with the lock held.) */
static void open_arena_after(const void *device_start, size_t bytes,
                             uint64_t after)
{
    const bool alone = arena.access++ == 0;
    if (alone)
        arena_protect(PROT_READ | PROT_WRITE);
    const uintptr_t begin = (uintptr_t)device_start;
    const uintptr_t end = begin + (bytes > 0 ? bytes : 1);
    for (size_t k = 0; k < device.pending_count; k++) {
        pending_copy *p = &device.pending[k];
        if (!p->to_device)
            continue;
        const uintptr_t first = (uintptr_t)p->dst;
        const bool seen = device_start == NULL ||
                          (first < end &&
                           first + (p->bytes > 0 ? p->bytes : 1) > begin);
        const bool earlier = device_start != NULL && p->order < after;
        if (seen && earlier && p->destination != LANDED) {
            land(p);
        } else if (seen && !earlier && p->destination != POISONED) {
            memset(p->dst, 0xff, p->bytes);
            p->destination = POISONED;
        } else if (!seen && alone && p->destination != LANDED) {
            land(p);
        }
    }
}

/* The arena opened for code, or for a copy that comes after no pending
 * one. */
static void open_arena(const void *device_start, size_t bytes)
{
    open_arena_after(device_start, bytes, 0);
}

static void close_arena(void)
{
    if (--arena.access == 0)
        arena_protect(PROT_NONE);
}

/* ---- Host code that touches the arena -------------------------------------
 * The fault handler: a fault inside the arena is host code reading or
 * writing device memory outside the device layer, and ends the program
 * with one line; any other fault goes to the handler that was there
 * before (MPI's, or the system's). */

static struct sigaction previous_segv, previous_bus;
static bool handler_installed;

/* The last host blocks device_host_free freed, so that a second free of
 * one, or a touch of one (its memory is unmapped), says which block and
 * where it was freed. Written under the lock; the fault handler reads it
 * as it stands. */
enum { FREED_HOST_BLOCKS = 64 };
static struct freed_host_block {
    uintptr_t start;
    size_t bytes;
    const char *allocated_in, *freed_in;
} freed_host_blocks[FREED_HOST_BLOCKS];
static _Atomic size_t freed_host_block_count;

static const struct freed_host_block *freed_host_block_at(uintptr_t at,
                                                          bool starts)
{
    size_t count = atomic_load(&freed_host_block_count);
    size_t kept = count < FREED_HOST_BLOCKS ? count : FREED_HOST_BLOCKS;
    for (size_t k = 1; k <= kept; k++) {   /* the latest first */
        const struct freed_host_block *b =
            &freed_host_blocks[(count - k) % FREED_HOST_BLOCKS];
        if (starts ? at == b->start
                   : at >= b->start && at - b->start < b->bytes)
            return b;
    }
    return NULL;
}
static _Thread_local const char *code_here;  /* device_name_host_code */
static _Thread_local char thread_mark;        /* its address: the thread */
/* Copies up of at least a byte this thread has started. */
static _Thread_local uint64_t ups_started;

static _Atomic(const char *) code_of_opener;
static pthread_t opener;

/* This thread's CPU time, in seconds (0 where the clock is missing). */
static double thread_cpu_now(void)
{
    struct timespec now;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0)
        return 0;
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* How many times the opener's thread has entered named host code (a
 * driver's call of a student's hook): a copy started and waited for in
 * the same call hid behind none of the given code that runs between the
 * calls (the next layer's backward). */
static _Atomic uint64_t hook_entries;

void device_name_host_code(const char *where)
{
    code_here = where;
    if (device.opened_once && pthread_equal(pthread_self(), opener)) {
        atomic_store(&code_of_opener, where);
        if (where != NULL)
            atomic_fetch_add(&hook_entries, 1);
    }
}

/* The host code running now, as given code named it: this thread's, or
 * (on a thread of its, an OpenMP worker's) the opener's; NULL if none. */
static const char *host_code_now(void)
{
    return code_here != NULL ? code_here : atomic_load(&code_of_opener);
}

/* An allocation whose category is the other kind of memory: either the
 * category is wrong or the function is, and the category says which the
 * code meant (MEMORY_PARAMETERS from device_host_alloc: the parameters
 * belong on the device, so device_alloc). Stops the program, as every
 * misuse of the device does (device_check_failed). */
static void wrong_kind_of_memory(const char *function,
                                 memory_category category, const char *is,
                                 const char *its_function, const char *holds,
                                 const char *categories)
{
    const char *now = host_code_now();
    char name[64] = "MEMORY_";
    for (const char *c = memory_category_name(category);
         *c != '\0' && strlen(name) < sizeof name - 1; c++)
        name[strlen(name)] = (char)toupper((unsigned char)*c);
    char why[512];
    snprintf(why, sizeof why, "%s is a category of %s, which %s allocates; "
             "%s allocates %s, whose categories are %s%s%s%s", name, is,
             its_function, function, holds, categories, now ? " (in " : "",
             now ? now : "", now ? ")" : "");
    device_check_failed(function, why);
}

/* What the line says was touched: the block (and where in it), the books,
 * or memory of the arena that no block holds. */
static void describe_touch(uintptr_t at, char *what, size_t len)
{
    if (at < (uintptr_t)arena.base + BOOKS_BYTES) {
        snprintf(what, len, "the device's books (its traffic counters), "
                 "at %p", (void *)at);
        return;
    }
    for (size_t k = 0; k < arena.block_count; k++) {
        const struct arena_block *b = &arena.blocks[k];
        if (at >= b->start && at - b->start < b->span) {
            snprintf(what, len, "byte %zu of a device block of %zu bytes "
                     "of %s, at %p", (size_t)(at - b->start), b->bytes,
                     memory_category_name(b->category), (void *)at);
            return;
        }
    }
    snprintf(what, len, "device memory at %p that no block holds (freed, or "
             "past a block's end)", (void *)at);
}

static void exit_on_device_touch(int signal_number, siginfo_t *info,
                                 void *context)
{
    const uintptr_t at = (uintptr_t)info->si_addr;
    const struct freed_host_block *freed = freed_host_block_at(at, false);
    if (freed != NULL) {
        const char *where = host_code_now();
        char rank[32] = "", line[1024];
        if (device.rank >= 0)
            snprintf(rank, sizeof rank, "rank %d: ", device.rank);
        int length = snprintf(line, sizeof line, "device: %s%s touched "
                              "byte %zu of a host block of %zu bytes "
                              "(device_host_alloc%s%s) that device_host_free "
                              "freed%s%s: a block is used and freed once, "
                              "at the end, by whoever owns it\n",
                              rank, where != NULL ? where : "host code",
                              (size_t)(at - freed->start), freed->bytes,
                              freed->allocated_in ? ", in " : "",
                              freed->allocated_in ? freed->allocated_in : "",
                              freed->freed_in ? " in " : "",
                              freed->freed_in ? freed->freed_in : "");
        if (length > 0 && write(STDERR_FILENO, line,
                                (size_t)length < sizeof line
                                    ? (size_t)length : sizeof line - 1) < 0)
            _exit(1);
        _exit(1);
    }
    if (!atomic_load(&arena_mapped) || at < (uintptr_t)arena.base ||
        at - (uintptr_t)arena.base >= arena.size) {
        signal_chain(signal_number == SIGBUS ? &previous_bus : &previous_segv,
              signal_number, info, context);
        return;
    }
    const char *where = host_code_now();
    char rank[32] = "", what[192], line[1024];
    if (device.rank >= 0)
        snprintf(rank, sizeof rank, "rank %d: ", device.rank);
    describe_touch(at, what, sizeof what);
    int length = snprintf(line, sizeof line, "device: %s%s touched device "
                          "memory outside the device layer: %s. Device "
                          "memory is the device's, as a GPU's is: host code "
                          "moves it with device_copy_to_host and "
                          "device_copy_to_device (or their _async forms, "
                          "common/device.h) and never reads or writes it in "
                          "place; a memcpy, a loop or a function of your own "
                          "on a device pointer stops here\n", rank,
                          where != NULL ? where : "host code", what);
    if (length > 0) {
        size_t left = (size_t)length < sizeof line ? (size_t)length
                                                   : sizeof line - 1;
        const char *next = line;
        while (left > 0) {
            ssize_t wrote = write(STDERR_FILENO, next, left);
            if (wrote <= 0)
                break;
            next += wrote;
            left -= (size_t)wrote;
        }
    }
    _exit(1);
}

static void install_fault_handler(void)
{
    if (handler_installed)
        return;
    if (signal_chain_install(exit_on_device_touch, &previous_segv,
                             &previous_bus) != 0)
        device_check_failed("device_open", "sigaction failed for the "
                            "arena's fault handler");
    handler_installed = true;
}

/* ---- The arena's blocks ------------------------------------------------- */

static void *grow(void *table, size_t *room, size_t item)
{
    const size_t more = *room ? 2 * *room : 64;
    void *grown = realloc(table, more * item);
    if (grown == NULL)
        device_check_failed("device", "no memory for the arena's tables");
    *room = more;
    return grown;
}

/* The block that starts at `block`, or NULL. (Lock held.) */
static struct arena_block *block_at(const void *block)
{
    for (size_t k = 0; k < arena.block_count; k++)
        if (arena.blocks[k].start == (uintptr_t)block)
            return &arena.blocks[k];
    return NULL;
}

/* The first free stretch that fits: its block, or NULL. */
static void *arena_alloc(memory_category category, size_t bytes)
{
    if (bytes > SIZE_MAX - BLOCK_ALIGNMENT)
        return NULL;
    size_t span = (bytes + BLOCK_ALIGNMENT - 1) / BLOCK_ALIGNMENT *
                  BLOCK_ALIGNMENT;
    if (span == 0)
        span = BLOCK_ALIGNMENT;
    lock();
    size_t k = 0;
    while (k < arena.gap_count && arena.gaps[k].bytes < span)
        k++;
    if (k == arena.gap_count) {
        unlock();
        return NULL;
    }
    const uintptr_t start = arena.gaps[k].start;
    arena.gaps[k].start += span;
    arena.gaps[k].bytes -= span;
    if (arena.gaps[k].bytes == 0) {
        memmove(&arena.gaps[k], &arena.gaps[k + 1],
                (arena.gap_count - k - 1) * sizeof *arena.gaps);
        arena.gap_count--;
    }
    if (arena.block_count == arena.block_room)
        arena.blocks = grow(arena.blocks, &arena.block_room,
                            sizeof *arena.blocks);
    arena.blocks[arena.block_count++] =
        (struct arena_block){ start, bytes, span, category,
                              host_code_now() };
    unlock();
    return (void *)start;
}

static bool arena_find(const void *block, size_t *bytes,
                       memory_category *category)
{
    lock();
    const struct arena_block *b = block_at(block);
    if (b != NULL) {
        *bytes = b->bytes;
        *category = b->category;
    }
    unlock();
    return b != NULL;
}

static void forget_arena(void);

/* The block's span goes back among the gaps, joined to its neighbours. */
static void arena_free(void *block)
{
    lock();
    struct arena_block *b = block_at(block);
    if (b == NULL) {
        unlock();
        device_check_failed("device_free", "not a block of the arena");
    }
    const uintptr_t start = b->start;
    const size_t span = b->span;
    *b = arena.blocks[--arena.block_count];
    size_t k = 0;
    while (k < arena.gap_count && arena.gaps[k].start < start)
        k++;
    const bool joins_before = k > 0 && arena.gaps[k - 1].start +
                                           arena.gaps[k - 1].bytes == start;
    const bool joins_after = k < arena.gap_count &&
                             start + span == arena.gaps[k].start;
    if (joins_before && joins_after) {
        arena.gaps[k - 1].bytes += span + arena.gaps[k].bytes;
        memmove(&arena.gaps[k], &arena.gaps[k + 1],
                (arena.gap_count - k - 1) * sizeof *arena.gaps);
        arena.gap_count--;
    } else if (joins_before) {
        arena.gaps[k - 1].bytes += span;
    } else if (joins_after) {
        arena.gaps[k].start = start;
        arena.gaps[k].bytes += span;
    } else {
        if (arena.gap_count == arena.gap_room)
            arena.gaps = grow(arena.gaps, &arena.gap_room,
                              sizeof *arena.gaps);
        memmove(&arena.gaps[k + 1], &arena.gaps[k],
                (arena.gap_count - k) * sizeof *arena.gaps);
        arena.gaps[k] = (struct arena_gap){ start, span };
        arena.gap_count++;
    }
    /* A device closed with blocks still allocated kept its arena for
     * them: the last one gone, the arena goes too. */
    const bool last_of_closed = !device.open && arena.block_count == 0;
    unlock();
    if (last_of_closed)
        forget_arena();
}

static const ledger_device_memory arena_memory = { arena_alloc, arena_find,
                                                   arena_free };

/* Whether [start, start + bytes) touches the arena. */
static bool in_arena(const void *start, size_t bytes)
{
    if (arena.base == NULL)
        return false;
    const uintptr_t first = (uintptr_t)start, base = (uintptr_t)arena.base;
    const uintptr_t last = first + (bytes > 0 ? bytes - 1 : 0);
    return last >= base && first < base + arena.size;
}

/* Maps an arena for a device of `capacity` bytes: its books, and room for
 * blocks of twice the capacity, so that a program whose blocks fit the
 * capacity never finds the arena too fragmented to place one (what a
 * block leaves free between others is the cost). 0, or -1 with the line. */
static int make_arena(size_t capacity, char *error, size_t error_len)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t physical = pages > 0 && page > 0 ? (size_t)pages * (size_t)page
                                            : (size_t)1 << 34;
    size_t room = capacity < physical ? capacity : physical;
    size_t slack = (size_t)4 << 20;
    /* Twice the room where the address space allows it (ulimit -v), else
     * the room itself. */
    if (arena_map(BOOKS_BYTES + 2 * room + slack) != 0 &&
        arena_map(BOOKS_BYTES + room + slack) != 0) {
        snprintf(error, error_len, "cpu: no address space for the device's "
                 "arena of %zu bytes: %s (a smaller --device-memory, or a "
                 "higher ulimit -v)", BOOKS_BYTES + room + slack,
                 strerror(errno));
        return -1;
    }
    arena.books = (device_books *)arena.base;
    arena.access = 0;
    arena.block_count = 0;
    arena.gap_count = 0;
    if (arena.gap_room == 0)
        arena.gaps = grow(arena.gaps, &arena.gap_room, sizeof *arena.gaps);
    arena.gaps[arena.gap_count++] = (struct arena_gap){
        (uintptr_t)arena.base + BOOKS_BYTES, arena.size - BOOKS_BYTES };
    install_fault_handler();
    atomic_store(&arena_mapped, true);
    ledger_use_device_memory(&arena_memory);
    return 0;
}

/* The arena of a device closed, its last block freed: unmapped, and the
 * ledger back on the heap. */
static void forget_arena(void)
{
    ledger_use_device_memory(NULL);
    atomic_store(&arena_mapped, false);
    arena_unmap();
    arena.base = NULL;
    arena.books = NULL;
    arena.size = 0;
}

void device_arena_range(const void **start, size_t *bytes)
{
    *start = arena.base;
    *bytes = arena.size;
}

bool device_access_begin(void)
{
    if (!atomic_load(&arena_mapped))
        return false;
    lock();
    open_arena(NULL, 0);
    unlock();
    return true;
}

void device_access_end(void)
{
    if (!atomic_load(&arena_mapped))
        return;
    lock();
    /* An end whose begin found no arena (it came before device_open) has
     * nothing to close. */
    if (arena.access > 0)
        close_arena();
    unlock();
}

/* ---- Opening and closing ------------------------------------------------ */

int device_open(const char *backend, size_t capacity, int rank, char *error,
                size_t error_len)
{
    if (device.open) {
        snprintf(error, error_len, "the device is open already (one per "
                 "process): device_close it first");
        return -1;
    }
    /* Before a boundary: the messages on a device_copy that is a local
     * variable need to know the main thread's stack. */
    stack_find_main();
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
    if (arena.base != NULL) {
        snprintf(error, error_len, "the last cpu device's arena still holds "
                 "%zu blocks: free them (device_free) before opening "
                 "another device", arena.block_count);
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
    } else if (make_arena(capacity, error, error_len) != 0) {
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
    device.waited_to_device = device.waited_to_host = 0;
    device.cuda_books = (device_books){ 0 };
    opener = pthread_self();
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
    device.open = false;
    const bool empty = arena.base != NULL && arena.block_count == 0;
    unlock();
    if (empty)
        forget_arena();
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
        wrong_kind_of_memory("device_alloc", category, "host memory",
                             "device_host_alloc", "device memory",
                             "every other (MEMORY_PARAMETERS, "
                             "MEMORY_GRADIENTS, MEMORY_OPTIMIZER, ...)");
    if (device.cuda != NULL)
        return device.cuda->alloc(category, bytes);
    /* The ledger takes it from the arena. */
    return ledger_alloc(category, bytes);
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
    /* The block that holds the range's first byte; else one that ends
     * where the range starts (a range of 0 bytes there, or one that runs
     * past it). Blocks lie side by side in the arena: the one that starts
     * at `start` wins over the one that ends there. */
    const uintptr_t first = (uintptr_t)start;
    const struct arena_block *block = NULL;
    for (size_t k = 0; k < arena.block_count; k++) {
        const struct arena_block *b = &arena.blocks[k];
        if (first < b->start || first - b->start > b->bytes)
            continue;
        block = b;
        if (first - b->start < b->bytes)
            break;
    }
    if (block != NULL) {
        const size_t offset = first - block->start;
        if (bytes <= block->bytes - offset)
            return 0;
        /* Either the copy is wrong (the code running now, which the
         * caller names) or the block's size is (the code that allocated
         * it, named here). */
        const char *then = block->allocated_in;
        snprintf(error, error_len, "%s: %s, %zu bytes from %zu bytes into "
                 "a device block of %zu bytes (device_alloc%s%s), runs %zu bytes "
                 "past the block's end: check the copy's offset and count, "
                 "and the size the block was allocated with%s", function,
                 end, bytes, offset, block->bytes, then ? ", in " : "",
                 then ? then : "", bytes - (block->bytes - offset),
                 then ? " (there)" : "");
        return -1;
    }
    /* No block holds its first byte: one it runs into from before its
     * start (an offset off by a few elements), else the arena's own gaps
     * (a block freed already), else not device memory at all. */
    for (size_t k = 0; k < arena.block_count; k++) {
        const struct arena_block *b = &arena.blocks[k];
        if (first < b->start && bytes > b->start - first) {
            snprintf(error, error_len, "%s: %s (%zu bytes) starts %zu bytes "
                     "before a device block of %zu and runs into it: a "
                     "copy's device end lies inside one block; check the "
                     "offset you add to the block's pointer", function, end,
                     bytes, (size_t)(b->start - first), b->bytes);
            return -1;
        }
    }
    if (arena.base != NULL && first >= (uintptr_t)arena.base &&
        first - (uintptr_t)arena.base < arena.size) {
        snprintf(error, error_len, "%s: %s (%zu bytes) lies in the device's "
                 "memory but in no block of it (one freed already, or an "
                 "offset past a block's end): a copy's device end lies "
                 "inside a live block of device_alloc", function, end, bytes);
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
static const pending_copy *copy_touching(const void *start, size_t bytes,
                                         const char **end)
{
    const uintptr_t begin = (uintptr_t)start;
    const uintptr_t finish = begin + (bytes > 0 ? bytes : 1);
    for (size_t p = 0; p < device.pending_count; p++) {
        const pending_copy *c = &device.pending[p];
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
    char why[640];
    lock();
    const pending_copy *c = copy_touching(block, bytes, &end);
    const char *now = host_code_now();
    if (c != NULL)
        snprintf(why, sizeof why, "block %p (%zu bytes) is %s of a pending "
                 "copy of %zu bytes %s, from %p to %p%s%s%s: device_wait for "
                 "that copy before freeing it%s%s%s", block, bytes, end,
                 c->bytes, c->to_device ? "to the device" : "to the host",
                 c->src, c->dst, c->started_in ? " (started in " : "",
                 c->started_in ? c->started_in : "",
                 c->started_in ? ")" : "", now ? " (the free is in " : "",
                 now ? now : "", now ? ")" : "");
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
    /* A pointer into the arena that starts no live block: one freed
     * already (a second device_free), or a pointer into a block. Said
     * here, before the ledger reads the block's header there. */
    size_t bytes;
    memory_category category;
    if (in_arena(block, 1) && !arena_find(block, &bytes, &category)) {
        const char *now = host_code_now();
        char why[320];
        snprintf(why, sizeof why, "%p starts no block of device memory "
                 "now: freed already (a second device_free of the same "
                 "block, through a pointer kept after the first?), or a "
                 "pointer into a block, not its start%s%s%s", block,
                 now ? " (in " : "", now ? now : "", now ? ")" : "");
        device_check_failed("device_free", why);
    }
    if (memory_category_is_host(ledger_block_category(block)))
        device_check_failed("device_free", "a block of host memory: free it "
                            "with device_host_free");
    check_no_copy_touches("device_free", block, ledger_block_bytes(block));
    ledger_free(block);
}

/* Files a host block (lock not held). */
static void *host_block_kept(void *block, size_t bytes)
{
    if (block == NULL)
        return NULL;
    lock();
    if (device.host_block_count == device.host_block_room)
        device.host_blocks = grow(device.host_blocks, &device.host_block_room,
                                  sizeof *device.host_blocks);
    device.host_blocks[device.host_block_count++] =
        (struct host_block){ (uintptr_t)block, bytes, host_code_now() };
    unlock();
    return block;
}

/* Takes a block off the live host blocks, onto the freed ones; false if
 * it was not a live one. */
static bool host_block_dropped(const void *block)
{
    bool live = false;
    lock();
    for (size_t k = 0; k < device.host_block_count; k++)
        if (device.host_blocks[k].start == (uintptr_t)block) {
            size_t n = atomic_load(&freed_host_block_count);
            freed_host_blocks[n % FREED_HOST_BLOCKS] =
                (struct freed_host_block){ device.host_blocks[k].start,
                                           device.host_blocks[k].bytes,
                                           device.host_blocks[k].allocated_in,
                                           host_code_now() };
            atomic_store(&freed_host_block_count, n + 1);
            device.host_blocks[k] =
                device.host_blocks[--device.host_block_count];
            live = true;
            break;
        }
    unlock();
    return live;
}

/* A block device_host_free was given that is no live host block: one it
 * freed already stops the program with a line that says so. */
static void check_not_freed_twice(const void *block)
{
    bool live = false;
    lock();
    for (size_t k = 0; k < device.host_block_count && !live; k++)
        live = device.host_blocks[k].start == (uintptr_t)block;
    unlock();
    if (live)
        return;
    const struct freed_host_block *freed =
        freed_host_block_at((uintptr_t)block, true);
    if (freed == NULL)
        return;
    const char *now = host_code_now();
    char why[768];
    snprintf(why, sizeof why, "the host block at %p (%zu bytes, "
             "device_host_alloc%s%s) was freed already%s%s; this is a "
             "second device_host_free of it%s%s. A block is freed once, by "
             "whoever owns it", block, freed->bytes,
             freed->allocated_in ? " in " : "",
             freed->allocated_in ? freed->allocated_in : "",
             freed->freed_in ? ", in " : "",
             freed->freed_in ? freed->freed_in : "", now ? ", in " : "",
             now ? now : "");
    device_check_failed("device_host_free", why);
}

/* A copy's host end against the host blocks: 0, or -1 with the line when
 * it starts in one and runs past its end (a copy that would write past a
 * block corrupts the heap, and the crash comes later, somewhere else), or,
 * for an asynchronous copy (`in_block`), when it starts in none: its host
 * memory is page-locked memory from device_host_alloc, as a GPU's must be
 * (from other memory the copy is not asynchronous), and an offset past a
 * block's end is caught here, not as a corrupted heap. Host memory from
 * elsewhere (malloc) has no bounds known here: a blocking copy may use it.
 * (Lock held.) */
static int check_host_range(const char *function, const char *which,
                            const void *start, size_t bytes, bool in_block,
                            char *error, size_t error_len)
{
    const uintptr_t at = (uintptr_t)start;
    const struct host_block *below = NULL;
    for (size_t k = 0; k < device.host_block_count; k++) {
        const struct host_block *b = &device.host_blocks[k];
        if (b->start <= at && (below == NULL || b->start > below->start))
            below = b;
    }
    if (in_block && (below == NULL || at - below->start >= below->bytes)) {
        const char *now = host_code_now();
        int used = snprintf(error, error_len, "%s: %s of an asynchronous "
                            "copy (%zu bytes at %p) is in no block of "
                            "device_host_alloc: its host memory is "
                            "page-locked memory from device_host_alloc, as "
                            "on a GPU", function, which, bytes, start);
        if (below != NULL && used > 0 && (size_t)used < error_len)
            used += snprintf(error + used, error_len - (size_t)used,
                             "; it starts %zu bytes past the end of a host "
                             "block of %zu bytes%s%s: check the offset you "
                             "add to the block's pointer (an offset into "
                             "the whole buffer, where the block holds a "
                             "part of it?)",
                             (size_t)(at - below->start - below->bytes),
                             below->bytes,
                             below->allocated_in ? " allocated in " : "",
                             below->allocated_in ? below->allocated_in : "");
        /* NULL plus an offset: a buffer pointer that was never set. */
        if (below == NULL && at < ((uintptr_t)1 << 20) && used > 0 &&
            (size_t)used < error_len)
            used += snprintf(error + used, error_len - (size_t)used, "; "
                             "it lies %zu bytes past address 0: a NULL "
                             "pointer plus an offset (a buffer never "
                             "allocated?)", (size_t)at);
        if (now != NULL && used > 0 && (size_t)used < error_len)
            snprintf(error + used, error_len - (size_t)used, " (in %s)",
                     now);
        return -1;
    }
    /* The blocks do not overlap: the one below, if any, is the only one
     * that can hold the start. */
    const struct host_block *b = below;
    if (b == NULL || at - b->start >= b->bytes)
        return 0;
    const size_t offset = (size_t)(at - b->start);
    if (bytes <= b->bytes - offset)
        return 0;
    /* Either end may be wrong: the copy (the code running now) or the
     * block's size (the code that allocated it). */
    const char *now = host_code_now(), *then = b->allocated_in;
    snprintf(error, error_len, "%s: %s, %zu bytes from byte %zu of a host "
             "block of %zu bytes (device_host_alloc%s%s), runs %zu bytes "
             "past its end: check the offset and the count%s%s%s, and the "
             "size the block was allocated with%s",
             function, which, bytes, offset, b->bytes,
             then ? ", in " : "", then ? then : "",
             bytes - (b->bytes - offset), now ? " (in " : "",
             now ? now : "", now ? ")" : "", then ? " (there)" : "");
    return -1;
}

void *device_host_block_of(const void *start, size_t bytes)
{
    const uintptr_t at = (uintptr_t)start;
    void *found = NULL;
    if (start == NULL)
        return NULL;
    lock();
    for (size_t k = 0; k < device.host_block_count; k++) {
        const struct host_block *b = &device.host_blocks[k];
        if (at >= b->start && at - b->start <= b->bytes &&
            bytes <= b->bytes - (at - b->start)) {
            found = (void *)b->start;
            /* A block that starts here wins over one that ends here. */
            if (b->start == at)
                break;
        }
    }
    unlock();
    return found;
}

void *device_host_alloc(memory_category category, size_t bytes)
{
    require_open("device_host_alloc");
    if (!memory_category_is_host(category))
        wrong_kind_of_memory("device_host_alloc", category, "device memory",
                             "device_alloc", "host memory",
                             "MEMORY_HOST_OPTIMIZER or MEMORY_HOST_STAGING");
    if (device.cuda != NULL)
        return host_block_kept(device.cuda->host_alloc(category, bytes),
                               bytes);
    return host_block_kept(ledger_alloc(category, bytes), bytes);
}

void device_host_free(void *block)
{
    if (block == NULL)
        return;
    check_not_freed_twice(block);
    if (device.cuda != NULL) {
        check_no_copy_touches("device_host_free", block,
                              device.cuda->host_block_bytes(block));
        host_block_dropped(block);
        device.cuda->host_free(block);
        return;
    }
    if (!memory_category_is_host(ledger_block_category(block))) {
        const char *now = host_code_now();
        char why[512];
        snprintf(why, sizeof why, "a block of device memory (%zu bytes, "
                 "%s)%s%s: free it with device_free",
                 ledger_block_bytes(block),
                 memory_category_name(ledger_block_category(block)),
                 now ? ", in " : "", now ? now : "");
        device_check_failed("device_host_free", why);
    }
    check_no_copy_touches("device_host_free", block,
                          ledger_block_bytes(block));
    host_block_dropped(block);
    ledger_free(block);
}

/* ---- Copies ---------------------------------------------------------------- */

/* The checks every copy makes before it starts: 0, or -1 with the line. */
static int check_copy(const char *function, const void *dst, const void *src,
                      size_t bytes, int to_device, bool async, char *error,
                      size_t error_len)
{
    require_open(function);
    /* Nothing to move: no address is read, as CUDA's copies of 0 bytes
     * read none (a rank that owns none of a layer may copy its empty part
     * from wherever its offset points). */
    if (bytes == 0)
        return 0;
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
    const void *host_end = to_device ? src : dst;
    if (status == 0 && in_arena(host_end, bytes)) {
        snprintf(error, error_len, "%s: %s (%zu bytes) is device memory: a "
                 "copy goes between device memory and host memory "
                 "(device_host_alloc)", function,
                 to_device ? "the source" : "the destination", bytes);
        status = -1;
    }
    /* The host range's line names the code running itself; the others
     * say it here, after their own words. */
    const char *now = host_code_now();
    const size_t used = status != 0 ? strlen(error) : 0;
    if (status != 0 && now != NULL && used + 1 < error_len)
        snprintf(error + used, error_len - used, " (in %s)", now);
    if (status == 0)
        status = check_host_range(function,
                                  to_device ? "the source" : "the destination",
                                  host_end, bytes, async, error, error_len);
    unlock();
    return status;
}

/* A copy up starts on this thread: the thread is one that copies up, and
 * the copy's size the largest yet, or not. (Lock held.) */
static void note_copy_up(size_t bytes)
{
    size_t k = 0;
    while (k < device.up_thread_count && device.up_threads[k] != &thread_mark)
        k++;
    if (k == device.up_thread_count &&
        k < sizeof device.up_threads / sizeof device.up_threads[0])
        device.up_threads[device.up_thread_count++] = &thread_mark;
    if (bytes > device.largest_up)
        device.largest_up = bytes;
}

/* A copy has landed: the books take it. (Lock held; cpu: arena open.) */
static void book(size_t bytes, int to_device)
{
    device_books *books = device.cuda != NULL ? &device.cuda_books
                                              : arena.books;
    if (to_device) {
        books->to_device += bytes;
        books->copies_to_device++;
    } else {
        books->to_host += bytes;
        books->copies_to_host++;
    }
}

/* Seconds the caller waited for copies in one direction (with the lock
 * held). */
static void count_waiting(int to_device, double seconds)
{
    if (to_device)
        device.waited_to_device += seconds;
    else
        device.waited_to_host += seconds;
}

static int copy_blocking(const char *function, void *dst, const void *src,
                         size_t bytes, int to_device, char *error,
                         size_t error_len)
{
    if (check_copy(function, dst, src, bytes, to_device, false, error,
                   error_len) != 0)
        return -1;
    const double start = timer_now();
    lock();
    /* A blocking copy is one started and waited for at once: it hides
     * behind nothing, either way. */
    if (to_device) {
        note_copy_up(bytes);
        device.up_waited_at_once++;
    } else {
        device.down_waited_at_once++;
    }
    int status = 0;
    if (device.cuda != NULL) {
        status = device.cuda->copy(dst, src, bytes, to_device, error,
                                   error_len);
        if (status == 0)
            book(bytes, to_device);
    } else {
        /* After every pending copy, as on a GPU's copy stream: a copy
         * down reads what they write. */
        open_arena_after(to_device ? dst : src, bytes,
                         to_device ? 0 : UINT64_MAX);
        memcpy(dst, src, bytes);
        book(bytes, to_device);
        close_arena();
    }
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

/* The record of `copy` among the pending copies, or NULL: the records, not
 * the struct's own flag, decide, so that a struct the caller never set up
 * cannot pass for a pending one. (Called with the lock held.) */
static pending_copy *pending_record(const device_copy *copy)
{
    for (size_t k = 0; k < device.pending_count; k++)
        if (device.pending[k].copy == copy)
            return &device.pending[k];
    return NULL;
}

/* A hash of `bytes` bytes (a 64-bit multiply-xorshift over words): a
 * source written between a copy's start and its wait hashes differently,
 * but for one chance in 2^64. */
static uint64_t hash_of(const void *start, size_t bytes)
{
    const unsigned char *at = start;
    uint64_t hash = 0x9e3779b97f4a7c15u ^ bytes;
    size_t k = 0;
    for (; k + 8 <= bytes; k += 8) {
        uint64_t word;
        memcpy(&word, at + k, sizeof word);
        hash = (hash ^ word) * 0xff51afd7ed558ccdu;
        hash ^= hash >> 32;
    }
    for (; k < bytes; k++)
        hash = (hash ^ at[k]) * 0x100000001b3u;
    return hash;
}

/* Stops the program if the source of a copy was written between the
 * copy's start and its wait: host memory (a copy to the device) by host
 * code, device memory (a copy to the host) by a kernel, a collective or
 * another copy. The cpu backend copies at the wait, so the bytes written
 * late would arrive; a GPU copies at any moment in between, and would
 * deliver some of the old ones. A copy to the host's source is read with
 * the arena open (the caller's). */
static void check_source_unchanged(const pending_copy *p)
{
    if (hash_of(p->src, p->bytes) == p->source_hash)
        return;
    char why[768];
    snprintf(why, sizeof why, "the %s memory at %p that a pending copy of "
             "%zu bytes to the %s reads (started%s%s) was written between "
             "the copy's start and its wait%s. A GPU copies it at any moment "
             "in between, so some of the new bytes would not arrive: %s, "
             "and leave it alone until device_wait returns",
             p->to_device ? "host" : "device", p->src, p->bytes,
             p->to_device ? "device" : "host", p->started_in ? " in " : "",
             p->started_in ? p->started_in : " by host code",
             p->to_device ? "" : " (by a kernel, a collective or a copy)",
             p->to_device ? "finish writing a source before you start its "
                            "copy"
                          : "start a copy down after the last write to its "
                            "source (a gradient: after the collective that "
                            "sums it)");
    unlock();
    device_check_failed("device_wait", why);
}

/* Before a copy to the device starts writing [dst, dst + bytes): the
 * pending copies to the host that read any of it, started before it, land
 * now, as a GPU's copy stream would have run them first, so they deliver
 * what their source held (checked unchanged since their start). (Lock
 * held.) */
static void land_copies_down_from(const void *dst, size_t bytes)
{
    const uintptr_t begin = (uintptr_t)dst, end = begin + bytes;
    for (size_t k = 0; k < device.pending_count; k++) {
        pending_copy *p = &device.pending[k];
        const uintptr_t from = (uintptr_t)p->src;
        if (p->to_device || p->destination == LANDED || from >= end ||
            from + p->bytes <= begin)
            continue;
        open_arena_after(p->src, p->bytes, p->order);
        check_source_unchanged(p);
        land(p);
        close_arena();
    }
}

static int copy_async(const char *function, void *dst, const void *src,
                      size_t bytes, int to_device, device_copy *copy,
                      char *error, size_t error_len)
{
    if (check_copy(function, dst, src, bytes, to_device, true, error,
                   error_len) != 0)
        return -1;
    if (copy == NULL) {
        snprintf(error, error_len, "%s: a NULL device_copy", function);
        return -1;
    }
    lock();
    const pending_copy *already = pending_record(copy);
    if (already != NULL) {
        /* A device_copy on the stack may be a new call's local variable
         * where the last call's pending copy still is: say so. */
        const char *where = host_code_now();
        snprintf(error, error_len, "%s: this device_copy is pending already "
                 "(%zu bytes %s): device_wait for it before starting another "
                 "with it, or start the other with a device_copy of its own "
                 "(one for each copy in flight)%s%s%s%s", function,
                 already->bytes,
                 already->to_device ? "to the device" : "to the host",
                 stack_holds(copy) ? ". It lies on a stack: if it is a local "
                 "variable of a function that has returned since, its copy "
                 "is still pending at this place on the stack and nothing "
                 "can wait for it. A copy's device_copy must live until its "
                 "device_wait, in the state your code keeps, not on the "
                 "stack of a function that returns before the wait"
                 : "",
                 where ? " (in " : "", where ? where : "", where ? ")" : "");
        unlock();
        return -1;
    }
    if (device.cuda == NULL && to_device)
        land_copies_down_from(dst, bytes);
    *copy = (device_copy){ .dst = dst, .src = src, .bytes = bytes,
                           .to_device = to_device, .pending = true };
    pending_copy record = { .copy = copy, .dst = dst, .src = src,
                            .bytes = bytes, .to_device = to_device,
                            .order = device.copies_started++ };
    if (device.cuda != NULL) {
        if (device.cuda->copy_async(copy, error, error_len) != 0) {
            unlock();
            copy->pending = false;
            return -1;
        }
        record.event = copy->event;
    } else if (!to_device) {
        /* Host memory: NaN until the wait, from now on. The device source
         * as it is now, read with the arena open, for its wait. */
        memset(dst, 0xff, bytes);
        open_arena_after(src, bytes, record.order);
        record.source_hash = hash_of(src, bytes);
        close_arena();
        record.started_in = code_here;
    } else {
        record.source_hash = hash_of(src, bytes);
        record.started_in = code_here;
    }
    if (device.cuda == NULL && to_device && arena.access > 0) {
        /* The arena is open (given code computes on another thread): its
         * destination reads NaN from now on. */
        memset(dst, 0xff, bytes);
        record.destination = POISONED;
    }
    if (to_device) {
        note_copy_up(bytes);
        ups_started += bytes > 0;
    }
    if (device.pending_count == device.pending_room)
        device.pending = grow(device.pending, &device.pending_room,
                              sizeof *device.pending);
    record.thread = &thread_mark;
    record.thread_cpu = thread_cpu_now();
    record.hook_entry = atomic_load(&hook_entries);
    record.ups_then = ups_started;
    device.pending[device.pending_count++] = record;
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

/* Stops the program when the caller's struct no longer says what its copy
 * was: the device lands what was started, and a struct changed under a
 * pending copy is a bug (or a way to move bytes the books never saw). */
static void check_unchanged(const device_copy *copy, const pending_copy *p)
{
    const char *field = copy->dst != p->dst ? "dst"
                        : copy->src != p->src ? "src"
                        : copy->bytes != p->bytes ? "bytes"
                        : copy->to_device != p->to_device ? "to_device"
                                                          : NULL;
    if (field == NULL)
        return;
    char why[320];
    snprintf(why, sizeof why, "the device_copy of a pending copy of %zu "
             "bytes %s was changed (its %s) between its start and its wait: "
             "the device copies what was started; leave the struct alone "
             "until device_wait returns", p->bytes,
             p->to_device ? "to the device" : "to the host", field);
    unlock();
    device_check_failed("device_wait", why);
}

int device_wait(device_copy *copy, char *error, size_t error_len)
{
    const double cpu_now = thread_cpu_now();
    if (copy == NULL) {
        snprintf(error, error_len, "device_wait: a NULL device_copy");
        return -1;
    }
    lock();
    pending_copy *record = pending_record(copy);
    if (record == NULL) {
        unlock();
        const char *where = host_code_now();
        snprintf(error, error_len, "device_wait: this copy is not pending "
                 "(never started, or waited for already)%s%s%s%s",
                 device.pending_count > 0 ? ", while other copies are: a "
                 "copy is waited for with the device_copy it was started "
                 "with, not another (a local variable of the function that "
                 "started it, say, which died with it)" : "",
                 where ? " (in " : "", where ? where : "", where ? ")" : "");
        return -1;
    }
    check_unchanged(copy, record);
    /* Up: the CPU Adam's next tiles run between a tile's copy and its
     * wait, and the thread starts their copies: a copy waited for before
     * its thread started another, or with next to no work of the thread's
     * own between (its CPU time), hid behind no other tile (busy work in
     * between is not another tile). Down: the next layer's backward runs
     * between the hook calls, so a copy waited for in the call that
     * started it hid behind none of it, whatever the call did meanwhile. */
    if (record->thread == &thread_mark &&
        (record->to_device ? cpu_now - record->thread_cpu < DEVICE_AT_ONCE_S ||
                                 ups_started == record->ups_then
                           : record->hook_entry ==
                                 atomic_load(&hook_entries))) {
        if (record->to_device)
            device.up_waited_at_once++;
        else
            device.down_waited_at_once++;
    }
    if (device.cuda == NULL && record->to_device)
        check_source_unchanged(record);
    const pending_copy p = *record;
    /* Off the list first: opening the arena below must not make this
     * copy's own destination NaN. */
    *record = device.pending[--device.pending_count];
    int status = 0;
    const double start = timer_now();
    if (device.cuda != NULL) {
        copy->event = p.event;
        status = device.cuda->wait(copy, error, error_len);
        book(p.bytes, p.to_device);
    } else if (p.destination != LANDED) {
        /* (A copy down lands early when a later copy up overwrites its
         * source: land_copies_down_from.) */
        open_arena_after(p.to_device ? p.dst : p.src, p.bytes,
                         p.to_device ? 0 : p.order);
        if (!p.to_device)
            check_source_unchanged(&p);
        memcpy(p.dst, p.src, p.bytes);
        if (!p.booked)
            book(p.bytes, p.to_device);
        close_arena();
    }
    count_waiting(p.to_device, timer_now() - start);
    copy->pending = false;
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

size_t device_pending_copies_to_device(void)
{
    size_t up = 0;
    lock();
    for (size_t k = 0; k < device.pending_count; k++)
        up += device.pending[k].to_device != 0;
    unlock();
    return up;
}

/* The bytes and counts of the pending copies the books do not have yet.
 * (Lock held.) */
static device_books pending_books(void)
{
    device_books sum = { 0 };
    for (size_t k = 0; k < device.pending_count; k++) {
        if (device.pending[k].booked)
            continue;
        if (device.pending[k].to_device) {
            sum.to_device += device.pending[k].bytes;
            sum.copies_to_device++;
        } else {
            sum.to_host += device.pending[k].bytes;
            sum.copies_to_host++;
        }
    }
    return sum;
}

/* The books, read with the arena open. (Lock held.) */
static device_books read_books(void)
{
    if (arena.books == NULL || device.cuda != NULL)
        return device.cuda_books;
    open_arena(arena.base, 1);
    const device_books books = *arena.books;
    close_arena();
    return books;
}

device_traffic device_traffic_total(void)
{
    lock();
    /* The books first: opening the arena to read them may book pending
     * copies (open_arena). */
    const device_books books = read_books();
    const device_books pending = pending_books();
    const device_traffic traffic = {
        .to_device = books.to_device + pending.to_device,
        .to_host = books.to_host + pending.to_host,
        .copies_to_device = books.copies_to_device + pending.copies_to_device,
        .copies_to_host = books.copies_to_host + pending.copies_to_host,
        .waited_to_device = device.waited_to_device,
        .waited_to_host = device.waited_to_host,
        .copies_to_device_waited_at_once = device.up_waited_at_once,
        .threads_copying_to_device = device.up_thread_count,
        .largest_copy_to_device = device.largest_up,
        .copies_to_host_waited_at_once = device.down_waited_at_once,
    };
    unlock();
    return traffic;
}

void device_traffic_reset(void)
{
    lock();
    const bool in_arena_books = arena.books != NULL && device.cuda == NULL;
    if (in_arena_books)
        open_arena(arena.base, 1);
    /* The copies pending now, and not booked yet, were counted before the
     * reset: the books start below zero by their bytes (modulo 2^64), and
     * reach it again when they land. (Read after the open, which may have
     * booked some.) */
    const device_books pending = pending_books();
    const device_books books = { 0 - pending.to_device, 0 - pending.to_host,
                                 0 - pending.copies_to_device,
                                 0 - pending.copies_to_host };
    if (in_arena_books) {
        *arena.books = books;
        close_arena();
    } else {
        device.cuda_books = books;
    }
    device.waited_to_device = device.waited_to_host = 0;
    device.up_waited_at_once = device.down_waited_at_once = 0;
    device.up_thread_count = 0;
    device.largest_up = 0;
    unlock();
}
