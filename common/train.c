/* One training loop, shared by the drivers of lessons 05-07. */
#include "train.h"

#include "boundary.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check_mpi.h"
#include "comm_ledger.h"
#include "device.h"
#include "memory_ledger.h"
#include "progress.h"
#include "report.h"
#include "steps.h"
#include "timer.h"

/* The loop's own buffers. */
typedef struct {
    float *inputs;      /* (local_batch, features): this step's samples */
    int *labels;        /* (local_batch) */
    size_t *indices;    /* (local_batch + 1): the shard's, and a guard */
    float *losses;      /* (steps): each step's mean loss over the ranks */
} loop_buffers;

/* Says why in `error` and returns `status`. */
static int failed(char *error, size_t error_len, int status,
                  const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error, error_len, format, arguments);
    va_end(arguments);
    return status;
}

static void free_buffers(loop_buffers *buffers)
{
    ledger_free(buffers->inputs);
    free(buffers->labels);
    free(buffers->indices);
    free(buffers->losses);
}

/* " (TODO 1)" after a message about the shard, or nothing. */
static void todo_note(const train_steps *plug, char *note, size_t note_len)
{
    if (plug->shard_todo != NULL)
        snprintf(note, note_len, " (%s)", plug->shard_todo);
    else
        note[0] = '\0';
}

/* How many ranks take different samples: every rank, or the driver's
 * shard_ranks (lesson 08: the ranks of a tensor-parallel group share one
 * batch). */
static int shard_ranks(const train_setup *setup, const train_steps *plug)
{
    return plug->shard_ranks > 0 ? plug->shard_ranks : setup->ranks;
}

/* Step `step`'s samples for this rank, from the shard function, into the
 * buffers: every index checked, since a wrong one would read outside the
 * data set. */
static int gather_samples(const train_setup *setup, const train_steps *plug,
                          long step, loop_buffers *buffers, char *error,
                          size_t error_len)
{
    const dataset *train = setup->train;
    const size_t batch = setup->local_batch;
    const size_t features = (size_t)train->features;
    char note[64];
    todo_note(plug, note, sizeof note);
    /* One index more than the batch: a guard, so that writing past the
     * local_batch indices shows. */
    buffers->indices[batch] = SIZE_MAX;
    plug->shard(step, batch, shard_ranks(setup, plug),
                plug->shard_ranks > 0 ? plug->shard_rank : setup->rank,
                train->count, buffers->indices);
    if (buffers->indices[batch] != SIZE_MAX)
        return failed(error, error_len, 1, "rank %d: %s wrote past its %zu "
                      "indices%s", setup->rank, plug->shard_name, batch, note);
    for (size_t k = 0; k < batch; k++)
        if (buffers->indices[k] >= train->count)
            return failed(error, error_len, 1, "rank %d: %s gave sample %zu "
                          "of %zu%s", setup->rank, plug->shard_name,
                          buffers->indices[k], train->count, note);
    /* The inputs buffer is activations: with a cpu device (lesson 07), the
     * device's memory, which this copy writes in place as a GPU's input
     * upload would (device.h). */
    device_access_begin();
    for (size_t k = 0; k < batch; k++) {
        size_t sample = buffers->indices[k];
        memcpy(&buffers->inputs[k * features],
               &train->inputs[sample * features], features * sizeof(float));
        buffers->labels[k] = train->labels[sample];
    }
    device_access_end();
    return 0;
}

/* The fraction of the held-out samples the model classifies right, in
 * batches of local_batch (the most the driver's model takes at once). */
static double held_out_accuracy(const train_setup *setup,
                                const train_steps *plug)
{
    const dataset *held = setup->held;
    size_t right = 0;
    for (size_t first = 0; first < held->count; first += setup->local_batch) {
        size_t batch = held->count - first < setup->local_batch
                           ? held->count - first : setup->local_batch;
        right += plug->classify(plug->context,
                                &held->inputs[first * (size_t)held->features],
                                &held->labels[first], batch);
    }
    return held->count ? (double)right / (double)held->count : 0.0;
}

