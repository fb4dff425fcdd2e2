/* Monotonic wall-clock time, for measuring how long code takes.
 *
 * Never use the time of day (it jumps when the clock is set); never use
 * clock() (it counts CPU time of the whole process, all threads added). */
#ifndef ZZ_TIMER_H
#define ZZ_TIMER_H

/* Seconds since an arbitrary fixed point; only differences mean anything.
 * Resolution is the system's monotonic clock (nanoseconds on Linux and macOS). */
double timer_now(void);

/* The median of `count` timings (1 <= count <= TIMINGS_MAX; beyond that,
 * the first TIMINGS_MAX); `values` is left unchanged. Benchmarks report
 * medians: one slow repetition (another process took the core, a page
 * fault) moves a mean but not a median. */
double timings_median(const double *values, int count);

/* The most timings timings_median takes: the drivers cap their --reps at
 * it, and their arrays of timings are this long. */
enum { TIMINGS_MAX = 1000 };

#endif
