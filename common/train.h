/* One training loop, shared by the drivers of lessons 05-07.
 *
 * Every rank runs the same loop; what differs between the lessons (how the
 * gradients are synchronised, how and where the parameters are updated,
 * whether they are whole, sharded or offloaded) is plugged in by the
 * driver as functions. Each step, on every rank, in this order:
 *
 *   1. shard        the driver's function names the local_batch samples
 *                   this rank takes (lesson 05's TODO 1); the loop checks
 *                   every index and copies the samples in
 *   2. compute      forward and backward on them; returns their mean loss
 *   3. synchronise  the gradients across the ranks (may be NULL: compute
 *                   did it, as lesson 06's stage 2 does during backward)
 *   4. update       the optimizer step
 *   5. the step's loss, the mean over the ranks, to rank 0, which shows the
 *      progress line (common/progress.h) every 10 steps and at the last
 *
 * Then the held-out accuracy (classify, batch by batch), rank 0's closing
 * lines, and, when the driver opened one, each rank's report to the tests
 * (common/report.h):
 *
 *   OUT/rank-R.txt          ranks P / parameters N / steps S /
 *                           accuracy_ppm A / the driver's own lines / the
 *                           communication ledger (comm_ledger_write)
 *   OUT/params-rank-R.bin   the final parameters, as doubles
 *   OUT/losses-rank-0.bin   rank 0: the loss of every step, as doubles
 *
 * The loop marks each part as the rank enters it (common/steps.h), so a run
 * that hangs says where. The communication ledger is reset just before the
 * first step: the report counts the loop's traffic, the loss's reduction
 * included.
 *
 * Not here: which samples a rank takes (the driver's shard function: it is
 * lesson 05's exercise), and anything about the model. */
#ifndef ZZ_TRAIN_H
#define ZZ_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dataset.h"

/* Writes the local_batch indices of the samples that rank `rank` of
 * `ranks` takes at step `step` (from 0), each below dataset_size, into
 * indices: lesson 05's my_shard. */
typedef void train_shard_fn(long step, size_t local_batch, int ranks,
                            int rank, size_t dataset_size, size_t *indices);

/* Forward and backward of step `step` on `batch` samples: inputs is
 * (batch, features), labels (batch). Returns the samples' mean loss. */
typedef float train_compute_fn(void *context, long step, const float *inputs,
                               const int *labels, size_t batch);

/* Synchronise the gradients, or update the parameters, after step `step`
 * (from 0; AdamW's bias correction counts from 1, so it takes step + 1). */
typedef void train_step_fn(void *context, long step);

/* How many of the `batch` samples (inputs (batch, features), labels
 * (batch)) the model classifies right: forward only. */
typedef size_t train_classify_fn(void *context, const float *inputs,
                                 const int *labels, size_t batch);

/* The final parameters, for the report: parameter_count floats, which the
 * driver may gather into a buffer of its own here. */
typedef const float *train_parameters_fn(void *context);

/* Lines of the driver's own in its rank's report. */
typedef void train_report_fn(void *context, FILE *report);

/* What the driver plugs in. The marks are what common/steps.h shows of a
 * rank stuck in that part ("TODO 2: average_gradients"). */
typedef struct {
    void *context;                    /* handed to every function here */
    train_shard_fn *shard;
    const char *shard_name;           /* "my_shard", in marks and messages */
    const char *shard_todo;           /* "TODO 1", or NULL: where a wrong
                                         index sends the student */
    int shard_ranks, shard_rank;      /* 0, 0: every rank takes its own
                                         samples, as rank `rank` of
                                         `ranks`. Otherwise the shard's
                                         ranks and this rank's place among
                                         them (lesson 08: a tensor-parallel
                                         group takes one shard together) */
    train_compute_fn *compute;
    const char *compute_mark;         /* "forward and backward" */
    train_step_fn *synchronise;       /* NULL: compute synchronised */
    const char *synchronise_mark;
    train_step_fn *update;
    const char *update_mark;          /* NULL: "optimizer step" */
    train_classify_fn *classify;
    train_parameters_fn *parameters;
    train_report_fn *report_lines;    /* NULL: none */
    train_report_fn *summary_keys;    /* NULL: none. On rank 0, more
                                         " key=value" pairs at the end of
                                         its summary line */
    size_t parameter_count;
    const char *timed_work;           /* what compute and synchronise are
                                         called in the closing line:
                                         "forward, backward and averaging" */
} train_steps;

