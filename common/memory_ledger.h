/* The memory ledger: bytes allocated, by category, now and at the peak,
 * and an optional budget per process.
 *
 * The lessons about distribution promise that memory per process falls as
 * processes are added: a rank holds 1/P of the matrix, ZeRO shards the
 * optimizer state. The ledger is how a check sees it. Everything the
 * lessons allocate goes through ledger_alloc (matrix_alloc_or_exit and
 * vector_alloc_or_exit use it), so a rank that builds the whole matrix shows it here.
 *
 * The budget (memory_ledger_set_cap) plays a device's memory: lesson 06
 * trains a model that does not fit one rank's cap by sharding it, and a
 * rank that asks for more than its cap is refused, with one line that
 * says what it asked for and what was still free.
 *
 * Lesson 07 (ZeRO-Offload) also keeps memory in the host's memory beside a
 * device (device.h): the MEMORY_HOST_* categories. They are counted apart,
 * with totals of their own, and the cap never refuses them: the cap is the
 * device's memory, and the host's is not the device's.
 *
 * One ledger per process; not thread-safe (allocate outside parallel
 * regions). */
#ifndef ZZ_MEMORY_LEDGER_H
#define ZZ_MEMORY_LEDGER_H

#include <stdbool.h>
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
    /* Lesson 06 reports these apart from the model's own state: */
    MEMORY_GATHERED,    /* parameters gathered for a layer (ZeRO stage 3) */
    MEMORY_BUCKETS,     /* gradient buckets in flight */
    MEMORY_COMM,        /* the collectives' own buffers (collectives.h) */
    /* Lesson 07 keeps these in the host's memory, beside a device: */
    MEMORY_HOST_OPTIMIZER,  /* optimizer state the CPU updates */
    MEMORY_HOST_STAGING,    /* buffers that copies to and from it pass */
    MEMORY_CATEGORIES
} memory_category;

/* Whether a category is host memory (MEMORY_HOST_*): outside the cap and
 * outside memory_ledger_current_total and memory_ledger_peak_total. */
bool memory_category_is_host(memory_category category);

/* bytes of memory, 64-byte aligned, recorded under `category`; under the
 * grader (ZZ_BOUNDARY) every page of it written once, so that the kernel
 * counts it as the process's from the start. Its contents are undefined.
 * NULL, with
 * nothing allocated and the reason in memory_ledger_last_error(), when the
 * bytes held in all categories but the host's would pass the cap (a host
 * category: never), or when the system has none to give. Free with
 * ledger_free. */
void *ledger_alloc(memory_category category, size_t bytes);
void ledger_free(void *block);

/* What ledger_alloc recorded for `block` (one it returned, not yet freed):
 * its bytes and its category. The device layer (device.h) reads them to
 * see which pending copies touch a block it is asked to free. */
size_t ledger_block_bytes(const void *block);
memory_category ledger_block_category(const void *block);

/* Where the memory of the categories that are not MEMORY_HOST_* comes
 * from while a device keeps its own (the cpu device's arena, device.c):
 * ledger_alloc takes those blocks from `alloc` (after the cap has let
 * them through), and ledger_free, ledger_block_bytes and
 * ledger_block_category ask `find` first whether a block is one of them.
 * The blocks have no header in front of them: what the ledger needs to
 * know of one, `find` says. NULL: the process's heap again. */
typedef struct {
    void *(*alloc)(memory_category category, size_t bytes); /* NULL: full */
    bool (*find)(const void *block, size_t *bytes,
                 memory_category *category);
    void (*free)(void *block);
} ledger_device_memory;
void ledger_use_device_memory(const ledger_device_memory *memory);

/* Counts `bytes` that live outside the process's memory (a GPU's, which
 * cudaMalloc gives) under `category`, as ledger_alloc would count a
 * block, cap and all, allocating nothing: 0, or -1 with the reason in
 * memory_ledger_last_error(). ledger_uncount_external takes them off the
 * books again when that memory is freed. */
int ledger_count_external(memory_category category, size_t bytes);
void ledger_uncount_external(memory_category category, size_t bytes);
/* For such an allocator's own refusal: sets memory_ledger_last_error() to
 * "rank R: cannot allocate BYTES of CATEGORY: " and `why`
 * ("cudaMalloc: out of memory"), as the system's refusal reads. */
void ledger_refuse_external(memory_category category, size_t bytes,
                            const char *why);

/* Bytes held now, and the most held at once, in a category. */
size_t memory_ledger_current(memory_category category);
size_t memory_ledger_peak(memory_category category);

/* The same over all categories together but the host's: what the process
 * (lessons 01-06) or the device (lesson 07) holds. The peak is the most
 * held at one moment, not the sum of the categories' peaks (which may fall
 * at different moments). */
size_t memory_ledger_current_total(void);
size_t memory_ledger_peak_total(void);

/* The same over the host categories (MEMORY_HOST_*) alone. */
size_t memory_ledger_host_current_total(void);
size_t memory_ledger_host_peak_total(void);

/* No cap: every allocation the system can satisfy succeeds. */
#define MEMORY_LEDGER_NO_CAP ((size_t)-1)

/* From now on, an allocation that would take the bytes held (all
 * categories but the host's) past `bytes` fails; exactly `bytes` is
 * allowed.
 * MEMORY_LEDGER_NO_CAP removes the cap. `rank` (the MPI rank, or -1 for a
 * process that has none) is named in the error line. A cap below what is
 * held already frees nothing; it refuses every allocation until enough is
 * freed. */
void memory_ledger_set_cap(size_t bytes, int rank);
size_t memory_ledger_cap(void);

/* One line on the last allocation ledger_alloc refused (empty before any).
 * The cap refused: "rank 2: device out of memory: asked 12.0 MiB for
 * optimizer state, free 5.0 MiB of 105.0 MiB" (free: the cap less what is
 * held, or 0 B). The system refused: "rank 2: cannot allocate 12.0 MiB of
 * optimizer state: not enough memory (100.0 MiB held)" (held: the bytes
 * on the same side, the host's for a host category). No "rank R: " when
 * the rank is -1. Static storage, overwritten by the next refusal. */
const char *memory_ledger_last_error(void);

/* The category's name as reports write it, one word: "matrix",
 * "optimizer", ..., "host_optimizer", "host_staging". */
const char *memory_category_name(memory_category category);

/* Writes "memory NAME CURRENT PEAK" lines, one per category, then
 * "memory total CURRENT PEAK" (all but the host's), "memory host_total
 * CURRENT PEAK" and, when a cap is set, "memory cap BYTES". */
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
