/* Seeded random numbers that are the same on every platform. */
#include "rng.h"

static const uint64_t golden_gamma = 0x9e3779b97f4a7c15u;

/* SplitMix64's output function: a bijection on 64-bit words whose output
 * bits each depend on all input bits. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

rng_t rng_seeded(uint64_t seed)
{
    rng_t rng = { seed };
    return rng;
}

uint64_t rng_next_u64(rng_t *rng)
{
    rng->state += golden_gamma;
    return mix64(rng->state);
}

double rng_bits_to_uniform(uint64_t bits)
{
    return (double)(bits >> 11) * 0x1.0p-53;
}

double rng_next_uniform(rng_t *rng)
{
    return rng_bits_to_uniform(rng_next_u64(rng));
}

/* Mixing the row into the seed and then the column into the result, with a
 * full mix64 between, keeps (i, j) and (j, i) and neighbouring entries
 * unrelated. */
uint64_t rng_at_u64(uint64_t seed, uint64_t i, uint64_t j)
{
    uint64_t row = mix64(seed + golden_gamma * (i + 1));
    return mix64(row ^ mix64(golden_gamma * (j + 1)));
}

double rng_at_signed(uint64_t seed, uint64_t i, uint64_t j)
{
    return 2.0 * rng_bits_to_uniform(rng_at_u64(seed, i, j)) - 1.0;
}