/* The report to the tests (see train.h), closing setup->report. */
static int write_report(const train_setup *setup, const train_steps *plug,
                        double accuracy, const float *losses, char *error,
                        size_t error_len)
{
    FILE *report = setup->report;
    fprintf(report, "ranks %d\nparameters %zu\nsteps %zu\n"
            "accuracy_ppm %lld\n", setup->ranks, plug->parameter_count,
            setup->steps, llround(accuracy * 1e6));
    if (plug->report_lines != NULL)
        plug->report_lines(plug->context, report);
    /* With the requests still open after every step: what a lesson's code
     * started and never completed. */
    comm_ledger_write(report);
    if (fclose(report) != 0)
        return failed(error, error_len, 1, "rank %d: the report in %s could "
                      "not be written", setup->rank, setup->out);
    size_t longest = plug->parameter_count > setup->steps
                         ? plug->parameter_count : setup->steps;
    double *copy = malloc((longest ? longest : 1) * sizeof *copy);
    if (copy == NULL)
        return failed(error, error_len, 2, "rank %d: no memory for the "
                      "report's %zu doubles", setup->rank, longest);
    const float *params = plug->parameters(plug->context);
    for (size_t k = 0; k < plug->parameter_count; k++)
        copy[k] = params[k];
    int bad = report_write_doubles(setup->out, "params", setup->rank, copy,
                                   plug->parameter_count) != 0;
    for (size_t k = 0; k < setup->steps; k++)
        copy[k] = losses[k];
    if (!bad && setup->rank == 0)
        bad = report_write_doubles(setup->out, "losses", 0, copy,
                                   setup->steps) != 0;
    free(copy);
    if (bad)
        return failed(error, error_len, 1, "rank %d: the report's vectors "
                      "could not be written to %s", setup->rank, setup->out);
    return 0;
}

int train_run(const train_setup *setup, const train_steps *plug,
              char *error, size_t error_len)
{
    const size_t batch = setup->local_batch, steps = setup->steps;
    const size_t features = (size_t)setup->train->features;
    if (steps == 0 || batch == 0)
        return failed(error, error_len, 2, "rank %d: %zu steps of %zu "
                      "samples: both must be at least 1", setup->rank, steps,
                      batch);
    loop_buffers buffers = {
        ledger_alloc(MEMORY_ACTIVATIONS, batch * features * sizeof(float)),
        malloc(batch * sizeof(int)),
        malloc((batch + 1) * sizeof(size_t)),
        malloc(steps * sizeof(float)),
    };
    if (buffers.inputs == NULL || buffers.labels == NULL ||
        buffers.indices == NULL || buffers.losses == NULL) {
        free_buffers(&buffers);
        return failed(error, error_len, 2, "rank %d: out of memory",
                      setup->rank);
    }
    char shard_mark[96];
    if (plug->shard_todo != NULL)
        snprintf(shard_mark, sizeof shard_mark, "%s: %s", plug->shard_todo,
                 plug->shard_name);
    else
        snprintf(shard_mark, sizeof shard_mark, "%s", plug->shard_name);

    progress_line progress = progress_start(stdout, (long)steps);
    comm_ledger_reset();
    double loop_start = timer_now();
    double gradient_seconds = 0;
    for (long step = 0; step < (long)steps; step++) {
        steps_enter(shard_mark);
        int status = gather_samples(setup, plug, step, &buffers, error,
                                    error_len);
        if (status != 0) {
            free_buffers(&buffers);
            return status;
        }
        double start = timer_now();
        steps_enter(plug->compute_mark);
        float loss = plug->compute(plug->context, step, buffers.inputs,
                                   buffers.labels, batch);
        if (plug->synchronise != NULL) {
            steps_enter(plug->synchronise_mark);
            plug->synchronise(plug->context, step);
        }
        gradient_seconds += timer_now() - start;
        steps_enter(plug->update_mark != NULL ? plug->update_mark
                                              : "optimizer step");
        plug->update(plug->context, step);
        /* The step's loss over the whole global batch, for rank 0: the mean
         * of the ranks' means (equal shards). */
        float total = 0;
        MPI_CHECK(MPI_Reduce(&loss, &total, 1, MPI_FLOAT, MPI_SUM, 0,
                             MPI_COMM_WORLD));
        buffers.losses[step] = total / (float)setup->ranks;
        if (setup->rank == 0 &&
            (step + 1 == (long)steps || (step + 1) % 10 == 0))
            progress_report(&progress, step + 1, buffers.losses[step],
                            (double)(step + 1) * (double)batch *
                                setup->ranks);
    }
    double loop_seconds = timer_now() - loop_start;
    if (setup->rank == 0)
        progress_finish(&progress);
    steps_enter("report");

    double accuracy = held_out_accuracy(setup, plug);
    if (setup->rank == 0) {
        printf("held-out accuracy %.4f after %zu step%s; %s took %.3f s of "
               "the run\nsummary: ranks=%d steps=%zu loss=%.4f accuracy=%.4f "
               "samples_per_s=%.0f", accuracy, steps, steps == 1 ? "" : "s",
               plug->timed_work,
               gradient_seconds, setup->ranks, steps,
               buffers.losses[steps - 1], accuracy,
               (double)steps * (double)batch * shard_ranks(setup, plug) /
                   loop_seconds);
        if (plug->summary_keys != NULL)
            plug->summary_keys(plug->context, stdout);
        printf("\n");
    }
    /* The student's work is over: the watch outside reads its last
     * measurements before the reports are written. */
    mpi_mark_done();
    int status = 0;
    if (setup->report != NULL)
        status = write_report(setup, plug, accuracy, buffers.losses, error,
                              error_len);
    free_buffers(&buffers);
    return status;
}

