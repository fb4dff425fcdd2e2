/* Lesson 05, data-parallel SGD with a hand-written ring allreduce:
 * reference solution.
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
    /* TODO 1 start */
    size_t first = ((size_t)step * (size_t)ranks + (size_t)rank) * local_batch;
    for (size_t k = 0; k < local_batch; k++)
        indices[k] = (first + k) % dataset_size;
    /* TODO 1 end */
}

void average_gradients(float *grads, size_t count, MPI_Comm comm)
{
    /* TODO 2 start */
    int ranks;
    MPI_CHECK(MPI_Comm_size(comm, &ranks));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, grads, (int)count, MPI_FLOAT,
                            MPI_SUM, comm));
    float scale = 1.0f / (float)ranks;
    for (size_t k = 0; k < count; k++)
        grads[k] *= scale;
    /* TODO 2 end */
}

void ring_allreduce(float *data, size_t count, MPI_Comm comm)
{
    /* TODO 3 start */
    int ranks, rank;
    MPI_CHECK(MPI_Comm_size(comm, &ranks));
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    if (ranks == 1)
        return;
    int next = (rank + 1) % ranks, previous = (rank + ranks - 1) % ranks;
    /* One chunk's worth of room for what arrives, kept from call to call:
     * allocating (and so page-faulting) it afresh every step would cost
     * more than the copy itself for large gradients. */
    static float *incoming;
    static size_t capacity;
    size_t largest = block_size(count, (size_t)ranks, 0);
    if (largest > capacity) {
        free(incoming);
        incoming = malloc(largest * sizeof *incoming);
        if (incoming == NULL) {
            fprintf(stderr, "ring_allreduce: out of memory for %zu floats\n",
                    largest);
            MPI_Abort(comm, 1);
        }
        capacity = largest;
    }

    /* Reduce-scatter: at step s, send chunk (rank - s) and add the
     * incoming chunk (rank - s - 1) to ours. After P-1 steps, chunk
     * (rank + 1) holds the sum of every rank's. */
    for (int s = 0; s < ranks - 1; s++) {
        size_t send = (size_t)((rank - s + ranks) % ranks);
        size_t take = (size_t)((rank - s - 1 + 2 * ranks) % ranks);
        size_t send_begin, send_end, take_begin, take_end;
        block_range(count, (size_t)ranks, send, &send_begin, &send_end);
        block_range(count, (size_t)ranks, take, &take_begin, &take_end);
        MPI_CHECK(MPI_Sendrecv(&data[send_begin], (int)(send_end - send_begin),
                               MPI_FLOAT, next, 0, incoming,
                               (int)(take_end - take_begin), MPI_FLOAT,
                               previous, 0, comm, MPI_STATUS_IGNORE));
        for (size_t k = take_begin; k < take_end; k++)
            data[k] += incoming[k - take_begin];
    }
    /* Allgather: pass the finished chunks around; at step s, send chunk
     * (rank + 1 - s) and receive chunk (rank - s) into place. */
    for (int s = 0; s < ranks - 1; s++) {
        size_t send = (size_t)((rank + 1 - s + ranks) % ranks);
        size_t take = (size_t)((rank - s + ranks) % ranks);
        size_t send_begin, send_end, take_begin, take_end;
        block_range(count, (size_t)ranks, send, &send_begin, &send_end);
        block_range(count, (size_t)ranks, take, &take_begin, &take_end);
        MPI_CHECK(MPI_Sendrecv(&data[send_begin], (int)(send_end - send_begin),
                               MPI_FLOAT, next, 1, &data[take_begin],
                               (int)(take_end - take_begin), MPI_FLOAT,
                               previous, 1, comm, MPI_STATUS_IGNORE));
    }
    /* TODO 3 end */
}

void start_layer_average(overlap_state *state, float *slice, size_t count)
{
    /* TODO 4 start */
    if (state->started == MLP_MAX_LAYERS) {
        fprintf(stderr, "start_layer_average: more than %d layers "
                "(MLP_MAX_LAYERS) started before finish_averages\n",
                MLP_MAX_LAYERS);
        MPI_Abort(state->comm, 1);
    }
    int k = state->started++;
    state->slices[k] = slice;
    state->counts[k] = count;
    MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, slice, (int)count, MPI_FLOAT,
                             MPI_SUM, state->comm, &state->requests[k]));
    /* TODO 4 end */
}

void finish_averages(overlap_state *state)
{
    /* TODO 4 start */
    int ranks;
    MPI_CHECK(MPI_Comm_size(state->comm, &ranks));
    MPI_CHECK(MPI_Waitall(state->started, state->requests,
                          MPI_STATUSES_IGNORE));
    float scale = 1.0f / (float)ranks;
    for (int k = 0; k < state->started; k++)
        for (size_t j = 0; j < state->counts[k]; j++)
            state->slices[k][j] *= scale;
    state->started = 0;
    /* TODO 4 end */
}
