/* Lesson 03, false sharing: counters that threads never share, and that
 * still slow each other down.
 * You write: a layout that gives each thread's counter a cache line of its
 * own (TODO 4).
 * Given: the demo that counts, and the slow layout, side by side.
 * Run `make check L=03`; the driver (main.c) times both layouts. */
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

/* TODO 4 start: each thread's counter at the start of a cache line of its
 * own. The block must begin on a line boundary (malloc promises only 16
 * bytes, so use an allocation that takes an alignment), and counters must
 * be a whole line apart. */
long *padded_counters_alloc(int threads)
{
    NOT_DONE();
}

long *padded_counter(long *counters, int thread)
{
    NOT_DONE();
}
/* TODO 4 end */
