/* Lesson 03: false sharing, seen with one counter per thread.
 *
 * Each thread of a team adds 1 to its own counter, many times. No two
 * threads touch the same counter, so the result is right whatever the
 * layout; the speed is not. A layout is a pair of functions: one that
 * allocates the counters of `threads` threads, and one that says where
 * thread t's counter is. Counters from either alloc are freed with free(). */
#ifndef ZZ_LESSON03_COUNTERS_H
#define ZZ_LESSON03_COUNTERS_H

/* The size of a cache line on every processor this course runs on (x86-64,
 * Arm's Neoverse and Apple's cores all move memory in 64-byte lines at the
 * level where cores share data). */
enum { CACHE_LINE_BYTES = 64 };

/* Where thread `thread`'s counter is, within counters made by the matching
 * alloc. */
typedef long *counter_slot_fn(long *counters, int thread);

/* Given (false_sharing.c). The slow layout: the counters side by side, 8
 * to a cache line. NULL when memory runs out. */
long *adjacent_counters_alloc(int threads);
long *adjacent_counter(long *counters, int thread);

/* TODO 4 (counters.c). The fast layout: each thread's counter alone in its
 * own 64-byte cache line, the line's first bytes (so its address is a
 * multiple of CACHE_LINE_BYTES). NULL when memory runs out. */
long *padded_counters_alloc(int threads);
long *padded_counter(long *counters, int thread);

/* Given (false_sharing.c). The demo: a team of `threads` threads; thread
 * t sets its counter (slot(counters, t)) to zero, then adds 1 to it
 * `events` times, each time through memory. Afterwards every counter
 * holds `events`. */
void count_events(long *counters, counter_slot_fn *slot, int threads,
                  long events);

#endif
