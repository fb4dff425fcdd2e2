/* The numbers tests/common/collectives_probe.c feeds the collectives
 * (common/collectives.h), a pure function of (seed, rank, element), so that
 * the judge (tests/common/test_mpi.c) regenerates every rank's
 * contributions itself and sums them in its own code.
 *
 * A contribution is a float of random sign and mantissa whose exponent
 * spans 2^-12 .. 2^11: added in another order, a sum of 3 or more of them
 * rounds differently in many elements, so a reduce-scatter that does not
 * add in rank order fails bitwise, as the judge makes sure it would. */
#ifndef ZZ_TESTS_COLLECTIVES_VALUES_H
#define ZZ_TESTS_COLLECTIVES_VALUES_H

#include <stdint.h>
#include <string.h>

#include "rng.h"

/* Built from bits, not by arithmetic: exactly the same float everywhere. */
static inline float collectives_float_of(uint64_t bits)
{
    uint32_t sign = (uint32_t)(bits >> 63) << 31;
    uint32_t exponent = (uint32_t)(127 - 12 + (bits >> 32) % 24) << 23;
    uint32_t mantissa = (uint32_t)bits & 0x7FFFFFu;
    uint32_t word = sign | exponent | mantissa;
    float value;
    memcpy(&value, &word, sizeof value);
    return value;
}

/* Rank `rank`'s contribution to element i of the reduce-scatter. */
static inline float collectives_contribution(uint64_t seed, int rank,
                                            uint64_t i)
{
    return collectives_float_of(rng_at_u64(seed, (uint64_t)rank + 1, i));
}

/* Element i of the bf16 buffer the allgathers share out: any 16 bits
 * (NaNs and infinities among them: an allgather moves bits, not numbers). */
static inline uint16_t collectives_bf16(uint64_t seed, uint64_t i)
{
    return (uint16_t)(rng_at_u64(seed, 1000003, i) >> 16);
}

/* Element i of the fp32 buffer the fp32 allgather shares out. */
static inline float collectives_f32(uint64_t seed, uint64_t i)
{
    return collectives_float_of(rng_at_u64(seed, 2000003, i));
}

/* What fills what a collective must leave alone, before it runs. */
enum {
    COLLECTIVES_GUARD16 = 0xA5C3,
    COLLECTIVES_GUARD32 = 0x7FA5C3E1    /* a NaN's bits */
};

#endif
