/* Lesson 08's given helpers (tensor_parallel.h) and set-up (tp_setup.h).
 * You do not need to change this file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_mpi.h"
#include "collectives.h"
#include "memory_ledger.h"
#include "partition.h"
#include "tensor_parallel.h"
#include "tp_setup.h"

/* ---- The record ---------------------------------------------------------- */

enum { TP_RECORD_MAX = 256 };

typedef struct {
    tp_phase phase;
    char kind;          /* 'A' allreduce, 'R' reduce-scatter, 'G' allgather,
                           'M' allreduce of the maximum */
    size_t count;
} tp_call;

static struct {
    tp_phase phase;
    bool stopped;
    size_t count, dropped;
    tp_call calls[TP_RECORD_MAX];
} record;

void tp_record_phase(tp_phase phase)
{
    record.phase = record.stopped ? TP_PHASE_NONE : phase;
}

void tp_record_stop(void)
{
    record.stopped = true;
    record.phase = TP_PHASE_NONE;
}

static void record_call(char kind, size_t count)
{
    if (record.phase == TP_PHASE_NONE)
        return;
    if (record.count == TP_RECORD_MAX) {
        record.dropped++;
        return;
    }
    record.calls[record.count++] = (tp_call){ record.phase, kind, count };
}

void tp_record_write(FILE *report)
{
    /* "collective K PHASE KIND COUNT", numbers only: PHASE a tp_phase,
     * KIND 0 allreduce, 1 reduce-scatter, 2 allgather, 3 maximum. */
    fprintf(report, "collectives %zu\ncollectives_dropped %zu\n",
            record.count, record.dropped);
    for (size_t k = 0; k < record.count; k++)
        fprintf(report, "collective %zu %d %d %zu\n", k,
                (int)record.calls[k].phase,
                record.calls[k].kind == 'A'   ? 0
                : record.calls[k].kind == 'R' ? 1
                : record.calls[k].kind == 'G' ? 2 : 3,
                record.calls[k].count);
}

/* ---- The helpers ------------------------------------------------------------ */

