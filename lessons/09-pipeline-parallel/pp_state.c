/* Lesson 09's given helpers (pipeline.h) and set-up (pp_setup.h).
 * You do not need to change this file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_mpi.h"
#include "memory_ledger.h"
#include "pipeline.h"
#include "pp_setup.h"
#include "steps.h"
#include "timer.h"

/* ---- The record ---------------------------------------------------------- */

enum { PP_RECORD_MAX = 4 * PP_MOST_CHUNKS * PP_MOST_MICRO_BATCHES +
                       PP_MOST_CHUNKS };
enum { RECORD_FORWARD, RECORD_BACKWARD, RECORD_UPDATE };

static struct {
    bool on;
    size_t count, dropped;
    struct {
        int kind, micro, chunk;
    } operations[PP_RECORD_MAX];
} record;

void pp_record_start(void)
{
    record.on = true;
}

void pp_record_stop(void)
{
    record.on = false;
}

static void record_operation(int kind, int micro, int chunk)
{
    if (!record.on)
        return;
    if (record.count == PP_RECORD_MAX) {
        record.dropped++;
        return;
    }
    record.operations[record.count].kind = kind;
    record.operations[record.count].micro = micro;
    record.operations[record.count].chunk = chunk;
    record.count++;
}

static struct {
    bool on;
    double busy, first_start, last_end;
} clock;

void pp_clock_start(void)
{
    clock.on = true;
    clock.busy = 0;
    clock.first_start = -1;
    clock.last_end = 0;
}

void pp_clock_stop(void)
{
    clock.on = false;
}

void pp_clock_read(double *busy, double *first_start, double *last_end)
{
    *busy = clock.busy;
    *first_start = clock.first_start;
    *last_end = clock.last_end;
}

/* A computation from `start` to now, on the clock. */
static void clock_add(double start)
{
    if (!clock.on)
        return;
    const double end = timer_now();
    clock.busy += end - start;
    if (clock.first_start < 0)
        clock.first_start = start;
    clock.last_end = end;
}

void pp_record_write(FILE *report)
{
    fprintf(report, "operations %zu\noperations_dropped %zu\n", record.count,
            record.dropped);
    for (size_t k = 0; k < record.count; k++)
        fprintf(report, "operation %zu %d %d %d\n", k,
                record.operations[k].kind, record.operations[k].micro,
                record.operations[k].chunk);
}

size_t pp_record_operations(int *triples, size_t most)
{
    size_t n = 0;
    for (size_t k = 0; k < record.count && n < most; k++) {
        if (record.operations[k].kind == RECORD_UPDATE)
            continue;
        triples[3 * n] = record.operations[k].kind;
        triples[3 * n + 1] = record.operations[k].micro;
        triples[3 * n + 2] = record.operations[k].chunk;
        n++;
    }
    return n;
}

/* ---- The helpers ------------------------------------------------------------ */

_Noreturn void pp_abort(pp_state *z, const char *why)
{
    fprintf(stderr, "%s: rank %d: %s\n", z->program, z->rank, why);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    abort();
}

void pp_check(pp_state *z, int result, const char *call)
{
    if (result == MPI_SUCCESS)
        return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(result, text, &length);
    char why[MPI_MAX_ERROR_STRING + 128];
    snprintf(why, sizeof why, "%s failed: %s", call, text);
    pp_abort(z, why);
}

/* The chunk and micro-batch a helper was given, in range. */
static void check_place(pp_state *z, const char *function, int chunk,
                        int micro)
{
    if (chunk >= 0 && chunk < z->chunks && micro >= 0 &&
        micro < z->micro_batches)
        return;
    char why[256];
    snprintf(why, sizeof why, "%s(chunk %d, micro-batch %d): this rank "
             "holds chunks 0 to %d, and a step has micro-batches 0 to %d",
             function, chunk, micro, z->chunks - 1, z->micro_batches - 1);
    pp_abort(z, why);
}

