/* Lesson 05's driver: data-parallel training. Every rank builds the same
 * model from the seed; at every step each takes its shard of the batch
 * (TODO 1), computes gradients on it, the ranks average them (TODO 2, 3 or
 * 4, by --allreduce), and every rank takes the same optimizer step. Rank 0
 * shows the progress; with --out, every rank reports its final parameters,
 * the loss of every step and what it sent, for the tests. The loop itself
 * is common/train.h's, which lessons 06 and 07 share: this file says what
 * each of its steps does here.
 *
 *   scripts/mpirun -np 2 build/student/05-data-parallel/train --steps 300
 * You do not need to change this file. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check_mpi.h"
#include "comm_ledger.h"
#include "cli.h"
#include "data_parallel.h"
#include "dataset.h"
#include "memory_ledger.h"
#include "mlp.h"
#include "optimizer.h"
#include "overlap_guard.h"
#include "train.h"

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

/* The three ways of averaging the gradients, by --allreduce: each names
 * the part of the step where a rank stuck in it waits (common/steps.h). */
typedef enum { MPI_AVERAGE, RING, OVERLAP, METHODS } averaging_method;
static const struct {
    const char *name, *compute_mark, *average_mark;
} methods[METHODS] = {
    { "mpi", "forward and backward", "TODO 2: average_gradients" },
    { "ring", "forward and backward", "TODO 3: ring_allreduce" },
    { "overlap", "forward, backward and TODO 4: start_layer_average",
      "TODO 4: finish_averages" },
};

/* What the steps of the loop work on: the whole model on every rank, and
 * the optimizer's state for all of it. */
typedef struct {
    mlp model;
    averaging_method method;
    int ranks;
    overlap_state overlap;  /* TODO 4's averages under way in this step */
    /* What TODO 4 left running, seen by the communication ledger when
     * each start_layer_average returned: how many calls returned, and how
     * many of them with an average still in flight (a request open). Kept
     * here, not in overlap_state, which your code writes. */
    size_t starts_returned, starts_left_running;
    int sgd;                /* else AdamW */
    sgd_config sgd_settings;
    adamw_config adamw_settings;
    float *state1, *state2; /* SGD's velocity; AdamW's two moments */
} trainer;

/* ---- The step ---------------------------------------------------------- */

/* One training step is these three, in this order (train.h's compute,
 * synchronise and update): forward and backward on this rank's shard, the
 * gradients averaged over the ranks, and the same update on every rank. */

/* TODO 4's hook: as backward finishes a layer, start averaging it; then
 * look at what the start left in flight. A start that waits for its
 * average before it returns leaves nothing open, and nothing overlaps. A
 * start that polls may find an average already done, so the tests judge
 * the whole run, not one call. */
static void layer_done(int layer, float *slice, size_t count, void *context)
{
    trainer *t = context;
    (void)layer;
    overlap_guard(&t->overlap, "train");
    start_layer_average(&t->overlap, slice, count);
    /* A buffer the average was started from on start_layer_average's own
     * stack is dead now: overwritten, so that the ledger sees it change
     * before the average completes, on any MPI. */
    comm_ledger_overwrite_dead_frames();
    t->starts_returned++;
    if (comm_ledger_open_requests(NULL) > 0)
        t->starts_left_running++;
    /* The next layer's backward, as on a model whose layers take long:
     * the averages started so far travel to their end meanwhile. */
    comm_ledger_let_requests_finish(0.1);
}

/* The report's lines on TODO 4: "overlap_starts N left_running M". */
static void overlap_report(void *context, FILE *report)
{
    const trainer *t = context;
    if (t->method == OVERLAP)
        fprintf(report, "overlap_starts %zu left_running %zu\n",
                t->starts_returned, t->starts_left_running);
}

/* Forward and backward on this rank's shard; with overlap, each layer's
 * average starts as soon as backward has finished that layer. */
static float forward_backward(void *context, long step, const float *inputs,
                              const int *labels, size_t batch)
{
    trainer *t = context;
    (void)step;
    if (t->method == OVERLAP)
        return mlp_step_hooked(&t->model, inputs, labels, batch, NULL,
                               layer_done, t);
    return mlp_step(&t->model, inputs, labels, batch, 1, NULL);
}

/* Every rank's gradients become the average over the ranks. */
static void average(void *context, long step)
{
    trainer *t = context;
    float *grads = t->model.grads;
    const size_t count = t->model.parameter_count;
    (void)step;
    if (t->method == MPI_AVERAGE) {
        average_gradients(grads, count, MPI_COMM_WORLD);
    } else if (t->method == RING) {
        ring_allreduce(grads, count, MPI_COMM_WORLD);
        float scale = 1.0f / (float)t->ranks;
        for (size_t k = 0; k < count; k++)
            grads[k] *= scale;
    } else {
        finish_averages(&t->overlap);
    }
}

/* The same update on every rank, from the same averaged gradients. */
static void update(void *context, long step)
{
    trainer *t = context;
    const size_t count = t->model.parameter_count;
    if (t->sgd)
        sgd_step(&t->sgd_settings, t->model.params, t->model.grads,
                 t->state1, count);
    else
        adamw_step(&t->adamw_settings, step + 1, t->model.params,
                   t->model.grads, t->state1, t->state2, count);
}

