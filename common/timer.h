/* Monotonic wall-clock time, for measuring how long code takes.
 *
 * Never use the time of day (it jumps when the clock is set); never use
 * clock() (it counts CPU time of the whole process, all threads added). */
#ifndef ZZ_TIMER_H
#define ZZ_TIMER_H

/* Seconds since an arbitrary fixed point; only differences mean anything.
 * Resolution is the system's monotonic clock (nanoseconds on Linux and macOS). */
double timer_now(void);

/* The median of `count` timings (count >= 1); `values` is left unchanged.
 * Benchmarks report medians: one slow repetition (another process took the
 * core, a page fault) moves a mean but not a median. */
double timings_median(const double *values, int count);

#endif