/* The schedule running now (pp_mark_schedule). After each forward and
 * backward, the rank's step names the operation it ran last: a rank that
 * waits forever in the message after it is found by the one before. */
static char schedule_mark[64];

void pp_mark_schedule(const char *mark)
{
    snprintf(schedule_mark, sizeof schedule_mark, "%s", mark);
    steps_enter(mark);
}

static void say_last(const char *kind, int micro, int chunk)
{
    if (schedule_mark[0] == '\0')
        return;
    char step[160]; /* steps_enter keeps what fits its field */
    snprintf(step, sizeof step, "%s, after %s %d (chunk %d)", schedule_mark,
             kind, micro, chunk);
    steps_enter(step);
}

const float *pp_compute_forward(pp_state *z, int chunk, int micro,
                                const float *input)
{
    check_place(z, "pp_compute_forward", chunk, micro);
    record_operation(RECORD_FORWARD, micro, chunk);
    const double start = timer_now();
    const float *output = stage_forward(&z->chunk[chunk], micro, input,
                                        z->micro_rows);
    clock_add(start);
    say_last("forward", micro, chunk);
    if (output == NULL) {
        char why[400];
        snprintf(why, sizeof why, "%s (TODO 2-5: each micro-batch's "
                 "forward once a step on each chunk, before its backward)",
                 z->chunk[chunk].error);
        pp_abort(z, why);
    }
    return output;
}

void pp_loss(pp_state *z, int chunk, int micro, size_t samples)
{
    check_place(z, "pp_loss", chunk, micro);
    const size_t first = (size_t)micro * z->micro_rows;
    double sum = stage_loss(&z->chunk[chunk], micro, z->labels + first,
                            samples, NULL);
    if (sum != sum) {
        char why[400];
        snprintf(why, sizeof why, "%s (TODO 2-5: the loss is the last "
                 "stage's, after the micro-batch's forward there: a "
                 "schedule that runs a backward before its forward?)",
                 z->chunk[chunk].error);
        pp_abort(z, why);
    }
    z->loss += sum;
}

void pp_compute_backward(pp_state *z, int chunk, int micro,
                         const float *doutput, float *dinput)
{
    check_place(z, "pp_compute_backward", chunk, micro);
    record_operation(RECORD_BACKWARD, micro, chunk);
    const double start = timer_now();
    const int refused = stage_backward(&z->chunk[chunk], micro, doutput,
                                       dinput);
    clock_add(start);
    say_last("backward", micro, chunk);
    if (refused != 0) {
        char why[400];
        snprintf(why, sizeof why, "%s (TODO 2-5: a micro-batch's backward "
                 "once a step on each chunk, after its forward)",
                 z->chunk[chunk].error);
        pp_abort(z, why);
    }
}

void pp_optimizer_step(pp_state *z, int chunk, long step)
{
    if (chunk < 0 || chunk >= z->chunks) {
        char why[160];
        snprintf(why, sizeof why, "pp_optimizer_step(chunk %d): this rank "
                 "holds chunks 0 to %d", chunk, z->chunks - 1);
        pp_abort(z, why);
    }
    record_operation(RECORD_UPDATE, 0, chunk);
    stage_update(&z->chunk[chunk], &z->adamw, step);
}

/* ---- The set-up -------------------------------------------------------------- */

/* Every stage's layers from your pp_layers_of, which must be runs that
 * cover the model in order, a layer at least each: the job stops with
 * the reason otherwise. This rank's chunk c gets stage c x ranks + rank's. */