_Noreturn void tp_abort(tp_state *z, const char *why)
{
    fprintf(stderr, "%s: rank %d: %s\n", z->program, z->rank, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

void tp_check_alloc(tp_state *z, const void *block)
{
    if (block == NULL)
        tp_abort(z, memory_ledger_last_error());
}

/* A collective that failed: most often the ranks did not all call it, or
 * called it with different counts (a rank's own part.count where every
 * rank must pass the same), so their messages did not match. */
static void check_collective(tp_state *z, int result)
{
    if (result == 0)
        return;
    char why[512];
    snprintf(why, sizeof why, "%s. Every rank of the group must make the "
             "same calls of tp_allreduce, tp_reduce_scatter and "
             "tp_allgather, in the same order, with the same count: one "
             "only some ranks make, or with a count that differs between "
             "them (a rank's own part.count?), does not match", z->error);
    tp_abort(z, why);
}

void tp_reduce_scatter(tp_state *z, float *buffer, size_t count)
{
    record_call('R', count);
    size_t begin, end;
    block_range(count, (size_t)z->ranks, (size_t)z->rank, &begin, &end);
    check_collective(z, collective_reduce_scatter_f32(
                            buffer, buffer + begin, count, 0, count, z->comm,
                            z->error, sizeof z->error));
}

void tp_allgather(tp_state *z, float *buffer, size_t count)
{
    record_call('G', count);
    size_t begin, end;
    block_range(count, (size_t)z->ranks, (size_t)z->rank, &begin, &end);
    check_collective(z, collective_allgather(buffer + begin, buffer,
                                             MPI_FLOAT, count, 0, count,
                                             z->comm, z->error,
                                             sizeof z->error));
}

void tp_allreduce_max(tp_state *z, float *buffer, size_t count)
{
    record_call('M', count);
    const size_t t = (size_t)z->ranks, all = t * count;
    float *everyone = ledger_alloc(MEMORY_COMM, all * sizeof *everyone);
    tp_check_alloc(z, everyone);
    memcpy(everyone + (size_t)z->rank * count, buffer,
           count * sizeof *buffer);
    /* Rank r's block of t x count is exactly its count values. */
    check_collective(z, collective_allgather(everyone +
                                                 (size_t)z->rank * count,
                                             everyone, MPI_FLOAT, all, 0,
                                             all, z->comm, z->error,
                                             sizeof z->error));
    for (size_t i = 0; i < count; i++)
        for (size_t r = 0; r < t; r++)
            if (everyone[r * count + i] > buffer[i])
                buffer[i] = everyone[r * count + i];
    ledger_free(everyone);
}

void tp_allreduce(tp_state *z, float *buffer, size_t count)
{
    record_call('A', count);
    size_t begin, end;
    block_range(count, (size_t)z->ranks, (size_t)z->rank, &begin, &end);
    check_collective(z, collective_reduce_scatter_f32(
                            buffer, buffer + begin, count, 0, count, z->comm,
                            z->error, sizeof z->error));
    check_collective(z, collective_allgather(buffer + begin, buffer,
                                             MPI_FLOAT, count, 0, count,
                                             z->comm, z->error,
                                             sizeof z->error));
}

/* ---- The set-up -------------------------------------------------------------- */

/* Layer l's split: pairs (column, row) from the first layer on; a last
 * layer left over is whole, or with the parallel loss split by class, a
 * column layer of its own. */
static tp_split split_of(int l, int layer_count, bool parallel_loss)
{
    if (l % 2 == 1)
        return TP_ROW;
    return l + 1 < layer_count || parallel_loss ? TP_COLUMN : TP_WHOLE;
}

/* The parameters a rank holds of a layer with this split and part. */
static size_t expected_held(const tp_layer *layer)
{
    const size_t in = (size_t)layer->in, out = (size_t)layer->out;
    const size_t count = (size_t)layer->part.count;
    switch (layer->split) {
    case TP_COLUMN:
        return count * in + count;
    case TP_ROW:
        return out * count + out;
    default:
        return out * in + out;
    }
}

/* Stops the job when TODO 1's part of a layer of `out` rows is not the
 * balanced partition's for this rank. */
static tp_part column_part_checked(tp_state *z, int l, int out)
{
    tp_part part = tp_column_part(out, z->ranks, z->rank);
    size_t begin, end;
    block_range((size_t)out, (size_t)z->ranks, (size_t)z->rank, &begin,
                &end);
    if (part.count == (int)(end - begin) &&
        (part.count == 0 || part.first == (int)begin))
        return (tp_part){ (int)begin, (int)(end - begin) };
    char why[320];
    snprintf(why, sizeof why, "TODO 1: tp_column_part(%d, %d, %d) gave "
             "rows [%d, %d) of layer %d; the balanced partition gives rank "
             "%d rows [%zu, %zu) (the first %d %% %d ranks one more%s)", out,
             z->ranks, z->rank, part.first, part.first + part.count, l,
             z->rank, begin, end, out, z->ranks,
             end == begin ? "; none here" : "");
    tp_abort(z, why);
}

/* ledger_alloc of `count` floats of activations into *to; -1 when
 * refused. */
static int activations(float **to, size_t count)
{
    *to = ledger_alloc(MEMORY_ACTIVATIONS, count * sizeof **to);
    return *to == NULL ? -1 : 0;
}

int tp_create(tp_state *z, const mlp_config *shape, size_t max_batch,
              MPI_Comm comm, const adamw_config *adamw,
              bool sequence_parallel, bool parallel_loss)
{
    memset(z, 0, sizeof *z);
    z->program = "train_tp";
    MPI_CHECK(MPI_Comm_dup(comm, &z->comm));
    MPI_CHECK(MPI_Comm_rank(z->comm, &z->rank));
    MPI_CHECK(MPI_Comm_size(z->comm, &z->ranks));
    z->layer_count = shape->hidden_layers + 1;
    z->max_batch = max_batch;
    z->adamw = *adamw;
    z->sequence_parallel = sequence_parallel;
    z->parallel_loss = parallel_loss;
    z->layers = calloc((size_t)z->layer_count, sizeof *z->layers);
    if (z->layers == NULL)
        tp_abort(z, "out of memory for the layers' list");
    size_t widest = (size_t)shape->inputs;
    for (int l = 0; l < z->layer_count; l++) {
        tp_layer *layer = &z->layers[l];
        const bool last = l == z->layer_count - 1;
        layer->split = split_of(l, z->layer_count, parallel_loss);
        layer->in = l == 0 ? shape->inputs : shape->width;
        layer->out = last ? shape->classes : shape->width;
        layer->activated = !last;
        if (layer->split == TP_COLUMN)
            layer->part = column_part_checked(z, l, layer->out);
        else if (layer->split == TP_ROW)
            layer->part = z->layers[l - 1].part;
        else
            layer->part = (tp_part){ 0, layer->out };
        if ((size_t)layer->out > widest)
            widest = (size_t)layer->out;
        /* Sequence parallelism keeps a row layer's outputs (but the
         * last's) for this rank's rows, batch / t, and gathers the whole
         * input of a layer after one. */
        const bool rows_only = sequence_parallel &&
                               layer->split == TP_ROW && !last;
        const size_t outputs = layer->split == TP_COLUMN
                                   ? (size_t)layer->part.count
                                   : (size_t)layer->out;
        const size_t samples = rows_only ? max_batch / (size_t)z->ranks
                                         : max_batch;
        if (activations(&layer->pre, samples * outputs) != 0 ||
            activations(&layer->post, samples * outputs) != 0)
            goto refused;
        if (sequence_parallel && l > 0 && layer->split != TP_ROW &&
            activations(&layer->gathered,
                        max_batch * (size_t)layer->in) != 0)
            goto refused;
    }
    for (int k = 0; k < 2; k++)
        if (activations(&z->gradient[k], max_batch * widest) != 0)
            goto refused;
    return 0;
refused:
    snprintf(z->error, sizeof z->error, "%s", memory_ledger_last_error());
    return -1;
}

int tp_allocate(tp_state *z)
{
    for (int l = 0; l < z->layer_count; l++) {
        tp_layer *layer = &z->layers[l];
        if (tp_allocate_layer(z, l) != 0)
            return -1;
        const size_t want = expected_held(layer);
        if (layer->held != want) {
            char why[320];
            snprintf(why, sizeof why, "TODO %d: layer %d (%s, %d x %d, this "
                     "rank's part [%d, %d)) holds %zu parameters; its part "
                     "is %zu", layer->split == TP_COLUMN ? 1
                     : layer->split == TP_ROW ? 2 : 3, l,
                     layer->split == TP_COLUMN ? "split by rows"
                     : layer->split == TP_ROW ? "split by columns" : "whole",
                     layer->out, layer->in, layer->part.first,
                     layer->part.first + layer->part.count, layer->held,
                     want);
            tp_abort(z, why);
        }
        if (layer->params == NULL || layer->grads == NULL ||
            layer->m == NULL || layer->v == NULL) {
            char why[160];
            snprintf(why, sizeof why, "TODO %d: tp_allocate_layer returned "
                     "0 but left a buffer of layer %d NULL",
                     layer->split == TP_COLUMN ? 1
                     : layer->split == TP_ROW ? 2 : 3, l);
            tp_abort(z, why);
        }
    }
    return 0;
}

/* mlp_init(seed)'s values (common/mlp.h) of this rank's parts: the whole
 * model's layout, in a model with no storage of its own, for
 * mlp_init_range to pick each part's entries from. */
void tp_initialize(tp_state *z, uint64_t seed)
{
    mlp_layer shapes[MLP_MAX_LAYERS];
    mlp whole = { .layer_count = z->layer_count, .layers = shapes };
    size_t offset = 0;
    for (int l = 0; l < z->layer_count; l++) {
        const size_t in = (size_t)z->layers[l].in;
        const size_t out = (size_t)z->layers[l].out;
        shapes[l] = (mlp_layer){ (int)in, (int)out, offset,
                                 offset + out * in };
        offset += out * in + out;
    }
    for (int l = 0; l < z->layer_count; l++) {
        tp_layer *layer = &z->layers[l];
        const mlp_layer *at = &shapes[l];
        const size_t in = (size_t)layer->in, out = (size_t)layer->out;
        const size_t first = (size_t)layer->part.first;
        const size_t count = (size_t)layer->part.count;
        float *w = layer->params;
        if (layer->split == TP_ROW) {
            /* Columns first .. first+count-1 of every row, then all of b. */
            for (size_t r = 0; r < out; r++)
                mlp_init_range(&whole, seed, at->weights + r * in + first,
                               count, w + r * count);
            mlp_init_range(&whole, seed, at->biases, out, w + out * count);
        } else {
            /* Rows first .. first+count-1 of W, then of b. */
            mlp_init_range(&whole, seed, at->weights + first * in,
                           count * in, w);
            mlp_init_range(&whole, seed, at->biases + first, count,
                           w + count * in);
        }
        memset(layer->grads, 0, layer->held * sizeof *layer->grads);
        memset(layer->m, 0, layer->held * sizeof *layer->m);
        memset(layer->v, 0, layer->held * sizeof *layer->v);
    }
}

size_t tp_held_total(const tp_state *z)
{
    size_t total = 0;
    for (int l = 0; l < z->layer_count; l++)
        total += z->layers[l].held;
    return total;
}

void tp_destroy(tp_state *z)
{
    for (int l = 0; z->layers != NULL && l < z->layer_count; l++) {
        tp_layer *layer = &z->layers[l];
        ledger_free(layer->params);
        ledger_free(layer->grads);
        ledger_free(layer->m);
        ledger_free(layer->v);
        ledger_free(layer->pre);
        ledger_free(layer->post);
        ledger_free(layer->gathered);
    }
    for (int k = 0; k < 2; k++)
        ledger_free(z->gradient[k]);
    free(z->layers);
    MPI_CHECK(MPI_Comm_free(&z->comm));
    memset(z, 0, sizeof *z);
}