/* The run. */
typedef struct {
    size_t steps;                     /* at least 1 */
    size_t local_batch;               /* samples per rank per step, >= 1 */
    const dataset *train, *held;      /* every rank's whole copy */
    int rank, ranks;                  /* in MPI_COMM_WORLD */
    FILE *report;                     /* this rank's OUT/rank-R.txt, opened
                                         before any work, or NULL: no
                                         report. Closed here. */
    const char *out;                  /* OUT, for the .bin files */
} train_setup;

/* Runs the whole loop; every rank calls it. Returns 0, or, on this rank
 * alone, the status the job must end with, and one line in `error`
 * ("rank 1: my_shard gave sample 300 of 300 (TODO 1)"): 1 when the shard
 * function gave a wrong index or the report could not be written, 2 when
 * there is no memory for the loop's buffers. The other ranks may be
 * waiting for this one: the driver ends the job,
 *     MPI_Abort(MPI_COMM_WORLD, status). */
int train_run(const train_setup *setup, const train_steps *steps,
              char *error, size_t error_len);

/* Before the driver runs any of the student's code, every rank:
 * mpi_enter_boundary_or_exit (check_mpi.h) with the loop's own vectors
 * writable (params, and on rank 0 losses) and, when not NULL, the
 * driver's own, a list ended by NULL (lessons 06 and 07: "master"; at
 * most TRAIN_OWN_VECTORS). */
enum { TRAIN_OWN_VECTORS = 4 };
void train_enter_boundary_or_exit(const char *program, FILE *report,
                                  const char *out, int rank,
                                  const char *const *own_vectors);

/* train_run, and on a failure the driver's end of the job: this rank
 * prints "PROGRAM: ERROR" and ends every rank with MPI_Abort(status). */
void train_run_or_exit(const char *program, const train_setup *setup,
                       const train_steps *steps);

/* The shard of lessons 06 and 07 (a train_shard_fn): rank r's k-th
 * sample at step s is ((s*B + k)*P + r) mod N, so the P ranks' batches of
 * a step interleave over one run of P*B consecutive samples, the same run
 * one rank with P times the batch takes. (Lesson 05's my_shard, the
 * student's TODO 1 there, gives each rank a contiguous run instead: a
 * later lesson's given code does not hand out an earlier lesson's
 * answer.) */
void train_shard_interleaved(long step, size_t local_batch, int ranks,
                             int rank, size_t dataset_size, size_t *indices);

/* The command-line options (cli.h) of a run that lessons 06 and 07 share,
 * for a struct `config` with these fields: size_t steps, local_batch,
 * samples, held_out; double learning_rate; int hidden, width; uint64_t
 * seed; const char *out. One place for their names, ranges and help. */
#define TRAIN_RUN_OPTIONS(config)                                            \
    { "steps", CLI_SIZE, &(config).steps, "training steps", 1, 1e7 },        \
    { "local-batch", CLI_SIZE, &(config).local_batch,                        \
      "samples a step for each copy of the model (each rank's copy with "    \
      "data parallelism)", 1, 1 << 16 },                                     \
    { "lr", CLI_DOUBLE, &(config).learning_rate, "AdamW's learning rate",    \
      1e-9, 10 },                                                            \
    { "weight-decay", CLI_DOUBLE, &(config).weight_decay, "AdamW's "         \
      "decoupled weight decay (0: none)", 0, 1 },                            \
    { "hidden", CLI_INT, &(config).hidden, "hidden layers", 0, 64 },         \
    { "width", CLI_INT, &(config).width, "units per hidden layer", 1,        \
      1 << 14 },                                                             \
    { "samples", CLI_SIZE, &(config).samples, "generated training samples",  \
      1, 1 << 24 },                                                          \
    { "held-out", CLI_SIZE, &(config).held_out, "generated samples after "   \
      "them, for the accuracy", 1, 1 << 24 },                                \
    { "seed", CLI_SEED, &(config).seed, "seed of the model and the data", 0, \
      0 },                                                                   \
    { "out", CLI_STRING, &(config).out, "folder for the report to the "      \
      "tests", 0, 0 }

/* The generated task (dataset.h) of lessons 06 and 07: `samples` training
 * samples and `held_out` more after them, the same on every rank. They
 * stay in the host's memory, outside the memory ledger, whose cap plays a
 * device's memory: made a few samples at a time (dataset_synthetic_range
 * gives the same numbers as one call) into plain blocks that `train`
 * owns (free them with train_data_free) and `held` shares. If they cannot
 * be made on some rank, every rank exits with status 2 after "PROGRAM:
 * why" (mpi_exit_if_any). */
void train_generate_or_exit(const char *program, size_t samples,
                            size_t held_out, int features, int classes,
                            uint64_t seed, dataset *train, dataset *held);
void train_data_free(dataset *train);

#endif
