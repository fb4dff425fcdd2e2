/* Lesson 05's producer (tests/harness/producer.h): runs your shard on the
 * tests' numbers and writes what it gave.
 *   shard STEP LOCAL_BATCH RANKS RANK DATASET_SIZE
 *       my_shard(STEP, LOCAL_BATCH, RANKS, RANK, DATASET_SIZE, indices)
 * Writes indices.bin: LOCAL_BATCH + 1 uint64, the indices and then a guard
 * element past them. Every element starts as SIZE_MAX, so an index never
 * written shows, and so does a write past the local batch.
 *
 * data_parallel.c is an MPI source, so this is linked with mpicc; my_shard
 * calls no MPI function, so this never calls MPI_Init and runs without
 * mpirun. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "data_parallel.h"
#include "producer.h"

static void shard(void)
{
    size_t step = producer_arg(0), local_batch = producer_arg(1);
    size_t ranks = producer_arg(2), rank = producer_arg(3);
    size_t dataset_size = producer_arg(4);
    /* my_shard takes a long and ints; numbers that do not fit are a mistake
     * in the test, not in the code under test. */
    if (step > LONG_MAX || ranks == 0 || ranks > INT_MAX || rank >= ranks ||
        dataset_size == 0 || local_batch == SIZE_MAX) {
        fprintf(stderr, "producer: shard: STEP, LOCAL_BATCH, RANKS or RANK "
                "out of range, or an empty data set\n");
        exit(2);
    }
    /* One guard element past the batch. No index the tests ask for reaches
     * SIZE_MAX: the judge reads it as "never written". */
    size_t length = local_batch + 1;
    size_t *indices = producer_alloc(length, sizeof *indices, "indices");
    for (size_t k = 0; k < length; k++)
        indices[k] = SIZE_MAX;
    my_shard((long)step, local_batch, (int)ranks, (int)rank, dataset_size,
             indices);
    uint64_t *written = producer_alloc(length, sizeof *written, "indices");
    for (size_t k = 0; k < length; k++)
        written[k] = (uint64_t)indices[k];
    produce("indices", written, sizeof *written, length);
    free(indices);
    free(written);
}

int main(int argc, char **argv)
{
    static const producer_case cases[] = { { "shard", 5, shard, false } };
    return producer_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
