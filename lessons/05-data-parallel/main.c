/* Lesson 05's driver: data-parallel training. Every rank builds the same
 * model from the seed; at every step each takes its shard of the batch
 * (TODO 1), computes gradients on it, the ranks average them (TODO 2, 3 or
 * 4, by --allreduce), and every rank takes the same optimizer step. Rank 0
 * shows the progress; with --out, every rank reports its final parameters,
 * the loss of every step and what it sent, for the tests.
 *
 *   mpirun -np 2 build/student/05-data-parallel/train --steps 300
 * You do not need to change this file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check_mpi.h"
#include "cli.h"
#include "comm_ledger.h"
#include "data_parallel.h"
#include "dataset.h"
#include "matrix.h"
#include "memory_ledger.h"
#include "mlp.h"
#include "optimizer.h"
#include "progress.h"
#include "report.h"
#include "steps.h"
#include "timer.h"

typedef struct {
    size_t steps;
    size_t local_batch, samples, held_out;
    int hidden, width, features, classes;
    float learning_rate;
    uint64_t seed;
    const char *optimizer, *allreduce, *images, *labels, *out;
    FILE *report;       /* OUT/rank-R.txt, opened before any work */
    int rank, ranks;
} train_config;

/* TODO 4's hook: as backward finishes a layer, start averaging it. */
static void layer_done(int layer, float *slice, size_t count, void *context)
{
    (void)layer;
    start_layer_average((overlap_state *)context, slice, count);
}

/* Stops every rank with status 2 after rank 0 says why. */
static void refuse(const train_config *c, const char *why)
{
    if (c->rank == 0)
        fprintf(stderr, "train: %s\n", why);
    mpi_exit_all(2);
}

/* The data: MNIST when both files are given, else the generated task. The
 * held-out samples follow the training ones. Every rank loads all of it:
 * data parallelism shards the work, not the data set. */
static void load_data(const train_config *c, dataset *train, dataset *held)
{
    char error[512] = "";
    int failed;
    if (c->images != NULL) {
        dataset all;
        failed = dataset_load_mnist(&all, c->images, c->labels, error,
                                    sizeof error);
        /* A sixth is held out; below 6 samples that sixth is empty, and
         * an accuracy measured on nothing means nothing. */
        if (!failed && all.count < 6) {
            snprintf(error, sizeof error, "the MNIST files hold %zu "
                     "sample%s: too few to train on five sixths and hold out "
                     "the rest (at least 6)", all.count,
                     all.count == 1 ? "" : "s");
            dataset_free(&all);
            failed = 1;
        }
        if (!failed) {
            /* The last sixth is held out. */
            size_t cut = all.count - all.count / 6;
            *train = all;
            train->count = cut;
            *held = all;
            held->count = all.count - cut;
            held->inputs = all.inputs + cut * (size_t)all.features;
            held->labels = all.labels + cut;
        }
    } else {
        dataset all;
        failed = dataset_synthetic(&all, c->samples + c->held_out, c->features,
                                   c->classes, c->seed, error, sizeof error);
        if (!failed) {
            *train = all;
            train->count = c->samples;
            *held = all;
            held->count = c->held_out;
            held->inputs = all.inputs + c->samples * (size_t)all.features;
            held->labels = all.labels + c->samples;
        }
    }
    int any_failed = failed;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any_failed, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (any_failed)
        refuse(c, error[0] ? error : "the data could not be loaded");
}

