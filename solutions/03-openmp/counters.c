/* Lesson 03, false sharing: counters that threads never share, and that
 * still slow each other down: reference solution.
 * You write: a layout that gives each thread's counter a cache line of its
 * own (TODO 4).
 * Given: the demo that counts, and the slow layout, side by side. */
#include "counters.h"

#include <stdlib.h>

#include <omp.h>

#include "not_done.h"

void count_events(long *counters, counter_slot_fn *slot, int threads,
                  long events)
{
    #pragma omp parallel num_threads(threads)
    {
        /* volatile: every += is a real load and store to memory, as it
         * would be if other code looked at the counter. Without it the
         * compiler keeps the count in a register and stores it once, and
         * there is nothing left to see. */
        volatile long *mine = slot(counters, omp_get_thread_num());
        *mine = 0;
        for (long e = 0; e < events; e++)
            *mine += 1;
    }
}

long *adjacent_counters_alloc(int threads)
{
    return calloc((size_t)threads, sizeof(long));
}

/* Thread t's counter is element t: 8 counters share each 64-byte line, and
 * a line can be written by one core at a time. Every += makes the line
 * move to the writing core's cache and away from the others, so the
 * threads take turns where they should run side by side. */
long *adjacent_counter(long *counters, int thread)
{
    return &counters[thread];
}

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
