/* The memory ledger: bytes allocated, by category, now and at the peak.
 *
 * The lessons about distribution promise that memory per process falls as
 * processes are added: a rank holds 1/P of the matrix, ZeRO shards the
 * optimizer state. The ledger is how a check sees it. Everything the
 * lessons allocate goes through ledger_alloc (matrix_alloc and vector_alloc
 * use it), so a rank that builds the whole matrix shows it here.
 *
 * One ledger per process; not thread-safe (allocate outside parallel
 * regions). */
#ifndef ZZ_MEMORY_LEDGER_H
#define ZZ_MEMORY_LEDGER_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    MEMORY_MATRIX,      /* matrices: A or blocks of it */
    MEMORY_VECTOR,      /* vectors: x, y, their pieces */
    MEMORY_PARAMETERS,
    MEMORY_GRADIENTS,
    MEMORY_OPTIMIZER,   /* optimizer state: master weights, moments */
    MEMORY_ACTIVATIONS,
    MEMORY_OTHER,
    MEMORY_CATEGORIES
} memory_category;

/* bytes of memory, 64-byte aligned, recorded under `category`; NULL when
 * the system has none to give. Free with ledger_free. */
void *ledger_alloc(memory_category category, size_t bytes);
void ledger_free(void *block);

/* Bytes held now, and the most held at once, in a category. */
size_t memory_ledger_current(memory_category category);
size_t memory_ledger_peak(memory_category category);

/* The category's name as reports write it: "matrix", "optimizer", ... */
const char *memory_category_name(memory_category category);

/* Writes "memory NAME CURRENT PEAK" lines, one per category. */
void memory_ledger_write(FILE *out);

/* Bytes the process's allocator holds for it now, however they were
 * allocated (malloc, calloc, ledger_alloc, a library's own buffers): what
 * the ledger cannot see. A check compares two readings around repeated
 * calls of a student's function: memory that grows with every call is a
 * leak. glibc's mallinfo2 (bytes in use, on the heap and mapped apart);
 * under AddressSanitizer its own count; on macOS the default zone's; else
 * the resident set, which sees only memory that has been written. */
size_t memory_ledger_heap_in_use(void);

#endif
