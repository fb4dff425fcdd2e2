/* The memory ledger. */
#define _POSIX_C_SOURCE 200809L
#include "memory_ledger.h"

#include <stdint.h>
#include <stdlib.h>

/* Each block starts with this header, one alignment unit long, so that
 * ledger_free knows what to take off the books. */
typedef struct {
    size_t bytes;
    memory_category category;
} block_header;

enum { ALIGNMENT = 64 };
_Static_assert(sizeof(block_header) <= ALIGNMENT, "header fits its slot");

static size_t current[MEMORY_CATEGORIES], peak[MEMORY_CATEGORIES];

void *ledger_alloc(memory_category category, size_t bytes)
{
    void *raw = NULL;
    if (bytes > SIZE_MAX - ALIGNMENT ||
        posix_memalign(&raw, ALIGNMENT, ALIGNMENT + bytes) != 0)
        return NULL;
    block_header *header = raw;
    header->bytes = bytes;
    header->category = category;
    current[category] += bytes;
    if (current[category] > peak[category])
        peak[category] = current[category];
    return (char *)raw + ALIGNMENT;
}

void ledger_free(void *block)
{
    if (block == NULL)
        return;
    block_header *header = (block_header *)((char *)block - ALIGNMENT);
    current[header->category] -= header->bytes;
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

const char *memory_category_name(memory_category category)
{
    static const char *const names[MEMORY_CATEGORIES] = {
        "matrix", "vector", "parameters", "gradients", "optimizer",
        "activations", "other"
    };
    return names[category];
}

void memory_ledger_write(FILE *out)
{
    for (int c = 0; c < MEMORY_CATEGORIES; c++)
        fprintf(out, "memory %s %zu %zu\n",
                memory_category_name((memory_category)c), current[c], peak[c]);
}
