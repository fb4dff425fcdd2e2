/* The heap bytes one thread's own code keeps, call by call (given code,
 * for ring_check --repeat).
 *
 * The process's heap (memory_ledger_heap_in_use) grows with MPI's own
 * lists and with the allocations of MPI's and the runtime's threads, by
 * hundreds of kilobytes for some correct rings, so a leak of a few bytes a
 * call hides in it. This counts only what the thread that asked allocates
 * and frees while no MPI call is running on it (comm_ledger.h): your code
 * between its MPI calls, and ring_check's own, which frees what it takes.
 * When what it allocated and still holds grows with every call, that is a
 * leak however small.
 *
 * glibc only, and not under AddressSanitizer or ThreadSanitizer, whose
 * allocators replace malloc: it replaces malloc, calloc, realloc, free
 * and the aligned forms in the program that links it, forwarding each to
 * glibc's own. Elsewhere thread_heap_available() is false and the counts
 * stay 0. */
#ifndef ZZ_THREAD_HEAP_H
#define ZZ_THREAD_HEAP_H

#include <stdbool.h>

bool thread_heap_available(void);

/* From now on, notes each block this thread allocates while `excluded`
 * (called from inside malloc: it may not allocate) says false, until it
 * is freed (by any thread). The blocks noted before stay noted. */
void thread_heap_begin(bool (*excluded)(void));

/* Stops noting, and returns the bytes of the noted blocks not yet freed,
 * as malloc_usable_size measures them; -1 where more were held at once
 * than it can note (tens of thousands of blocks). */
long long thread_heap_end(void);

#endif
