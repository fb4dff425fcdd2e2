/* Lesson 09: pipeline parallelism, your part (pipeline.h says what each
 * function does; the lesson's README says why).
 *
 * Given: a micro-batch's computation on a chunk (pp_compute_forward,
 * pp_loss, pp_compute_backward) and the optimizer (pp_optimizer_step),
 * each recorded for the tests (pp_state.c); MPI's point-to-point calls
 * for the messages between stages. */
#include <stddef.h>

#include <mpi.h>

#include "not_done.h"
#include "pipeline.h"

/* ---- TODO 1: the stages ------------------------------------------------ */

/* |a - b| of two counts, without a sign to overflow. */
static size_t distance(size_t a, size_t b)
{
    return a > b ? a - b : b - a;
}

void pp_layers_of(int layer_count, const size_t *layer_parameters,
                  int stages, int stage_index, int *first, int *end)
{
    /* TODO 1 start */
    size_t total = 0;
    for (int l = 0; l < layer_count; l++)
        total += layer_parameters[l];
    /* Boundary s is the layer l (parameters before it: before[l]) with
     * before[l] nearest s / stages of the total: |before[l] x stages -
     * total x s| the least, in whole numbers. It leaves a layer at least
     * to each stage before it and after it. */
    int boundary = 0;
    for (int s = 1; s <= stage_index + 1; s++) {
        if (s == stages) {
            *first = boundary;
            *end = layer_count;
            return;
        }
        const size_t target = total * (size_t)s;
        size_t before = 0;
        for (int l = 0; l <= boundary; l++)
            before += l < boundary ? layer_parameters[l] : 0;
        int best = -1;
        size_t best_distance = 0;
        for (int l = boundary + 1; l <= layer_count - (stages - s); l++) {
            before += layer_parameters[l - 1];
            const size_t d = distance(before * (size_t)stages, target);
            if (best < 0 || d < best_distance) {
                best = l;
                best_distance = d;
            }
        }
        if (s == stage_index + 1) {
            *first = boundary;
            *end = best;
            return;
        }
        boundary = best;
    }
    /* TODO 1 end */
}

/* ---- TODO 2 and 3: one micro-batch on one chunk --------------------------- */

/* The tag of a message to chunk `chunk` about micro-batch `micro`: a
 * forward's activations or a backward's gradient. Two ranks exchange
 * several at once (with chunks, and in 1F1B both ways), each received by
 * its own tag. */
enum { FORWARD_TAG = 0, BACKWARD_TAG = 1 };
static int tag_of(int direction, int chunk, int micro)
{
    return (direction * PP_MOST_CHUNKS + chunk) * PP_MOST_MICRO_BATCHES +
           micro;
}

void pp_forward(pp_state *z, int chunk, int micro)
{
    /* TODO 2 start */
    const pipeline_stage *s = &z->chunk[chunk];
    const int at = chunk * z->ranks + z->rank;
    const size_t rows = z->micro_rows;
    const float *input = z->inputs + (size_t)micro * rows * (size_t)s->in;
    /* TODO 2 end */
    /* TODO 3 start */
    if (at > 0) {
        const int from = (z->rank + z->ranks - 1) % z->ranks;
        pp_check(z, MPI_Recv(z->received, (int)(rows * (size_t)s->in),
                             MPI_FLOAT, from, tag_of(FORWARD_TAG, chunk,
                                                     micro),
                             z->comm, MPI_STATUS_IGNORE), "MPI_Recv");
        input = z->received;
    }
    /* TODO 3 end */
    /* TODO 2 start */
    const float *output = pp_compute_forward(z, chunk, micro, input);
    /* TODO 2 end */
    /* TODO 3 start */
    if (at < z->stages - 1) {
        /* Its output stays in the chunk's saved activations until its
         * backward, which waits for this send first. */
        const int to = (z->rank + 1) % z->ranks;
        const int to_chunk = z->rank == z->ranks - 1 ? chunk + 1 : chunk;
        pp_check(z, MPI_Isend(output, (int)(rows * (size_t)s->out),
                              MPI_FLOAT, to, tag_of(FORWARD_TAG, to_chunk,
                                                    micro),
                              z->comm, &z->forward_send[chunk][micro]),
                 "MPI_Isend");
    }
    /* TODO 3 end */
}