int main(int argc, char **argv)
{
    train_config c = { .steps = 300, .local_batch = 32, .samples = 8192,
                       .held_out = 2048, .hidden = 2, .width = 128,
                       .features = 64, .classes = 10, .learning_rate = 0,
                       .seed = 1, .optimizer = "adamw", .allreduce = "ring" };
    double learning_rate = -1;
    const cli_option options[] = {
        { "steps", CLI_SIZE, &c.steps, "training steps", 1, 1e7 },
        { "local-batch", CLI_SIZE, &c.local_batch, "samples per rank per step",
          1, 1 << 16 },
        { "optimizer", CLI_STRING, &c.optimizer, "adamw or sgd (momentum 0.9)",
          0, 0 },
        { "lr", CLI_DOUBLE, &learning_rate, "learning rate; -1 means 1e-3 "
          "for adamw, 0.05 for sgd", 1e-9, 10 },
        { "allreduce", CLI_STRING, &c.allreduce, "mpi (TODO 2), ring (TODO 3) "
          "or overlap (TODO 4)", 0, 0 },
        { "hidden", CLI_INT, &c.hidden, "hidden layers", 0, 16 },
        { "width", CLI_INT, &c.width, "units per hidden layer", 1, 1 << 14 },
        { "samples", CLI_SIZE, &c.samples, "generated training samples", 1,
          1 << 24 },
        { "seed", CLI_SEED, &c.seed, "seed of the model and the data", 0, 0 },
        { "mnist-images", CLI_STRING, &c.images, "MNIST images file (IDX)",
          0, 0 },
        { "mnist-labels", CLI_STRING, &c.labels, "MNIST labels file (IDX)",
          0, 0 },
        { "out", CLI_STRING, &c.out, "folder for the report to the tests",
          0, 0 },
    };
    const cli_spec spec = { "train", "lesson 05: data-parallel training of an "
                            "MLP", options, sizeof options / sizeof options[0] };

    mpi_start(&argc, &argv, &spec, &c.rank, &c.ranks);
    char error[256];
    int sgd = strcmp(c.optimizer, "sgd") == 0;
    if (!sgd && strcmp(c.optimizer, "adamw") != 0)
        refuse(&c, "--optimizer must be adamw or sgd");
    enum { MPI_AVERAGE, RING, OVERLAP } method =
        strcmp(c.allreduce, "mpi") == 0     ? MPI_AVERAGE
        : strcmp(c.allreduce, "ring") == 0  ? RING
        : strcmp(c.allreduce, "overlap") == 0 ? OVERLAP : -1;
    if ((int)method < 0)
        refuse(&c, "--allreduce must be mpi, ring or overlap");
    if ((c.images == NULL) != (c.labels == NULL))
        refuse(&c, "--mnist-images and --mnist-labels go together");
    c.learning_rate = learning_rate > 0 ? (float)learning_rate
                                        : sgd ? 0.05f : 1e-3f;

    c.report = mpi_report_open_or_exit("train", c.out, c.rank);

    dataset train = { 0 }, held = { 0 };
    load_data(&c, &train, &held);
    mlp model;
    mlp_config shape = { train.features, train.classes, c.hidden, c.width,
                         ACTIVATION_RELU };
    if (mlp_create(&model, &shape, c.local_batch, error, sizeof error) != 0)
        refuse(&c, error);
    mlp_init(&model, c.seed);
    size_t count = model.parameter_count;
    float *state1 = ledger_alloc(MEMORY_OPTIMIZER, count * sizeof(float));
    float *state2 = sgd ? NULL : ledger_alloc(MEMORY_OPTIMIZER,
                                              count * sizeof(float));
    float *inputs = ledger_alloc(MEMORY_ACTIVATIONS, c.local_batch *
                                 (size_t)train.features * sizeof(float));
    int *labels = malloc(c.local_batch * sizeof *labels);
    /* One index more than the batch: a guard, so that my_shard writing past
     * its local_batch indices shows. */
    size_t *indices = malloc((c.local_batch + 1) * sizeof *indices);
    float *losses = malloc(c.steps * sizeof *losses);
    if (state1 == NULL || (!sgd && state2 == NULL) || inputs == NULL ||
        labels == NULL || indices == NULL || losses == NULL) {
        fprintf(stderr, "train: rank %d: out of memory\n", c.rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(state1, 0, count * sizeof(float));
    if (state2 != NULL)
        memset(state2, 0, count * sizeof(float));
    sgd_config sgd_settings = { c.learning_rate, 0.9f };
    adamw_config adamw_settings = { c.learning_rate, 0.9f, 0.999f, 1e-8f,
                                    0.0f };

    if (c.rank == 0)
        printf("train: %d rank%s x %zu samples a step, %zu parameters, %s, "
               "gradients averaged by %s\n", c.ranks, c.ranks == 1 ? "" : "s",
               c.local_batch, count, sgd ? "SGD with momentum" : "AdamW",
               c.allreduce);
    progress_line progress = progress_start(stdout, (long)c.steps);
    comm_ledger_reset();
    double loop_start = timer_now();
    double gradient_seconds = 0;
    for (long step = 0; step < (long)c.steps; step++) {
        steps_enter("TODO 1: my_shard");
        indices[c.local_batch] = SIZE_MAX;
        my_shard(step, c.local_batch, c.ranks, c.rank, train.count, indices);
        if (indices[c.local_batch] != SIZE_MAX) {
            fprintf(stderr, "train: rank %d: my_shard wrote past its %zu "
                    "indices (TODO 1)\n", c.rank, c.local_batch);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (size_t k = 0; k < c.local_batch; k++) {
            if (indices[k] >= train.count) {
                fprintf(stderr, "train: rank %d: my_shard gave sample %zu of "
                        "%zu (TODO 1)\n", c.rank, indices[k], train.count);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            memcpy(&inputs[k * (size_t)train.features],
                   &train.inputs[indices[k] * (size_t)train.features],
                   (size_t)train.features * sizeof(float));
            labels[k] = train.labels[indices[k]];
        }
        double start = timer_now();
        float loss;
        if (method == OVERLAP) {
            overlap_state overlap = { .comm = MPI_COMM_WORLD };
            steps_enter("forward, backward and TODO 4: start_layer_average");
            loss = mlp_step_hooked(&model, inputs, labels, c.local_batch,
                                   NULL, layer_done, &overlap);
            steps_enter("TODO 4: finish_averages");
            finish_averages(&overlap);
        } else {
            steps_enter("forward and backward");
            loss = mlp_step(&model, inputs, labels, c.local_batch, 1, NULL);
            if (method == MPI_AVERAGE) {
                steps_enter("TODO 2: average_gradients");
                average_gradients(model.grads, count, MPI_COMM_WORLD);
            } else {
                steps_enter("TODO 3: ring_allreduce");
                ring_allreduce(model.grads, count, MPI_COMM_WORLD);
                float scale = 1.0f / (float)c.ranks;
                for (size_t k = 0; k < count; k++)
                    model.grads[k] *= scale;
            }
        }
        gradient_seconds += timer_now() - start;
        steps_enter("optimizer step");
        if (sgd)
            sgd_step(&sgd_settings, model.params, model.grads, state1, count);
        else
            adamw_step(&adamw_settings, step + 1, model.params, model.grads,
                       state1, state2, count);
        /* The step's loss over the whole global batch, for rank 0: the mean
         * of the ranks' means (equal shards). */
        float total = 0;
        MPI_CHECK(MPI_Reduce(&loss, &total, 1, MPI_FLOAT, MPI_SUM, 0,
                             MPI_COMM_WORLD));
        losses[step] = total / (float)c.ranks;
        if (c.rank == 0 && (step + 1 == (long)c.steps || (step + 1) % 10 == 0))
            progress_report(&progress, step + 1, losses[step],
                            (double)(step + 1) * (double)c.local_batch *
                                c.ranks);
    }
    double loop_seconds = timer_now() - loop_start;
    if (c.rank == 0)
        progress_finish(&progress);
    steps_enter("report");

    double held_accuracy = mlp_accuracy(&model, held.inputs, held.labels,
                                        held.count);
    if (c.rank == 0)
        printf("held-out accuracy %.4f after %zu steps; forward, backward "
               "and averaging took %.3f s of the run\nsummary: ranks=%d steps=%zu "
               "loss=%.4f accuracy=%.4f samples_per_s=%.0f\n", held_accuracy,
               c.steps, gradient_seconds, c.ranks, c.steps,
               losses[c.steps - 1], held_accuracy,
               (double)c.steps * (double)c.local_batch * c.ranks /
                   loop_seconds);
    if (c.report != NULL) {
        FILE *report = c.report;
        fprintf(report, "ranks %d\nparameters %zu\nsteps %zu\n"
                "accuracy_ppm %lld\n", c.ranks, count, c.steps,
                llround(held_accuracy * 1e6));
        /* With the requests still open after every step: what TODO 4
         * started and never completed. */
        comm_ledger_write(report);
        if (fclose(report) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        double *copy = vector_alloc(count > c.steps ? count : c.steps,
                                    "report");
        for (size_t k = 0; k < count; k++)
            copy[k] = model.params[k];
        if (report_write_doubles(c.out, "params", c.rank, copy, count) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (size_t k = 0; k < c.steps; k++)
            copy[k] = losses[k];
        if (c.rank == 0 && report_write_doubles(c.out, "losses", 0, copy,
                                                c.steps) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        matrix_free(copy);
    }
    mlp_free(&model);
    ledger_free(state1);
    ledger_free(state2);
    ledger_free(inputs);
    free(labels);
    free(indices);
    free(losses);
    dataset_free(&train);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
