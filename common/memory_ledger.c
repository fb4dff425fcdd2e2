/* The memory ledger. */
#define _POSIX_C_SOURCE 200809L
#include "memory_ledger.h"

#include "format_bytes.h"
#include "sanitizers.h"
#include "steps.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define ZZ_MALLINFO2 1
#endif

#if defined(ZZ_SANITIZER_ALLOCATOR)
/* AddressSanitizer's or ThreadSanitizer's allocator replaces malloc; it
 * counts for itself. */
size_t __sanitizer_get_current_allocated_bytes(void);
#elif defined(ZZ_MALLINFO2)
#include <malloc.h>
#elif defined(__APPLE__)
#include <malloc/malloc.h>
#else
#include <stdio.h>
#include <unistd.h>
#endif

/* Each block starts with this header, one alignment unit long, so that
 * ledger_free knows what to take off the books. */
typedef struct {
    uint64_t mark;           /* BLOCK_MARK while the block is held */
    size_t bytes;
    memory_category category;
} block_header;

/* "zzledger": what ledger_free finds before a block of ledger_alloc, and
 * nowhere else it is likely to look (a block of malloc, one freed). */
#define BLOCK_MARK UINT64_C(0x7a7a6c6564676572)

enum { ALIGNMENT = 64 };
_Static_assert(sizeof(block_header) <= ALIGNMENT, "header fits its slot");

static size_t current[MEMORY_CATEGORIES], peak[MEMORY_CATEGORIES];
/* Totals by side: [0] the device's (or the process's, lessons 01-06),
 * which the cap limits; [1] the host's, beside a device (MEMORY_HOST_*). */
enum { DEVICE_SIDE, HOST_SIDE, SIDES };
static size_t current_total[SIDES], peak_total[SIDES];
static size_t cap = MEMORY_LEDGER_NO_CAP;
static int cap_rank = -1;
static char last_error[256];
static const ledger_device_memory *device_memory;

static const char *const names[] = {
    "matrix", "vector", "parameters", "gradients", "optimizer",
    "activations", "other", "gathered", "buckets", "comm",
    "host_optimizer", "host_staging"
};
/* What the error line calls a category's bytes ("12.0 MiB of ..."). */
static const char *const described[] = {
    "matrices", "vectors", "parameters", "gradients", "optimizer state",
    "activations", "other data", "gathered parameters", "gradient buckets",
    "communication buffers", "optimizer state in host memory",
    "staging buffers in host memory"
};
_Static_assert(sizeof names / sizeof *names == MEMORY_CATEGORIES &&
               sizeof described / sizeof *described == MEMORY_CATEGORIES,
               "a name and a description for every category");

bool memory_category_is_host(memory_category category)
{
    return category == MEMORY_HOST_OPTIMIZER ||
           category == MEMORY_HOST_STAGING;
}

static int side_of(memory_category category)
{
    return memory_category_is_host(category) ? HOST_SIDE : DEVICE_SIDE;
}

/* "rank R: ", or nothing for a process without a rank. */
static void rank_prefix(char *prefix, size_t len)
{
    prefix[0] = '\0';
    if (cap_rank >= 0)
        snprintf(prefix, len, "rank %d: ", cap_rank);
}

/* Whether `bytes` more fit under the cap; if not, the refusal goes into
 * last_error. The host's categories are not the device's: always. */
static bool fits_cap(memory_category category, size_t bytes)
{
    const size_t held = current_total[DEVICE_SIDE];
    if (side_of(category) == HOST_SIDE ||
        (held <= cap && bytes <= cap - held))
        return true;
    char asked[32], free_now[32], limit[32], rank[32];
    format_bytes((double)bytes, asked, sizeof asked);
    format_bytes(held < cap ? (double)(cap - held) : 0.0, free_now,
                 sizeof free_now);
    format_bytes((double)cap, limit, sizeof limit);
    rank_prefix(rank, sizeof rank);
    snprintf(last_error, sizeof last_error, "%sdevice out of memory: asked "
             "%s for %s, free %s of %s", rank, asked, described[category],
             free_now, limit);
    return false;
}

