/* STREAM's triad, a[i] = b[i] + s*c[i]: the memory bandwidth that a plain
 * loop reaches on this machine, the speed limit of every kernel that streams
 * its data once (McCalpin, "Memory Bandwidth and Machine Balance in Current
 * High Performance Computers", IEEE TCCA Newsletter, 1995).
 *
 * Bytes are counted as STREAM counts them: 24 per element (read b and c,
 * write a), not counting the extra read that a write-allocate cache makes.
 * The arrays must be far larger than the last-level cache, or the figure is
 * the cache's bandwidth, not memory's. */
#ifndef ZZ_STREAM_H
#define ZZ_STREAM_H

#include <stddef.h>

typedef struct {
    size_t n;
    double *a, *b, *c;
} triad_arrays;

/* Three arrays of n doubles, allocated and written (so timings never include
 * first-touch page faults). Returns 0, or -1 with one line in `error` when
 * memory runs out (then nothing is left allocated). */
int triad_try_alloc(size_t n, triad_arrays *arrays, char *error,
                    size_t error_len);

/* triad_try_alloc for programs with one process: when memory runs out it
 * prints "error: " and the reason on one line and exits with status 2. */
triad_arrays triad_alloc_or_exit(size_t n);
void triad_free(triad_arrays *arrays);

/* One triad over the arrays; returns its wall time in seconds. */
double triad_once(triad_arrays *arrays);

/* Bytes one triad moves by STREAM's count: 3 * 8 * n. */
double triad_bytes(size_t n);

/* Into *gbs, the median GB/s (10^9 bytes per second) of `reps` triads
 * (1 to TRIAD_MAX_REPS; fewer or more are taken as those bounds) on
 * n-element arrays, allocated and freed here. Returns 0, or -1 with one
 * line in `error` when the arrays cannot be allocated. */
int stream_triad_gbs(size_t n, int reps, double *gbs, char *error,
                     size_t error_len);

/* The most triads stream_triad_gbs times: lesson 00's --reps limit. */
enum { TRIAD_MAX_REPS = 64 };

/* An array length comfortably out of any cache: 2^23 doubles, 64 MiB per
 * array, 192 MiB in all. */
enum { TRIAD_DEFAULT_N = 1 << 23 };

#endif