static void check_stages(pp_state *z, int layer_count,
                         const size_t *layer_parameters, int *firsts,
                         int *ends)
{
    int expected_first = 0;
    for (int s = 0; s < z->stages; s++) {
        pp_layers_of(layer_count, layer_parameters, z->stages, s, &firsts[s],
                     &ends[s]);
        if (firsts[s] != expected_first || ends[s] <= firsts[s] ||
            ends[s] > layer_count ||
            (s == z->stages - 1 && ends[s] != layer_count)) {
            char why[320];
            snprintf(why, sizeof why, "TODO 1: pp_layers_of(%d layers, %d "
                     "stages) gave stage %d layers [%d, %d); stage %d must "
                     "begin where the one before ends, at layer %d, and hold "
                     "at least one layer%s", layer_count, z->stages, s,
                     firsts[s], ends[s], s, expected_first,
                     s == z->stages - 1 ? ", the last one up to the model's "
                                          "end"
                                        : "");
            pp_abort(z, why);
        }
        expected_first = ends[s];
    }
}

int pp_create(pp_state *z, const mlp_config *shape, MPI_Comm comm,
              pp_schedule schedule, int chunks, int micro_batches,
              size_t max_batch, const adamw_config *adamw, uint64_t seed)
{
    memset(z, 0, sizeof *z);
    z->program = "train_pp";
    MPI_CHECK(MPI_Comm_dup(comm, &z->comm));
    MPI_CHECK(MPI_Comm_rank(z->comm, &z->rank));
    MPI_CHECK(MPI_Comm_size(z->comm, &z->ranks));
    z->schedule = schedule;
    z->chunks = chunks;
    z->stages = chunks * z->ranks;
    z->micro_batches = micro_batches;
    z->micro_rows = max_batch / (size_t)micro_batches;
    z->adamw = *adamw;
    for (int c = 0; c < PP_MOST_CHUNKS; c++)
        for (int i = 0; i < PP_MOST_MICRO_BATCHES; i++)
            z->forward_send[c][i] = z->backward_send[c][i] =
                MPI_REQUEST_NULL;
    const int layer_count = shape->hidden_layers + 1;
    size_t layer_parameters[MLP_MAX_LAYERS];
    for (int l = 0; l < layer_count; l++)
        layer_parameters[l] =
            (size_t)(l == layer_count - 1 ? shape->classes : shape->width) *
            ((size_t)(l == 0 ? shape->inputs : shape->width) + 1);
    int firsts[MLP_MAX_LAYERS], ends[MLP_MAX_LAYERS];
    check_stages(z, layer_count, layer_parameters, firsts, ends);
    size_t widest = 0;
    for (int c = 0; c < chunks; c++) {
        const int s = c * z->ranks + z->rank;
        pipeline_stage *st = &z->chunk[c];
        if (stage_create(st, shape, firsts[s], ends[s], z->micro_rows,
                         micro_batches) != 0) {
            snprintf(z->error, sizeof z->error, "%s", st->error);
            return -1;
        }
        stage_init(st, shape, seed);
        if ((size_t)st->in > widest)
            widest = (size_t)st->in;
        if ((size_t)st->out > widest)
            widest = (size_t)st->out;
        for (int i = 0; s > 0 && i < micro_batches; i++) {
            z->sent_gradient[c][i] = ledger_alloc(
                MEMORY_COMM, z->micro_rows * (size_t)st->in * sizeof(float));
            if (z->sent_gradient[c][i] == NULL)
                goto refused;
        }
    }
    z->received = ledger_alloc(MEMORY_COMM,
                               z->micro_rows * widest * sizeof(float));
    if (z->received == NULL)
        goto refused;
    return 0;
refused:
    snprintf(z->error, sizeof z->error, "%s", memory_ledger_last_error());
    return -1;
}

void pp_destroy(pp_state *z)
{
    for (int c = 0; c < z->chunks; c++) {
        stage_free(&z->chunk[c]);
        for (int i = 0; i < z->micro_batches; i++)
            ledger_free(z->sent_gradient[c][i]);
    }
    ledger_free(z->received);
    MPI_CHECK(MPI_Comm_free(&z->comm));
    memset(z, 0, sizeof *z);
}

size_t pp_held_total(const pp_state *z)
{
    size_t total = 0;
    for (int c = 0; c < z->chunks; c++)
        total += z->chunk[c].parameter_count;
    return total;
}
