/* The judges' own simulation of data-parallel mixed-precision training
 * (lessons 06 and 07): what P ranks compute, rank after rank in the
 * judge's process, from the given library alone. Lesson 06 checks every
 * ZeRO stage against it, lesson 07 ZeRO-Offload, with and without the
 * delayed parameter update. */
#ifndef ZZ_TRAINING_REFERENCE_H
#define ZZ_TRAINING_REFERENCE_H

#include <stddef.h>

#include "bf16.h"
#include "harness.h"
#include "mlp.h"
#include "pipeline_clock.h"

/* A run of the drivers: hidden layers of `width` units on the generated
 * task of 64 features and 10 classes (seed 1), `steps` steps of `batch`
 * samples a rank from `samples` training samples, `held_out` after them,
 * AdamW with this learning rate and decoupled weight decay (betas 0.9,
 * 0.999, epsilon 1e-8). The tests' runs all decay the weights, as a user's
 * would: an update that handles the decay wrongly (adds it to the
 * gradient, or leaves it out) trains another model. */
typedef struct {
    int hidden, width;
    int steps, batch, samples, held_out;
    double learning_rate, weight_decay;
} run_shape;

mlp_config shape_of(const run_shape *shape);

enum { TRAINING_REFERENCE_MAX_STEPS = 64, TRAINING_REFERENCE_MAX_LAYERS = 80 };

typedef struct {
    size_t total;
    bf16 *params;        /* (total): the final bf16 parameters */
    float *master;       /* (total): the final fp32 master weights */
    float *initial;      /* (total): mlp_init's values */
    double losses[TRAINING_REFERENCE_MAX_STEPS]; /* mean over the ranks */
    int layer_count;
    size_t layer_begin[TRAINING_REFERENCE_MAX_LAYERS];
} training_reference;

/* What plain data parallelism on `ranks` ranks computes: each rank's
 * forward and backward on its shard with the bf16 layer steps (its
 * gradient rounded to bf16), the P gradients added in rank order in fp32
 * and the sum rounded once (collective_reduce_scatter_bf16), and the
 * mixed-precision AdamW on every element with the scale 1/P. The drivers'
 * shard (train_shard_interleaved): rank r's k-th sample at step s is
 * (s*B + k)*P + r, wrapping around the data set.
 * From step `delay_from` on (-1: never), the delayed parameter update:
 * step s's update is computed as before, but its parameters reach the
 * model only when step s+1's update begins (or after the last step), so
 * step s+1's gradients are taken on the parameters of update s-1.
 * Fails the calling test on any error. */
training_reference training_reference_run(int ranks, int batch,
                                          const run_shape *shape,
                                          long delay_from);
void training_reference_free(training_reference *ref);

/* Runs PROGRAM of LESSON under mpirun on `ranks` ranks with the shape's
 * flags (--steps, --local-batch, --hidden, --width, --samples, --held-out,
 * --lr), then `extra` (NULL-terminated, may be NULL), then --out OUT when
 * `out` is not NULL. */
run_result training_run(const char *lesson, const char *program, int ranks,
                        const run_shape *shape, const char *const *extra,
                        const char *out, double timeout_s);

/* Nothing kept from one step to the next, measured outside the ranks:
 * runs PROGRAM on `ranks` ranks with the shape's flags and `extra` for 20
 * steps and for 300, and fails the test, naming `what`, the rank and
 * `hint`, when a rank's anonymous memory at the "done" mark (the kernel's
 * count, harness_watch_anon_at_done) is more than 64 KiB larger after the
 * longer run. A step that keeps something it allocates holds 280 times
 * that much more; correct programs of lessons 08 and 09 differed by at
 * most 12 KiB, either way (Open MPI's own lists and the allocator's
 * pages; the heap's free pages are given back before the mark), so a
 * leak of 240 bytes a step (65 KiB) is caught. Does nothing where runs
 * are not measured outside, under the sanitizers, which hold freed memory
 * back, and with MPICH, whose runs differ by more (72-88 KiB). */
void training_expect_nothing_kept(const char *lesson, const char *program,
                                  int ranks, const run_shape *shape,
                                  const char *const *extra, const char *what,
                                  const char *hint);

/* Rank 0's held-out accuracy (its report's accuracy_ppm) after PROGRAM
 * of LESSON ran `steps` steps of its default task on `ranks` ranks; the
 * test fails, naming `what`, if the run does. */
double training_accuracy_after(const char *lesson, const char *program,
                               int ranks, int steps, const char *what);

/* Lesson 09's schedules, from their definitions: rank r's forwards and
 * backwards of one step on p ranks, m micro-batches, v chunks, into ops
 * (2 v m of them), returned. GPipe: every forward, then every backward,
 * in micro-batch order. 1F1B: min(p - r - 1, m) forwards, then a forward
 * and a backward in turn, then the backwards left. Interleaved
 * (Narayanan et al., 2021; m a multiple of p): the v m forwards in groups
 * of p micro-batches on one chunk, the chunks in turn, the backwards the
 * same with the chunks from the last; a warm-up of 2 (p - r - 1) + (v -
 * 1) p forwards (all of them when m = p), then one of each in turn. */
typedef enum { TRAINING_GPIPE, TRAINING_1F1B, TRAINING_INTERLEAVED }
    training_schedule;
size_t training_pipeline_order(training_schedule kind, int p, int m, int v,
                               int r, pipeline_op *ops);

/* Rank r's block of the balanced partition of `total` over `ranks`, from
 * its definition (the first total % P blocks one longer), not from
 * partition.h. */
void training_block_of(size_t total, int ranks, int r, size_t *begin,
                       size_t *end);

/* The layer of `ref`'s model that element i belongs to. */
int training_layer_of(const training_reference *ref, size_t i);

#endif
