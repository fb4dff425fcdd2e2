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

#include "mlp.h"

/* TODO 1. The samples of step `step` that rank `rank` of `ranks` trains on:
 * the global batch of step s is the ranks * local_batch samples that follow
 * those of step s-1 (the first at 0), wrapping around the end of the data
 * set (dataset_size samples): every index wraps, since a shard may cross
 * the end partway through. Each rank takes its local_batch of them, in
 * rank order. Writes local_batch indices to `indices`, and nothing after
 * them. */
void my_shard(long step, size_t local_batch, int ranks, int rank,
              size_t dataset_size, size_t *indices);

/* TODO 2. Replaces grads (count floats) on every rank of `comm` by their
 * average over the ranks of `comm`, with MPI's own allreduce. */
void average_gradients(float *grads, size_t count, MPI_Comm comm);

/* TODO 3. Replaces data (count floats) on every rank of `comm` by the SUM
 * over the ranks of `comm`, with a ring: a reduce-scatter then an
 * allgather, P-1 steps each, every step one chunk to the next rank and
 * one from the previous (one MPI_Sendrecv, or a pair that cannot
 * deadlock). The chunks are the balanced block partition of
 * count (common/partition.h): count need not be a multiple of P, and may be
 * smaller than P.
 *
 * For TODO 2, 3 and 4: `comm` need not be MPI_COMM_WORLD (the tests give
 * a communicator of some ranks, in another order), so P is its size and a
 * rank's number is its rank in `comm`; every request started is completed
 * before the function that needs its data returns; and memory allocated
 * in a call is freed, or kept for the next call, never lost. */
void ring_allreduce(float *data, size_t count, MPI_Comm comm);

/* TODO 4 (going further). Overlap: backward produces the gradients of the
 * last layer first. start_layer_average starts a non-blocking average of
 * one layer's slice of the gradients as soon as it is ready, and
 * finish_averages completes every one of those started (each request,
 * not only the last), so that communication runs while backward computes
 * the layers before. One entry per layer started since the last
 * finish_averages: a model has at most MLP_MAX_LAYERS (common/mlp.h). */
typedef struct {
    MPI_Request requests[MLP_MAX_LAYERS];
    float *slices[MLP_MAX_LAYERS];
    size_t counts[MLP_MAX_LAYERS];
    int started;
    MPI_Comm comm;
} overlap_state;

void start_layer_average(overlap_state *state, float *slice, size_t count);
void finish_averages(overlap_state *state);

#endif