static void count(memory_category category, size_t bytes)
{
    const int side = side_of(category);
    current[category] += bytes;
    if (current[category] > peak[category])
        peak[category] = current[category];
    current_total[side] += bytes;
    if (current_total[side] > peak_total[side])
        peak_total[side] = current_total[side];
}

static void uncount(memory_category category, size_t bytes)
{
    current[category] -= bytes;
    current_total[side_of(category)] -= bytes;
}

void *ledger_alloc(memory_category category, size_t bytes)
{
    /* The cap first, so that a refused request allocates nothing at all:
     * a device (or a rank over its budget) must not even touch the
     * system's memory. */
    if (!fits_cap(category, bytes))
        return NULL;
    if (device_memory != NULL && side_of(category) == DEVICE_SIDE) {
        void *block = device_memory->alloc(category, bytes);
        if (block == NULL) {
            ledger_refuse_external(category, bytes, "the device's memory "
                                   "has no free stretch that long");
            return NULL;
        }
        count(category, bytes);
        return block;
    }
    void *raw = NULL;
    if (bytes > SIZE_MAX - ALIGNMENT ||
        posix_memalign(&raw, ALIGNMENT, ALIGNMENT + bytes) != 0) {
        char held[32], why[64];
        format_bytes((double)current_total[side_of(category)], held,
                     sizeof held);
        snprintf(why, sizeof why, "not enough memory (%s held)", held);
        ledger_refuse_external(category, bytes, why);
        return NULL;
    }
    block_header *header = raw;
    header->mark = BLOCK_MARK;
    header->bytes = bytes;
    header->category = category;
    count(category, bytes);
    /* Under the grader, which measures a rank's memory from outside (the
     * process's boundary, boundary.h), every page of the block is written
     * once (a zero byte each), so that what the ledger counts the process
     * holds is what the kernel counts it holds, as a device's allocation
     * is its own from the start. Elsewhere a block's pages come when
     * first used, as malloc's do (a block asked for and never used, such
     * as a refused model's, costs nothing). The contents are left
     * undefined either way. */
    static int measured = -1;
    if (measured < 0)
        measured = getenv("ZZ_BOUNDARY") != NULL;
    volatile char *block = (char *)raw + ALIGNMENT;
    for (size_t at = 0; measured && at < bytes; at += 4096)
        block[at] = 0;
    if (measured && bytes > 0)
        block[bytes - 1] = 0;
    return (char *)raw + ALIGNMENT;
}

/* ledger_free of a block that ledger_alloc did not give: a bug in the
 * caller, not bad input. free() of it would corrupt the heap, and the
 * crash would come later, somewhere else: this says so now, and ends
 * the process with status 1 (not a signal, which a test reports as a
 * crash, hiding this line behind "out of bounds?"). */
static _Noreturn void ledger_free_check_failed(const void *block)
{
    /* Named with the step the driver marked (steps.h), as a crash is. */
    const char *step = steps_current();
    fprintf(stderr, "%s%sledger_free: %p is not a block that ledger_alloc "
            "gave and that is still held: one from malloc (allocate with "
            "ledger_alloc and its category), one freed already, or memory "
            "written past the end of the block before it\n", step,
            step[0] != '\0' ? ": " : "", block);
    fflush(stderr);
    _Exit(1);
}

void ledger_free(void *block)
{
    if (block == NULL)
        return;
    size_t bytes;
    memory_category category;
    if (device_memory != NULL &&
        device_memory->find(block, &bytes, &category)) {
        uncount(category, bytes);
        device_memory->free(block);
        return;
    }
    block_header *header = (block_header *)((char *)block - ALIGNMENT);
    if (header->mark != BLOCK_MARK)
        ledger_free_check_failed(block);
    header->mark = 0;
    uncount(header->category, header->bytes);
    free(header);
}

