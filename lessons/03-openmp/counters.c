/* Lesson 03, false sharing: counters that threads never share, and that
 * still slow each other down.
 * You write: a layout that gives each thread's counter a cache line of its
 * own (TODO 4).
 * Given (false_sharing.c): the demo that counts, and the slow layout that
 * yours is timed against.
 * Run `make check L=03`; the driver (main.c) times both layouts. */
#include "counters.h"

#include <stdlib.h>

#include "not_done.h"

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
