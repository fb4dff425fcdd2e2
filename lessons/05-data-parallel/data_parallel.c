/* Lesson 05, data-parallel SGD with a hand-written ring allreduce.
 * You write: each rank's shard of every batch (TODO 1), the average of the
 * gradients with MPI_Allreduce (TODO 2), then your own ring allreduce
 * (TODO 3), and, going further, averages that overlap backward (TODO 4).
 * Given: the model, the data, the optimizer (common/), and the training
 * driver (main.c) that calls these in order and reports to the tests. */
#include <stdio.h>
#include <stdlib.h>

#include "check_mpi.h"
#include "data_parallel.h"
#include "not_done.h"
#include "partition.h"

void my_shard(long step, size_t local_batch, int ranks, int rank,
              size_t dataset_size, size_t *indices)
{
    /* TODO 1 start: step s's global batch is the ranks * local_batch
     * samples after those of step s-1, starting at sample 0; this rank's
     * local_batch of them come after those of the ranks before it. Every
     * sample number wraps around at dataset_size: a shard may cross the
     * end of the data set partway through. */
    NOT_DONE();
    /* TODO 1 end */
}

void average_gradients(float *grads, size_t count, MPI_Comm comm)
{
    /* TODO 2 start: every rank of comm has its own gradients; afterwards
     * every rank holds their average over comm. One collective call on
     * comm, then the division by P, its size (or the division first: both
     * orders round within the same bound). */
    NOT_DONE();
    /* TODO 2 end */
}

void ring_allreduce(float *data, size_t count, MPI_Comm comm)
{
    /* TODO 3 start: the sum over all ranks, by a ring.
     *   Reduce-scatter, P-1 steps: at step s, send chunk (rank - s) to the
     *   next rank, receive chunk (rank - s - 1) from the previous one and
     *   add it to yours. Afterwards chunk (rank + 1) holds the full sum.
     *   Allgather, P-1 steps: at step s, send chunk (rank + 1 - s), receive
     *   chunk (rank - s) into its place.
     * Chunk c is items block_range(count, P, c) (common/partition.h); all
     * indices mod P. Each step sends one chunk and receives one, best
     * with one MPI_Sendrecv: a rank that sends first and receives
     * afterwards waits forever once messages are large.
     * P and rank are comm's (the tests pass one that is not
     * MPI_COMM_WORLD), and what you allocate you free before returning,
     * or keep for the next call. */
    NOT_DONE();
    /* TODO 3 end */
}

void start_layer_average(overlap_state *state, float *slice, size_t count)
{
    /* TODO 4 start: start a non-blocking sum of this slice over all ranks
     * (remember it in state, which finish_averages will need), and return
     * at once: backward goes on with the layers before. */
    NOT_DONE();
    /* TODO 4 end */
}

void finish_averages(overlap_state *state)
{
    /* TODO 4 start: complete every sum started (each request, not only
     * the last), then make each an average, and be ready for the next
     * step. */
    NOT_DONE();
    /* TODO 4 end */
}