static const block_header *header_of(const void *block)
{
    return (const block_header *)((const char *)block - ALIGNMENT);
}

size_t ledger_block_bytes(const void *block)
{
    size_t bytes;
    memory_category category;
    if (device_memory != NULL &&
        device_memory->find(block, &bytes, &category))
        return bytes;
    return header_of(block)->bytes;
}

memory_category ledger_block_category(const void *block)
{
    size_t bytes;
    memory_category category;
    if (device_memory != NULL &&
        device_memory->find(block, &bytes, &category))
        return category;
    return header_of(block)->category;
}

void ledger_use_device_memory(const ledger_device_memory *memory)
{
    device_memory = memory;
}

int ledger_count_external(memory_category category, size_t bytes)
{
    if (!fits_cap(category, bytes))
        return -1;
    count(category, bytes);
    return 0;
}

void ledger_uncount_external(memory_category category, size_t bytes)
{
    uncount(category, bytes);
}

void ledger_refuse_external(memory_category category, size_t bytes,
                            const char *why)
{
    char asked[32], rank[32];
    format_bytes((double)bytes, asked, sizeof asked);
    rank_prefix(rank, sizeof rank);
    snprintf(last_error, sizeof last_error, "%scannot allocate %s of %s: %s",
             rank, asked, described[category], why);
}

size_t memory_ledger_current(memory_category category)
{
    return current[category];
}

size_t memory_ledger_peak(memory_category category)
{
    return peak[category];
}

size_t memory_ledger_current_total(void)
{
    return current_total[DEVICE_SIDE];
}

size_t memory_ledger_peak_total(void)
{
    return peak_total[DEVICE_SIDE];
}

size_t memory_ledger_host_current_total(void)
{
    return current_total[HOST_SIDE];
}

size_t memory_ledger_host_peak_total(void)
{
    return peak_total[HOST_SIDE];
}

void memory_ledger_set_cap(size_t bytes, int rank)
{
    cap = bytes;
    cap_rank = rank;
}

size_t memory_ledger_cap(void)
{
    return cap;
}

const char *memory_ledger_last_error(void)
{
    return last_error;
}

const char *memory_category_name(memory_category category)
{
    return names[category];
}

void memory_ledger_write(FILE *out)
{
    for (int c = 0; c < MEMORY_CATEGORIES; c++)
        fprintf(out, "memory %s %zu %zu\n",
                memory_category_name((memory_category)c), current[c], peak[c]);
    fprintf(out, "memory total %zu %zu\n", current_total[DEVICE_SIDE],
            peak_total[DEVICE_SIDE]);
    fprintf(out, "memory host_total %zu %zu\n", current_total[HOST_SIDE],
            peak_total[HOST_SIDE]);
    if (cap != MEMORY_LEDGER_NO_CAP)
        fprintf(out, "memory cap %zu\n", cap);
}

size_t memory_ledger_heap_in_use(void)
{
#if defined(ZZ_SANITIZER_ALLOCATOR)
    return __sanitizer_get_current_allocated_bytes();
#elif defined(ZZ_MALLINFO2)
    /* Every arena's chunks in use, and the blocks mapped apart (large
     * allocations): both are what the program asked for and holds. */
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
#elif defined(__APPLE__)
    malloc_statistics_t statistics;
    malloc_zone_statistics(NULL, &statistics);
    return statistics.size_in_use;
#else
    /* The resident set: /proc/self/statm's second field, in pages. */
    unsigned long pages = 0, resident = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (statm == NULL)
        return 0;
    int read = fscanf(statm, "%lu %lu", &pages, &resident);
    fclose(statm);
    long page = sysconf(_SC_PAGESIZE);
    return read == 2 && page > 0 ? (size_t)resident * (size_t)page : 0;
#endif
}
