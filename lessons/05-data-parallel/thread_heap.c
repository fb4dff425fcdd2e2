/* The heap bytes one thread's own code keeps: see thread_heap.h. */
#define _GNU_SOURCE
#include "thread_heap.h"

#include <stddef.h>
#include <stdlib.h> /* and with it __GLIBC__, where it is glibc */

#include "sanitizers.h"

#if defined(__GLIBC__) && !defined(ZZ_SANITIZER_ALLOCATOR)
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>

/* glibc's own allocator, under the names it exports for programs that
 * replace malloc and forward to it. */
void *__libc_malloc(size_t bytes);
void *__libc_calloc(size_t count, size_t bytes);
void *__libc_realloc(void *block, size_t bytes);
void *__libc_memalign(size_t alignment, size_t bytes);
void __libc_free(void *block);

/* The blocks allocated by the counting thread while counting and not
 * excluded, until freed (by any thread): an open-addressed table of
 * addresses, in static memory, since malloc may not call itself. Only the
 * counting thread adds; any thread's free may take one out, so each slot
 * is changed by compare-and-swap. A block allocated inside MPI and freed
 * outside (the ledger's staging, MPI's own) is in none, nor one freed
 * here that was allocated before: what is counted is what this thread's
 * own code allocated and kept. */
enum { SLOTS = 1 << 16, PROBES = 64 };
#define EMPTY ((uintptr_t)0)
#define GONE ((uintptr_t)1) /* a block freed: probe on past it */
static _Atomic uintptr_t slots[SLOTS];
static _Thread_local bool counting;
static _Thread_local bool (*excluded_now)(void);
static atomic_bool overflowed;

static size_t slot_of(uintptr_t address)
{
    return (size_t)((address >> 4) * 0x9E3779B97F4A7C15ull) & (SLOTS - 1);
}

static void add(void *block)
{
    if (!counting || block == NULL ||
        (excluded_now != NULL && excluded_now()))
        return;
    const uintptr_t address = (uintptr_t)block;
    for (size_t k = 0, i = slot_of(address); k < PROBES;
         k++, i = (i + 1) & (SLOTS - 1)) {
        uintptr_t seen = atomic_load(&slots[i]);
        if ((seen == EMPTY || seen == GONE) &&
            atomic_compare_exchange_strong(&slots[i], &seen, address))
            return;
    }
    atomic_store(&overflowed, true);
}

static void take_out(void *block)
{
    if (block == NULL)
        return;
    const uintptr_t address = (uintptr_t)block;
    for (size_t k = 0, i = slot_of(address); k < PROBES;
         k++, i = (i + 1) & (SLOTS - 1)) {
        uintptr_t seen = atomic_load(&slots[i]);
        if (seen == EMPTY)
            return;
        if (seen == address &&
            atomic_compare_exchange_strong(&slots[i], &seen, GONE))
            return;
    }
}

void *malloc(size_t bytes)
{
    void *block = __libc_malloc(bytes);
    add(block);
    return block;
}

void *calloc(size_t count, size_t bytes)
{
    void *block = __libc_calloc(count, bytes);
    add(block);
    return block;
}

void *realloc(void *block, size_t bytes)
{
    /* The old block is gone whether it moved or not; a failed realloc
     * leaves it as it was. */
    void *moved = __libc_realloc(block, bytes);
    if (moved != NULL || bytes == 0) {
        take_out(block);
        add(moved);
    }
    return moved;
}

void free(void *block)
{
    take_out(block);
    __libc_free(block);
}

void *memalign(size_t alignment, size_t bytes)
{
    void *block = __libc_memalign(alignment, bytes);
    add(block);
    return block;
}

void *aligned_alloc(size_t alignment, size_t bytes)
{
    return memalign(alignment, bytes);
}

int posix_memalign(void **result, size_t alignment, size_t bytes)
{
    /* A power of two, a multiple of sizeof(void *): POSIX's rule. */
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0)
        return EINVAL;
    void *block = memalign(alignment, bytes);
    if (block == NULL)
        return ENOMEM;
    *result = block;
    return 0;
}

bool thread_heap_available(void)
{
    return true;
}

void thread_heap_begin(bool (*excluded)(void))
{
    excluded_now = excluded;
    counting = true;
}

long long thread_heap_end(void)
{
    counting = false;
    if (atomic_load(&overflowed))
        return -1;
    long long kept = 0;
    for (size_t i = 0; i < SLOTS; i++) {
        uintptr_t address = atomic_load(&slots[i]);
        if (address != EMPTY && address != GONE)
            kept += (long long)malloc_usable_size((void *)address);
    }
    return kept;
}
#else
bool thread_heap_available(void)
{
    return false;
}

void thread_heap_begin(bool (*excluded)(void))
{
    (void)excluded;
}

long long thread_heap_end(void)
{
    return 0;
}
#endif
