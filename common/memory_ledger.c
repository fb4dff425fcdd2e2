/* The memory ledger. */
#define _POSIX_C_SOURCE 200809L
#include "memory_ledger.h"

#include "matrix.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define ZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZZ_ASAN 1
#endif
#endif
#if defined(__GLIBC__) && \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#define ZZ_MALLINFO2 1
#endif

#if defined(ZZ_ASAN)
/* AddressSanitizer's allocator replaces malloc; it counts for itself. */
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
    size_t bytes;
    memory_category category;
} block_header;

enum { ALIGNMENT = 64 };
_Static_assert(sizeof(block_header) <= ALIGNMENT, "header fits its slot");

static size_t current[MEMORY_CATEGORIES], peak[MEMORY_CATEGORIES];
static size_t current_total, peak_total;
static size_t cap = MEMORY_LEDGER_NO_CAP;
static int cap_rank = -1;
static char last_error[256];

static const char *const names[MEMORY_CATEGORIES] = {
    "matrix", "vector", "parameters", "gradients", "optimizer",
    "activations", "other", "gathered", "buckets", "comm"
};
/* What the error line calls a category's bytes ("12.0 MiB of ..."). */
static const char *const described[MEMORY_CATEGORIES] = {
    "matrices", "vectors", "parameters", "gradients", "optimizer state",
    "activations", "other data", "gathered parameters", "gradient buckets",
    "communication buffers"
};

/* Writes the refusal into last_error: "rank R: cannot allocate BYTES of
 * CATEGORY: " and `why`. */
static void refuse(memory_category category, size_t bytes, const char *why)
{
    char asked[32], rank[32] = "";
    format_bytes((double)bytes, asked, sizeof asked);
    if (cap_rank >= 0)
        snprintf(rank, sizeof rank, "rank %d: ", cap_rank);
    snprintf(last_error, sizeof last_error, "%scannot allocate %s of %s: %s",
             rank, asked, described[category], why);
}

void *ledger_alloc(memory_category category, size_t bytes)
{
    /* The cap first, so that a refused request allocates nothing at all:
     * a rank over its budget must not even touch the system's memory. */
    char held[32], why[96];
    if (current_total > cap || bytes > cap - current_total) {
        char limit[32];
        format_bytes((double)current_total, held, sizeof held);
        format_bytes((double)cap, limit, sizeof limit);
        snprintf(why, sizeof why, "%s held of a %s cap", held, limit);
        refuse(category, bytes, why);
        return NULL;
    }
    void *raw = NULL;
    if (bytes > SIZE_MAX - ALIGNMENT ||
        posix_memalign(&raw, ALIGNMENT, ALIGNMENT + bytes) != 0) {
        format_bytes((double)current_total, held, sizeof held);
        snprintf(why, sizeof why, "not enough memory (%s held)", held);
        refuse(category, bytes, why);
        return NULL;
    }
    block_header *header = raw;
    header->bytes = bytes;
    header->category = category;
    current[category] += bytes;
    if (current[category] > peak[category])
        peak[category] = current[category];
    current_total += bytes;
    if (current_total > peak_total)
        peak_total = current_total;
    return (char *)raw + ALIGNMENT;
}

void ledger_free(void *block)
{
    if (block == NULL)
        return;
    block_header *header = (block_header *)((char *)block - ALIGNMENT);
    current[header->category] -= header->bytes;
    current_total -= header->bytes;
    free(header);
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
    return current_total;
}

size_t memory_ledger_peak_total(void)
{
    return peak_total;
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
    fprintf(out, "memory total %zu %zu\n", current_total, peak_total);
    if (cap != MEMORY_LEDGER_NO_CAP)
        fprintf(out, "memory cap %zu\n", cap);
}

size_t memory_ledger_heap_in_use(void)
{
#if defined(ZZ_ASAN)
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
