/* Lesson 03, false sharing: counters that threads never share, and that
 * still slow each other down: reference solution.
 * You write: a layout that gives each thread's counter a cache line of its
 * own (TODO 4).
 * Given (false_sharing.c): the demo that counts, and the slow layout that
 * yours is timed against. */
#include "counters.h"

#include <stdlib.h>

#include "not_done.h"

/* TODO 4 start */
/* How many longs one cache line holds: the distance between two counters. */
#define LONGS_PER_LINE (CACHE_LINE_BYTES / sizeof(long))

long *padded_counters_alloc(int threads)
{
    /* C11's aligned_alloc wants a size that is a multiple of the
     * alignment: a whole number of lines, one per thread. */
    return aligned_alloc(CACHE_LINE_BYTES, (size_t)threads * CACHE_LINE_BYTES);
}

long *padded_counter(long *counters, int thread)
{
    return &counters[(size_t)thread * LONGS_PER_LINE];
}
/* TODO 4 end */