void train_enter_boundary_or_exit(const char *program, FILE *report,
                                  const char *out, int rank,
                                  const char *const *own_vectors)
{
    const char *writable[TRAIN_OWN_VECTORS + 3] = { "params" };
    size_t n = 1;
    for (size_t k = 0; own_vectors != NULL && own_vectors[k] != NULL; k++) {
        if (k == TRAIN_OWN_VECTORS) {
            fprintf(stderr, "%s: more than %d vectors of its own to "
                    "write\n", program, TRAIN_OWN_VECTORS);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        writable[n++] = own_vectors[k];
    }
    /* Rank 0's losses last: the list ends at the first NULL. */
    writable[n] = rank == 0 ? "losses" : NULL;
    writable[n + 1] = NULL;
    mpi_enter_boundary_or_exit(program, report, out, rank, writable);
}

void train_run_or_exit(const char *program, const train_setup *setup,
                       const train_steps *steps)
{
    char error[256];
    int status = train_run(setup, steps, error, sizeof error);
    if (status != 0) {
        fprintf(stderr, "%s: %s\n", program, error);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
}

void train_generate_or_exit(const char *program, size_t samples,
                            size_t held_out, int features, int classes,
                            uint64_t seed, dataset *train, dataset *held)
{
    enum { PIECE = 256 };
    char error[256] = "";
    dataset all = { samples + held_out, features, classes, NULL, NULL };
    const size_t width = (size_t)features;
    all.inputs = malloc(all.count * width * sizeof *all.inputs);
    all.labels = malloc(all.count * sizeof *all.labels);
    int failed = all.inputs == NULL || all.labels == NULL;
    if (failed)
        snprintf(error, sizeof error, "no memory for %zu samples", all.count);
    for (size_t first = 0; !failed && first < all.count; first += PIECE) {
        size_t count = all.count - first < PIECE ? all.count - first : PIECE;
        dataset piece;
        failed = dataset_synthetic_range(&piece, first, count, features,
                                         classes, seed, error,
                                         sizeof error) != 0;
        if (failed)
            break;
        memcpy(all.inputs + first * width, piece.inputs,
               count * width * sizeof *all.inputs);
        memcpy(all.labels + first, piece.labels, count * sizeof *all.labels);
        dataset_free(&piece);
    }
    if (!failed)
        dataset_split(&all, samples, train, held);
    else {
        free(all.inputs);
        free(all.labels);
    }
    mpi_exit_if_any(failed, program,
                    error[0] ? error : "the data could not be generated");
}

void train_data_free(dataset *train)
{
    free(train->inputs);
    free(train->labels);
    train->inputs = NULL;
    train->labels = NULL;
}

void train_shard_interleaved(long step, size_t local_batch, int ranks,
                             int rank, size_t dataset_size, size_t *indices)
{
    for (size_t k = 0; k < local_batch; k++)
        indices[k] = (((size_t)step * local_batch + k) * (size_t)ranks +
                      (size_t)rank) % dataset_size;
}
