/* The data ring_check gives each rank: a function of (seed, rank, k) only,
 * so a test can compute the exact sum over ranks by itself. Values span
 * several magnitudes and both signs, so a sum in a wrong order or with a
 * missing term shows. Given; shared by ring_check.c and the tests. */
#ifndef ZZ_LESSON05_RING_DATA_H
#define ZZ_LESSON05_RING_DATA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "rng.h"

/* The most lengths ring_check runs in one call (its --counts), and so the
 * most a test asks for. */
enum { RING_CHECK_MAX_COUNTS = 32 };

/* Element k of rank `rank`'s data: a float uniform in [-1, 1) times 2^e,
 * e in [-8, 8]. */
static inline float ring_data_value(uint64_t seed, int rank, size_t k)
{
    uint64_t bits = rng_at_u64(seed, (uint64_t)rank, k);
    float value = (float)(2.0 * rng_bits_to_uniform(bits) - 1.0);
    return ldexpf(value, (int)(bits % 17) - 8);
}

static inline void ring_data_fill(float *data, size_t count, uint64_t seed,
                                  int rank)
{
    for (size_t k = 0; k < count; k++)
        data[k] = ring_data_value(seed, rank, k);
}

#endif