void pp_backward(pp_state *z, int chunk, int micro)
{
    /* TODO 2 start */
    pipeline_stage *s = &z->chunk[chunk];
    const int at = chunk * z->ranks + z->rank;
    const size_t rows = z->micro_rows;
    const float *doutput = s->gradient[0];
    if (at == z->stages - 1)
        pp_loss(z, chunk, micro, z->batch);
    /* TODO 2 end */
    /* TODO 3 start */
    else {
        const int from = (z->rank + 1) % z->ranks;
        pp_check(z, MPI_Recv(z->received, (int)(rows * (size_t)s->out),
                             MPI_FLOAT, from, tag_of(BACKWARD_TAG, chunk,
                                                     micro),
                             z->comm, MPI_STATUS_IGNORE), "MPI_Recv");
        doutput = z->received;
    }
    /* The backward gives the output's memory back: its send first. */
    pp_check(z, MPI_Wait(&z->forward_send[chunk][micro], MPI_STATUS_IGNORE),
             "MPI_Wait");
    /* TODO 3 end */
    /* TODO 2 start */
    float *dinput = at > 0 ? z->sent_gradient[chunk][micro] : NULL;
    pp_compute_backward(z, chunk, micro, doutput, dinput);
    /* TODO 2 end */
    /* TODO 3 start */
    if (at > 0) {
        const int to = (z->rank + z->ranks - 1) % z->ranks;
        const int to_chunk = z->rank == 0 ? chunk - 1 : chunk;
        pp_check(z, MPI_Isend(dinput, (int)(rows * (size_t)s->in),
                              MPI_FLOAT, to, tag_of(BACKWARD_TAG, to_chunk,
                                                    micro),
                              z->comm, &z->backward_send[chunk][micro]),
                 "MPI_Isend");
    }
    /* TODO 3 end */
}

void pp_update(pp_state *z, long step)
{
    /* TODO 3 start */
    /* The gradients sent back: each buffer is written once a step, so
     * they are waited for together at its end. */
    for (int c = 0; c < z->chunks; c++)
        pp_check(z, MPI_Waitall(z->micro_batches, z->backward_send[c],
                                MPI_STATUSES_IGNORE), "MPI_Waitall");
    /* TODO 3 end */
    /* TODO 2 start */
    for (int c = 0; c < z->chunks; c++)
        pp_optimizer_step(z, c, step);
    /* TODO 2 end */
}

/* ---- The schedules ------------------------------------------------------ */

void pp_gpipe(pp_state *z)
{
    /* TODO 2 start */
    for (int micro = 0; micro < z->micro_batches; micro++)
        pp_forward(z, 0, micro);
    for (int micro = 0; micro < z->micro_batches; micro++)
        pp_backward(z, 0, micro);
    /* TODO 2 end */
}

void pp_one_f_one_b(pp_state *z)
{
    /* TODO 4 start */
    const int m = z->micro_batches;
    const int warm_up = z->ranks - z->rank - 1 < m ? z->ranks - z->rank - 1
                                                   : m;
    for (int micro = 0; micro < warm_up; micro++)
        pp_forward(z, 0, micro);
    for (int k = 0; k < m - warm_up; k++) {
        pp_forward(z, 0, warm_up + k);
        pp_backward(z, 0, k);
    }
    for (int micro = m - warm_up; micro < m; micro++)
        pp_backward(z, 0, micro);
    /* TODO 4 end */
}

/* TODO 5 start */
/* The k-th forward (or backward) of a rank in the interleaved order:
 * micro-batches in groups of `ranks`, each group through the chunks in
 * turn (backward: from the last chunk). */
static void interleaved_at(const pp_state *z, int k, bool backward,
                           int *chunk, int *micro)
{
    const int p = z->ranks, v = z->chunks;
    *micro = k / (p * v) * p + k % p;
    *chunk = backward ? v - 1 - k / p % v : k / p % v;
}
/* TODO 5 end */

void pp_interleaved(pp_state *z)
{
    /* TODO 5 start */
    const int total = z->chunks * z->micro_batches;
    int warm_up = z->micro_batches == z->ranks
                      ? total
                      : 2 * (z->ranks - z->rank - 1) +
                            (z->chunks - 1) * z->ranks;
    if (warm_up > total)
        warm_up = total;
    int chunk, micro;
    for (int k = 0; k < warm_up; k++) {
        interleaved_at(z, k, false, &chunk, &micro);
        pp_forward(z, chunk, micro);
    }
    for (int k = 0; k < total - warm_up; k++) {
        interleaved_at(z, warm_up + k, false, &chunk, &micro);
        pp_forward(z, chunk, micro);
        interleaved_at(z, k, true, &chunk, &micro);
        pp_backward(z, chunk, micro);
    }
    for (int k = total - warm_up; k < total; k++) {
        interleaved_at(z, k, true, &chunk, &micro);
        pp_backward(z, chunk, micro);
    }
    /* TODO 5 end */
}
