/* Lesson 08's producer (tests/harness/producer.h): runs your
 * tp_column_part (TODO 1) on the tests' numbers and writes what it gave.
 *   column_part OUT RANKS
 *       tp_column_part(OUT, RANKS, r) for every rank r
 * Writes parts.bin: 2 * RANKS int64, each rank's first and count.
 *
 * tensor_parallel.c is an MPI source, so this is linked with mpicc;
 * tp_column_part calls no MPI function, so this never calls MPI_Init and
 * runs without mpirun. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "producer.h"
#include "tensor_parallel.h"

static void column_part(void)
{
    size_t out = producer_arg(0), ranks = producer_arg(1);
    /* A layer or a group out of range is a mistake in the test. */
    if (ranks == 0 || ranks > 4096 || out > 1 << 20) {
        fprintf(stderr, "producer: column_part: OUT or RANKS out of "
                "range\n");
        exit(2);
    }
    int64_t *parts = producer_alloc(2 * ranks, sizeof *parts, "parts");
    for (size_t r = 0; r < ranks; r++) {
        tp_part part = tp_column_part((int)out, (int)ranks, (int)r);
        parts[2 * r] = part.first;
        parts[2 * r + 1] = part.count;
    }
    produce("parts", parts, sizeof *parts, 2 * ranks);
    free(parts);
}

int main(int argc, char **argv)
{
    static const producer_case cases[] = { { "column_part", 2, column_part,
                                             false } };
    return producer_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
