/* Lesson 06's producer (tests/harness/producer.h): runs your
 * zero_owned_part (TODO 1) on the tests' numbers and writes what it gave.
 *   owned TOTAL RANKS OFFSET COUNT
 *       zero_owned_part(TOTAL, RANKS, r, OFFSET, COUNT) for every rank r
 * Writes parts.bin: 2 * RANKS uint64, each rank's begin and end.
 *
 * zero.c is an MPI source, so this is linked with mpicc; zero_owned_part
 * calls no MPI function, so this never calls MPI_Init and runs without
 * mpirun. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "producer.h"
#include "zero.h"

static void owned(void)
{
    size_t total = producer_arg(0), ranks = producer_arg(1);
    size_t offset = producer_arg(2), count = producer_arg(3);
    /* A range outside the buffer, or no ranks, is a mistake in the test,
     * not in the code under test. */
    if (ranks == 0 || ranks > 4096 || offset > total ||
        count > total - offset) {
        fprintf(stderr, "producer: owned: RANKS out of range, or the range "
                "not inside the buffer\n");
        exit(2);
    }
    uint64_t *parts = producer_alloc(2 * ranks, sizeof *parts, "parts");
    for (size_t r = 0; r < ranks; r++) {
        zero_part part = zero_owned_part(total, (int)ranks, (int)r, offset,
                                         count);
        parts[2 * r] = part.begin;
        parts[2 * r + 1] = part.end;
    }
    produce("parts", parts, sizeof *parts, 2 * ranks);
    free(parts);
}

int main(int argc, char **argv)
{
    static const producer_case cases[] = { { "owned", 4, owned, false } };
    return producer_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
