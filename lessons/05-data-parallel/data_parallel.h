/* Lesson 05: the pieces of data-parallel training that you write in
 * data_parallel.c. Every rank holds the whole model; each takes its shard
 * of every batch, computes gradients on it, and the ranks average their
 * gradients before every update, so that all of them take the same step.
 *
 * Arrays are of floats: the model's flat gradient buffer (common/mlp.h). */
#ifndef ZZ_LESSON05_DATA_PARALLEL_H
#define ZZ_LESSON05_DATA_PARALLEL_H

#include <stddef.h>

#include <mpi.h>

/* TODO 1. The samples of step `step` that rank `rank` of `ranks` trains on:
 * the global batch of step s is the ranks * local_batch samples that follow
 * those of step s-1 (the first at 0), wrapping around the end of the data
 * set (dataset_size samples); each rank takes its local_batch of them, in
 * rank order. Writes local_batch indices to `indices`. */
void my_shard(long step, size_t local_batch, int ranks, int rank,
              size_t dataset_size, size_t *indices);

/* TODO 2. Replaces grads (count floats) on every rank by their average over
 * all ranks, with MPI's own allreduce. */
void average_gradients(float *grads, size_t count, MPI_Comm comm);

/* TODO 3. Replaces data (count floats) on every rank by the SUM over all
 * ranks, with a ring: a reduce-scatter then an allgather, P-1 steps each,
 * every step one MPI_Sendrecv to the next rank and from the previous. The
 * chunks are the balanced block partition of count (common/partition.h):
 * count need not be a multiple of P, and may be smaller than P. */
void ring_allreduce(float *data, size_t count, MPI_Comm comm);

/* TODO 4 (going further). Overlap: backward produces the gradients of the
 * last layer first. start_layer_average starts a non-blocking average of
 * one layer's slice of the gradients as soon as it is ready, and
 * finish_averages waits for all those started, so that communication runs
 * while backward computes the layers before. */
typedef struct {
    MPI_Request requests[64];
    float *slices[64];
    size_t counts[64];
    int started;
    MPI_Comm comm;
} overlap_state;

void start_layer_average(overlap_state *state, float *slice, size_t count);
void finish_averages(overlap_state *state);

#endif