/* ---- After the steps: the accuracy and the report ---------------------- */

/* How many of a batch of held-out samples the model gets right. */
static size_t classify(void *context, const float *inputs, const int *labels,
                       size_t batch)
{
    int correct = 0;
    mlp_step(&((trainer *)context)->model, inputs, labels, batch, 0,
             &correct);
    return (size_t)correct;
}

/* The final parameters, for the report: every rank holds all of them. */
static const float *parameters(void *context)
{
    return ((trainer *)context)->model.params;
}

/* ---- The run ----------------------------------------------------------- */

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
            dataset_split(&all, cut, train, held);
        }
    } else {
        dataset all;
        failed = dataset_synthetic(&all, c->samples + c->held_out, c->features,
                                   c->classes, c->seed, error, sizeof error);
        if (!failed)
            dataset_split(&all, c->samples, train, held);
    }
    mpi_exit_if_any(failed, "train", error[0] ? error : "the data could not be loaded");
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
        { "hidden", CLI_INT, &c.hidden, "hidden layers", 0,
          MLP_MAX_HIDDEN_LAYERS },
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
                            "MLP", options,
                            sizeof options / sizeof options[0] };

    mpi_start_or_exit(&argc, &argv, &spec, &c.rank, &c.ranks);
    char error[256] = "";
    /* One overlap_state for the whole run, as a framework keeps its
     * bucket state: finish_averages leaves it ready for the next step. */
    trainer t = { .ranks = c.ranks, .method = METHODS,
                  .overlap = { .comm = MPI_COMM_WORLD },
                  .sgd = strcmp(c.optimizer, "sgd") == 0 };
    mpi_exit_if_any(!t.sgd && strcmp(c.optimizer, "adamw") != 0, "train",
                    "--optimizer must be adamw or sgd");
    for (int m = 0; m < METHODS; m++)
        if (strcmp(c.allreduce, methods[m].name) == 0)
            t.method = (averaging_method)m;
    mpi_exit_if_any(t.method == METHODS, "train",
                    "--allreduce must be mpi, ring or overlap");
    mpi_exit_if_any((c.images == NULL) != (c.labels == NULL), "train",
                    "--mnist-images and --mnist-labels go together");
    c.learning_rate = learning_rate > 0 ? (float)learning_rate
                                        : t.sgd ? 0.05f : 1e-3f;

    c.report = mpi_report_open_or_exit("train", c.out, c.rank);

    dataset train = { 0 }, held = { 0 };
    load_data(&c, &train, &held);
    mlp_config shape = { train.features, train.classes, c.hidden, c.width,
                         ACTIVATION_RELU };
    mpi_exit_if_any(mlp_create(&t.model, &shape, c.local_batch, error,
                               sizeof error) != 0, "train", error);
    mlp_init(&t.model, c.seed);
    size_t count = t.model.parameter_count;
    t.state1 = ledger_alloc(MEMORY_OPTIMIZER, count * sizeof(float));
    t.state2 = t.sgd ? NULL : ledger_alloc(MEMORY_OPTIMIZER,
                                           count * sizeof(float));
    if (t.state1 == NULL || (!t.sgd && t.state2 == NULL)) {
        fprintf(stderr, "train: rank %d: out of memory\n", c.rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memset(t.state1, 0, count * sizeof(float));
    if (t.state2 != NULL)
        memset(t.state2, 0, count * sizeof(float));
    t.sgd_settings = (sgd_config){ c.learning_rate, 0.9f };
    t.adamw_settings = (adamw_config){ c.learning_rate, 0.9f, 0.999f, 1e-8f,
                                       0.0f };

    if (c.rank == 0)
        printf("train: %d rank%s x %zu samples a step, %zu parameters, %s, "
               "gradients averaged by %s\n", c.ranks, c.ranks == 1 ? "" : "s",
               c.local_batch, count, t.sgd ? "SGD with momentum" : "AdamW",
               c.allreduce);
    const train_steps steps = {
        .context = &t,
        .shard = my_shard, .shard_name = "my_shard", .shard_todo = "TODO 1",
        .compute = forward_backward,
        .compute_mark = methods[t.method].compute_mark,
        .synchronise = average,
        .synchronise_mark = methods[t.method].average_mark,
        .update = update,
        .classify = classify,
        .parameters = parameters,
        .parameter_count = count,
        .report_lines = overlap_report,
        .timed_work = "forward, backward and averaging",
    };
    const train_setup setup = { c.steps, c.local_batch, &train, &held, c.rank,
                                c.ranks, c.report, c.out };
    /* From here on your code runs: behind the boundary when graded. */
    train_enter_boundary_or_exit("train", c.report, c.out, c.rank, NULL);
    train_run_or_exit("train", &setup, &steps);
    mlp_free(&t.model);
    ledger_free(t.state1);
    ledger_free(t.state2);
    dataset_free(&train);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
