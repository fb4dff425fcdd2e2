/* Lesson 03, false sharing: the demo that counts, and the slow layout of
 * its counters, side by side with yours (TODO 4, counters.c).
 * Given: you do not need to change this file. */
#include "counters.h"

#include <stdlib.h>

#include <omp.h>

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
