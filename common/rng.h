/* Seeded random numbers that are the same on every platform.
 *
 * Two kinds, both built from integer arithmetic only (no rand(), no libm),
 * so a seed gives bit-identical numbers on Linux, macOS, any compiler:
 *
 *   - a stream (rng_t): the next number depends on the previous state;
 *     for data that one process generates in order.
 *   - a counter-based value (rng_at): a pure function of (seed, i, j);
 *     entry (i, j) of a generated matrix is the same whichever process
 *     generates it, so any partition of the matrix yields the same matrix.
 *
 * The mixing function is SplitMix64 (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014). */
#ifndef ZZ_RNG_H
#define ZZ_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t state;
} rng_t;

/* A stream that starts at `seed`. */
rng_t rng_seeded(uint64_t seed);

/* The next 64 random bits of the stream. */
uint64_t rng_next_u64(rng_t *rng);

/* The next double, uniform in [0, 1), a multiple of 2^-53. */
double rng_next_uniform(rng_t *rng);

/* 64 random bits that depend only on (seed, i, j). */
uint64_t rng_at_u64(uint64_t seed, uint64_t i, uint64_t j);

/* A double uniform in [-1, 1) that depends only on (seed, i, j):
 * the value of entry (i, j) in a generated matrix. */
double rng_at_signed(uint64_t seed, uint64_t i, uint64_t j);

/* Turns 64 random bits into a double uniform in [0, 1). Exact: the top
 * 53 bits times 2^-53, no rounding anywhere. */
double rng_bits_to_uniform(uint64_t bits);

#endif
