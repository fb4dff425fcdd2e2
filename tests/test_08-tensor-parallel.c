/* Lesson 08's tests: the column part (TODO 1) in the lesson's producer
 * (tests/producer/08-tensor-parallel.c), never in this program; and
 * training under mpirun on groups of 1 to 4 ranks, against what this
 * program computes itself:
 *   - the weights: every rank's final parameters are bitwise those of
 *     this program's simulation of the group, rank by rank, with the
 *     given library's layer steps and the lesson's prescribed sums (rank
 *     order, the row layer's bias after the sum); the replicated ones are
 *     bitwise equal on every rank;
 *   - the answer: the first step's loss is the serial model's within the
 *     rounding bound derived below;
 *   - the costs: the collectives given code recorded (one allreduce of
 *     batch x width per row layer forward, one per column layer but the
 *     first backward, nothing else), the bytes each phase sent (the
 *     communication ledger), and the memory ledger's peak per rank and
 *     category against the formulas with the partition's rounding, with
 *     nothing allocated behind the ledger's back (the allocator's count;
 *     on a larger model, the kernel's, from outside the rank). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "activation.h"
#include "collectives.h"
#include "cross_entropy.h"
#include "dataset.h"
#include "harness.h"
#include "layer_split.h"
#include "mlp.h"
#include "optimizer.h"
#include "training_reference.h"

#define LESSON "08-tensor-parallel"

/* ---- TODO 1's partition, in the producer ---- */

static const struct {
    int out, ranks;
    const char *why;
} parts[] = {
    { 12, 4, "12 rows on 4 ranks" },
    { 10, 4, "10 rows on 4 ranks (remainder 2)" },
    { 37, 3, "37 rows on 3 ranks (remainder 1)" },
    { 3, 4, "3 rows on 4 ranks (one rank holds none)" },
    { 9, 1, "one rank holds every row" },
};

START_TEST(column_part_case)
{
    const int ranks = parts[_i].ranks, out = parts[_i].out;
    int64_t got[2 * 8];
    char dir[HARNESS_PATH], args[64];
    snprintf(args, sizeof args, "%d %d", out, ranks);
    harness_out_dir(dir);
    run_result r = harness_produce(LESSON, "column_part", dir, args, NULL, 8);
    harness_expect_success(&r, "tp_column_part");
    run_result_free(&r);
    harness_read_output(dir, "parts", got, sizeof *got, 2 * (size_t)ranks);
    harness_remove_out_dir(dir);
    for (int rank = 0; rank < ranks; rank++) {
        size_t begin, end;
        training_block_of((size_t)out, ranks, rank, &begin, &end);
        const int64_t first = got[2 * rank], count = got[2 * rank + 1];
        ck_assert_msg(count == (int64_t)(end - begin) &&
                      (count == 0 || first == (int64_t)begin),
                      "tp_column_part(%d, %d, %d) (%s) gave %lld rows from "
                      "row %lld; rank %d's block of the balanced partition "
                      "is rows [%zu, %zu)%s. Hint: TODO 1: the first %d %% "
                      "%d ranks hold one row more",
                      out, ranks, rank, parts[_i].why, (long long)count,
                      (long long)first, rank, begin, end,
                      begin == end ? " (none)" : "", out, ranks);
    }
}
END_TEST

/* ---- The tests' own simulation of a tensor-parallel group ---- */

enum { MOST_LAYERS = MLP_MAX_LAYERS, MOST_T = 4, FEATURES = 64,
       CLASSES = 10 };
/* How a run is made: plain tensor parallelism, with sequence parallelism
 * (TODO 5), with the parallel loss (TODO 6), or both. */
enum { PLAIN = 0, SEQUENCE = 1, PARALLEL_LOSS = 2, FEW_CLASSES = 4 };
/* FEW_CLASSES: 3 classes (--classes 3), fewer than 4 ranks: with the
 * parallel loss, the last rank holds no class. */
enum { FEW = 3 };

/* The seed of the model and the data (--seed). With 3 classes, seed 8:
 * at seed 1 some class's logit is above 0 for every sample the runs see,
 * so a largest logit started at 0 in place of -infinity (the softmax is
 * the same in exact arithmetic, not in float, and underflows to a sum of
 * 0 when every logit is far below 0) would give the same bits; at seed 8,
 * 3 of the first step's 4 samples have every logit below 0 (the judge
 * counts them and stops if a change of the model's start makes it none). */
static uint64_t seed_of(int mode)
{
    return mode & FEW_CLASSES ? 8 : 1;
}

static int classes_of(int mode)
{
    return mode & FEW_CLASSES ? FEW : CLASSES;
}
typedef enum { COLUMN, ROW, WHOLE } split_kind;

/* The model's layers, split as the lesson says: pairs (column, row) from
 * layer 0, a last layer left over whole; each rank's part by the
 * balanced partition (training_block_of, from its definition). */
typedef struct {
    int layer_count, t, mode;
    int in[MOST_LAYERS], out[MOST_LAYERS];
    split_kind split[MOST_LAYERS];
    size_t first[MOST_LAYERS][MOST_T], count[MOST_LAYERS][MOST_T];
    size_t held[MOST_LAYERS][MOST_T];
} tp_layout;

static tp_layout layout_of(const run_shape *shape, int t, int mode)
{
    tp_layout g = { shape->hidden + 1, t, mode, { 0 }, { 0 }, { 0 }, { { 0 } },
                    { { 0 } }, { { 0 } } };
    for (int l = 0; l < g.layer_count; l++) {
        const bool last = l == g.layer_count - 1;
        g.in[l] = l == 0 ? FEATURES : shape->width;
        g.out[l] = last ? classes_of(mode) : shape->width;
        g.split[l] = l % 2 == 1                ? ROW
                     : l + 1 < g.layer_count ||
                             (mode & PARALLEL_LOSS) ? COLUMN
                                                    : WHOLE;
        for (int r = 0; r < t; r++) {
            size_t begin = 0, end = (size_t)g.out[l];
            if (g.split[l] == COLUMN)
                training_block_of((size_t)g.out[l], t, r, &begin, &end);
            else if (g.split[l] == ROW) {
                begin = g.first[l - 1][r];
                end = begin + g.count[l - 1][r];
            }
            g.first[l][r] = begin;
            g.count[l][r] = end - begin;
            const size_t in = (size_t)g.in[l], out = (size_t)g.out[l];
            g.held[l][r] = g.split[l] == COLUMN ? (end - begin) * (in + 1)
                           : g.split[l] == ROW  ? out * (end - begin) + out
                                                : out * (in + 1);
        }
    }
    return g;
}

typedef struct {
    tp_layout g;
    float *params[MOST_LAYERS][MOST_T], *m[MOST_LAYERS][MOST_T],
        *v[MOST_LAYERS][MOST_T];
    double losses[TRAINING_REFERENCE_MAX_STEPS]; /* each step's, the mean
                                                    over the replicas */
    float *grads0[MOST_LAYERS][MOST_T];  /* after the first step's backward
                                            and the replicas' averaging */
    size_t held_out_right;    /* with the parallel loss: the held-out
                                 samples whose label's logit is the
                                 largest, after the last step */
    uint64_t replicated[TRAINING_REFERENCE_MAX_STEPS][MOST_T];
                              /* after each step, the hash of what rank r
                                 holds whole (replicated_hash) */
    float *dlogits0[MOST_T];  /* the parallel loss's gradient at each
                                 rank's logits, the first step's, replica
                                 0's */
} tp_reference;

static float *zeros(size_t count)
{
    float *p = calloc(count ? count : 1, sizeof *p);
    ck_assert(p != NULL);
    return p;
}

/* FNV-1a 64 over the bits (4 bytes each, the lowest first) of what rank
 * r holds whole, layer by layer: a row layer's bias (after its out x
 * count columns of W), a whole layer's W and b; train_tp writes the same
 * hash after each step. */
static uint64_t replicated_hash(const tp_layout *g,
                                float *const params[MOST_LAYERS][MOST_T],
                                int r)
{
    uint64_t hash = 0xcbf29ce484222325u;
    for (int l = 0; l < g->layer_count; l++) {
        const size_t out = (size_t)g->out[l];
        const size_t skip = g->split[l] == ROW ? out * g->count[l][r] : 0;
        const size_t count = g->split[l] == ROW     ? out
                             : g->split[l] == WHOLE ? g->held[l][r]
                                                    : 0;
        for (size_t i = 0; i < count; i++) {
            uint32_t bits;
            memcpy(&bits, &params[l][r][skip + i], sizeof bits);
            for (int k = 0; k < 4; k++)
                hash = (hash ^ ((bits >> (8 * k)) & 0xffu)) *
                       0x100000001b3u;
        }
    }
    return hash;
}

/* mlp_init(seed_of(mode))'s model, whole, and each rank's part of it. */
static void reference_init(tp_reference *ref, const run_shape *shape)
{
    const tp_layout *g = &ref->g;
    mlp model;
    char error[256];
    mlp_config config = shape_of(shape);
    config.classes = g->out[g->layer_count - 1];
    ck_assert_msg(mlp_create(&model, &config, 1, error, sizeof error) == 0,
                  "%s", error);
    mlp_init(&model, seed_of(g->mode));
    for (int l = 0; l < g->layer_count; l++) {
        const float *w = model.params + model.layers[l].weights;
        const float *b = model.params + model.layers[l].biases;
        const size_t in = (size_t)g->in[l], out = (size_t)g->out[l];
        for (int r = 0; r < g->t; r++) {
            const size_t first = g->first[l][r], count = g->count[l][r];
            float *p = ref->params[l][r] = zeros(g->held[l][r]);
            ref->m[l][r] = zeros(g->held[l][r]);
            ref->v[l][r] = zeros(g->held[l][r]);
            if (g->split[l] == ROW) {
                for (size_t row = 0; row < out; row++)
                    memcpy(p + row * count, w + row * in + first,
                           count * sizeof *p);
                memcpy(p + out * count, b, out * sizeof *p);
            } else {
                memcpy(p, w + first * in, count * in * sizeof *p);
                memcpy(p + count * in, b + first, count * sizeof *p);
            }
        }
    }
    mlp_free(&model);
}

/* The buffers of one group's step on `batch` samples. */
typedef struct {
    float *pre[MOST_LAYERS][MOST_T], *post[MOST_LAYERS][MOST_T];
    float *grads[MOST_LAYERS][MOST_T];
    float *whole_gradient, *next_gradient, *partial;
    float *part_gradient[MOST_T];
    size_t below_zero;    /* samples whose largest logit is below 0 */
    float *logit_gradient[MOST_T];  /* not NULL: where the parallel loss's
                                       gradient at the logits is copied */
} group_buffers;

/* The parallel cross-entropy (TODO 6) on the last layer's logits split
 * by class, rank r's (batch, count) in pre[last][r]: each sample's
 * largest logit over every rank's (exact, in any order), the sums of
 * expf(logit - largest) in float, each rank's in increasing class, then
 * over the ranks in rank order, and the label's logit; the loss summed in
 * double, log(sum) + largest - label's; the gradient at each rank's
 * logits, (expf(logit - largest) / sum - onehot) / batch, into
 * part_gradient[r]. Returns the loss summed over the samples. */
static double parallel_loss(const tp_layout *g, group_buffers *s,
                            const int *labels, size_t batch)
{
    const int last = g->layer_count - 1;
    double total = 0;
    for (size_t b = 0; b < batch; b++) {
        float largest = -INFINITY, sum = 0, label_logit = 0;
        for (int r = 0; r < g->t; r++)
            for (size_t c = 0; c < g->count[last][r]; c++) {
                float z = s->pre[last][r][b * g->count[last][r] + c];
                if (z > largest)
                    largest = z;
            }
        for (int r = 0; r < g->t; r++) {
            const size_t n = g->count[last][r];
            const float *z = s->pre[last][r] + b * n;
            float part = 0, label = 0;
            for (size_t c = 0; c < n; c++) {
                part += expf(z[c] - largest);
                if (g->first[last][r] + c == (size_t)labels[b])
                    label = z[c];
            }
            sum = r == 0 ? part : sum + part;
            label_logit = r == 0 ? label : label_logit + label;
        }
        s->below_zero += largest < 0;
        total += log((double)sum) + largest - label_logit;
        for (int r = 0; r < g->t; r++) {
            const size_t n = g->count[last][r];
            for (size_t c = 0; c < n; c++) {
                const float z = s->pre[last][r][b * n + c];
                const float p = expf(z - largest) / sum;
                const float onehot =
                    g->first[last][r] + c == (size_t)labels[b] ? 1.0f : 0.0f;
                s->part_gradient[r][b * n + c] = (p - onehot) /
                                                 (float)batch;
            }
        }
    }
    return total;
}

/* Forward, loss and backward of the group on (inputs, labels): every
 * rank's grads. A whole layer's outputs (a row layer's, the last) are
 * the same on every rank: kept once, in [l][0]. The sums over the ranks
 * in rank order, ((v_0 + v_1) + v_2) + v_3, as tp_allreduce adds them. */
static double group_step(const tp_reference *ref, group_buffers *s,
                         const float *inputs, const int *labels,
                         size_t batch)
{
    const tp_layout *g = &ref->g;
    const int t = g->t, last = g->layer_count - 1;
    for (int l = 0; l < g->layer_count; l++) {
        const size_t in = (size_t)g->in[l], out = (size_t)g->out[l];
        const float *whole_input = l == 0 ? inputs : s->post[l - 1][0];
        if (g->split[l] == COLUMN) {
            for (int r = 0; r < t; r++) {
                const size_t n = g->count[l][r];
                const float *p = ref->params[l][r];
                layer_columns_forward(batch, in, n, whole_input, p,
                                      p + n * in, s->pre[l][r]);
                if (l != last)
                    activation_forward(ACTIVATION_RELU, s->pre[l][r],
                                       s->post[l][r], batch * n);
            }
        } else if (g->split[l] == ROW) {
            float *sum = s->pre[l][0];
            for (int r = 0; r < t; r++) {
                const size_t k = g->count[l][r];
                layer_rows_forward(batch, k, out, s->post[l - 1][r],
                                   ref->params[l][r], s->partial);
                for (size_t i = 0; i < batch * out; i++)
                    sum[i] = r == 0 ? s->partial[i] : sum[i] + s->partial[i];
            }
            const float *bias = ref->params[l][0] + out * g->count[l][0];
            for (size_t b = 0; b < batch; b++)
                for (size_t j = 0; j < out; j++)
                    sum[b * out + j] += bias[j];
            if (l != last)
                activation_forward(ACTIVATION_RELU, sum, s->post[l][0],
                                   batch * out);
        } else {
            const float *p = ref->params[l][0];
            layer_columns_forward(batch, in, out, whole_input, p,
                                  p + out * in, s->pre[l][0]);
        }
    }
    const int classes = g->out[last];
    double sum = 0;
    if (g->split[last] == COLUMN) {
        sum = parallel_loss(g, s, labels, batch);
        for (int r = 0; r < t && s->logit_gradient[r] != NULL; r++)
            memcpy(s->logit_gradient[r], s->part_gradient[r],
                   batch * g->count[last][r] * sizeof(float));
    } else {
        sum = cross_entropy_sum(s->pre[last][0], s->post[last][0], labels,
                                batch, classes, NULL);
        cross_entropy_gradient(s->post[last][0], labels, batch, classes,
                               s->whole_gradient);
    }
    for (int l = last; l >= 0; l--) {
        const size_t in = (size_t)g->in[l], out = (size_t)g->out[l];
        const float *whole_input = l == 0 ? inputs : s->post[l - 1][0];
        if (g->split[l] == WHOLE) {
            for (int r = 0; r < t; r++)
                layer_columns_backward(batch, in, out, whole_input,
                                       ref->params[l][r], s->whole_gradient,
                                       s->grads[l][r],
                                       s->grads[l][r] + out * in,
                                       r == 0 && l > 0 ? s->next_gradient
                                                       : NULL);
        } else if (g->split[l] == ROW) {
            if (l != last)
                activation_backward(ACTIVATION_RELU, s->pre[l][0],
                                    s->whole_gradient, batch * out);
            for (int r = 0; r < t; r++) {
                const size_t k = g->count[l][r];
                layer_rows_backward(batch, k, out, s->post[l - 1][r],
                                    ref->params[l][r], s->whole_gradient,
                                    s->grads[l][r], s->part_gradient[r]);
                layer_bias_backward(batch, out, s->whole_gradient,
                                    s->grads[l][r] + out * k);
            }
            continue;   /* the column layer below reads part_gradient */
        } else {
            for (int r = 0; r < t; r++) {
                const size_t n = g->count[l][r];
                if (l != last)
                    activation_backward(ACTIVATION_RELU, s->pre[l][r],
                                        s->part_gradient[r], batch * n);
                layer_columns_backward(batch, in, n, whole_input,
                                       ref->params[l][r],
                                       s->part_gradient[r], s->grads[l][r],
                                       s->grads[l][r] + n * in,
                                       l > 0 ? s->partial : NULL);
                for (size_t i = 0; l > 0 && i < batch * in; i++)
                    s->next_gradient[i] = r == 0 ? s->partial[i]
                                                 : s->next_gradient[i] +
                                                       s->partial[i];
            }
        }
        float *swap = s->whole_gradient;
        s->whole_gradient = s->next_gradient;
        s->next_gradient = swap;
    }
    return sum;
}

/* What `dp` replicas of a group of t ranks compute over the run's steps:
 * each replica's step on its shard (train_shard_interleaved over the
 * replicas, written out), the gradients summed in replica order and
 * divided by dp (the driver's averaging), AdamW on each rank's part. */
static tp_reference reference_run(const run_shape *shape, int t, int dp,
                                  int mode)
{
    tp_reference ref = { layout_of(shape, t, mode), { { NULL } }, { { NULL } },
                         { { NULL } }, { 0 }, { { NULL } }, 0, { { 0 } },
                         { NULL } };
    const tp_layout *g = &ref.g;
    reference_init(&ref, shape);
    dataset data;
    char error[256];
    ck_assert_msg(dataset_synthetic(&data, (size_t)shape->samples, FEATURES,
                                    classes_of(mode), seed_of(mode), error,
                                    sizeof error) == 0,
                  "%s", error);
    const size_t batch = (size_t)shape->batch;
    size_t widest = FEATURES;
    if ((size_t)shape->width > widest)
        widest = (size_t)shape->width;
    group_buffers s = { { { NULL } }, { { NULL } }, { { NULL } },
                        zeros(batch * widest), zeros(batch * widest),
                        zeros(batch * widest), { NULL }, 0,
                        { NULL } };
    float *sums[MOST_LAYERS][MOST_T];
    for (int r = 0; r < t; r++)
        s.part_gradient[r] = zeros(batch * widest);
    for (int l = 0; l < g->layer_count; l++)
        for (int r = 0; r < t; r++) {
            const size_t outputs = g->split[l] == COLUMN ? g->count[l][r]
                                                         : (size_t)g->out[l];
            s.pre[l][r] = zeros(batch * outputs);
            s.post[l][r] = zeros(batch * outputs);
            s.grads[l][r] = zeros(g->held[l][r]);
            sums[l][r] = zeros(g->held[l][r]);
        }
    float *inputs = zeros(batch * FEATURES);
    int *labels = calloc(batch, sizeof *labels);
    ck_assert(labels != NULL);
    const adamw_config adamw = { (float)shape->learning_rate, 0.9f, 0.999f,
                                 1e-8f, (float)shape->weight_decay };
    ck_assert(shape->steps <= TRAINING_REFERENCE_MAX_STEPS);
    for (int step = 0; step < shape->steps; step++) {
        for (int d = 0; d < dp; d++) {
            for (size_t k = 0; k < batch; k++) {
                size_t sample = (((size_t)step * batch + k) * (size_t)dp +
                                 (size_t)d) % data.count;
                memcpy(&inputs[k * FEATURES],
                       &data.inputs[sample * FEATURES],
                       FEATURES * sizeof *inputs);
                labels[k] = data.labels[sample];
            }
            const bool keep = step == 0 && d == 0 && (mode & PARALLEL_LOSS);
            for (int r = 0; keep && r < t; r++)
                s.logit_gradient[r] = ref.dlogits0[r] =
                    zeros(batch * g->count[g->layer_count - 1][r]);
            double loss = group_step(&ref, &s, inputs, labels, batch);
            for (int r = 0; r < t; r++)
                s.logit_gradient[r] = NULL;
            /* The driver's loss: the mean of the batch, as a float. */
            ref.losses[step] += (float)(loss / (double)batch) / (double)dp;
            for (int l = 0; l < g->layer_count; l++)
                for (int r = 0; r < t; r++)
                    for (size_t i = 0; i < g->held[l][r]; i++)
                        sums[l][r][i] = d == 0 ? s.grads[l][r][i]
                                               : sums[l][r][i] +
                                                     s.grads[l][r][i];
        }
        for (int l = 0; l < g->layer_count; l++)
            for (int r = 0; r < t; r++) {
                if (dp > 1)
                    for (size_t i = 0; i < g->held[l][r]; i++)
                        sums[l][r][i] /= (float)dp;
                if (step == 0) {
                    ck_assert_msg(!(mode & FEW_CLASSES) || s.below_zero > 0,
                                  "the test's data no longer has a sample "
                                  "whose every logit is below 0 (see "
                                  "seed_of): pick another seed");
                    ref.grads0[l][r] = zeros(g->held[l][r]);
                    memcpy(ref.grads0[l][r], sums[l][r],
                           g->held[l][r] * sizeof(float));
                }
                adamw_step(&adamw, step + 1, ref.params[l][r], sums[l][r],
                           ref.m[l][r], ref.v[l][r], g->held[l][r]);
            }
        for (int r = 0; r < t; r++)
            ref.replicated[step][r] = replicated_hash(g, ref.params, r);
    }
    if (mode & PARALLEL_LOSS) {
        /* The held-out samples after the training ones, through the
         * trained group in batches of `batch`: right when the label's
         * logit is the largest of every rank's. */
        dataset held;
        ck_assert_msg(dataset_synthetic_range(&held, (size_t)shape->samples,
                                              (size_t)shape->held_out,
                                              FEATURES, classes_of(mode),
                                              seed_of(mode), error,
                                              sizeof error) == 0,
                      "%s", error);
        const int last = g->layer_count - 1;
        for (size_t first = 0; first < held.count; first += batch) {
            const size_t n = held.count - first < batch ? held.count - first
                                                        : batch;
            group_step(&ref, &s, held.inputs + first * FEATURES,
                       held.labels + first, n);
            for (size_t b = 0; b < n; b++) {
                float largest = -INFINITY, label = 0;
                for (int r = 0; r < t; r++)
                    for (size_t c = 0; c < g->count[last][r]; c++) {
                        const float z = s.pre[last][r][b * g->count[last][r]
                                                       + c];
                        if (z > largest)
                            largest = z;
                        if (g->first[last][r] + c ==
                            (size_t)held.labels[first + b])
                            label = z;
                    }
                ref.held_out_right += label == largest;
            }
        }
        dataset_free(&held);
    }
    for (int l = 0; l < g->layer_count; l++)
        for (int r = 0; r < t; r++) {
            free(s.pre[l][r]), free(s.post[l][r]), free(s.grads[l][r]);
            free(sums[l][r]);
        }
    for (int r = 0; r < t; r++)
        free(s.part_gradient[r]);
    free(s.whole_gradient), free(s.next_gradient), free(s.partial);
    free(inputs), free(labels);
    dataset_free(&data);
    return ref;
}

static void reference_free(tp_reference *ref)
{
    for (int l = 0; l < ref->g.layer_count; l++)
        for (int r = 0; r < ref->g.t; r++)
            free(ref->params[l][r]), free(ref->m[l][r]), free(ref->v[l][r]),
                free(ref->grads0[l][r]);
    for (int r = 0; r < ref->g.t; r++)
        free(ref->dlogits0[r]);
}

/* ---- The first step's loss against the serial model ---- */

/* The serial model (common/mlp.h, one rank, fp32) and a group add the
 * same terms of each row layer's outputs in other orders: the serial
 * b + x_0 w_0 + x_1 w_1 + ..., the group each rank's columns first, then
 * the ranks' sums in rank order, then b. Any order of summing n terms is
 * within gamma_n = n u / (1 - n u) (u = 2^-24) of the exact sum times the
 * sum of the terms' magnitudes (Higham, Accuracy and Stability of
 * Numerical Algorithms, 2002, section 4.2), so two orders are within
 * twice that of each other. A layer's input that already differs by e
 * adds |W| e (ReLU moves nothing further apart). So, layer by layer, a
 * bound on |group - serial| of every output:
 *     e_out = |W| e_in + 2 gamma_{in+1} (|W| (|x| + e_in) + |b|),
 * and the cross-entropy, whose gradient in the logits has at most 2 in
 * absolute sum, moves by at most 2 max_j e_logit_j a sample; the mean of
 * the samples, rounded to float, and the mean over the ranks' equal
 * losses (train.h), by a few units in the last place more (8 allowed). */
static double serial_first_loss(const run_shape *shape, int mode,
                                double *bound)
{
    mlp_config config = shape_of(shape);
    config.classes = classes_of(mode);
    mlp model;
    char error[256];
    const size_t batch = (size_t)shape->batch;
    ck_assert_msg(mlp_create(&model, &config, batch, error, sizeof error) ==
                  0, "%s", error);
    mlp_init(&model, seed_of(mode));
    dataset data;
    ck_assert_msg(dataset_synthetic(&data, (size_t)shape->samples, FEATURES,
                                    (size_t)config.classes, seed_of(mode),
                                    error,
                                    sizeof error) == 0,
                  "%s", error);
    /* Step 0's samples of replica 0 of 1: the first `batch`. */
    double loss = mlp_step(&model, data.inputs, data.labels, batch, 0, NULL);
    ck_assert_msg(!isnan(loss), "%s", model.error);
    const double u = ldexp(1.0, -24);
    size_t widest = FEATURES > (size_t)shape->width ? FEATURES
                                                    : (size_t)shape->width;
    double *x = calloc(batch * widest, sizeof *x);
    double *e = calloc(batch * widest, sizeof *e);
    double *y = calloc(batch * widest, sizeof *y);
    double *f = calloc(batch * widest, sizeof *f);
    ck_assert(x && e && y && f);
    for (size_t i = 0; i < batch * FEATURES; i++)
        x[i] = data.inputs[i];
    for (int l = 0; l < model.layer_count; l++) {
        const size_t in = (size_t)model.layers[l].in;
        const size_t out = (size_t)model.layers[l].out;
        const float *w = model.params + model.layers[l].weights;
        const float *b = model.params + model.layers[l].biases;
        const double gamma = (double)(in + 1) * u /
                             (1 - (double)(in + 1) * u);
        for (size_t s = 0; s < batch; s++)
            for (size_t j = 0; j < out; j++) {
                double value = b[j], magnitude = fabs(b[j]), moved = 0;
                for (size_t k = 0; k < in; k++) {
                    double wk = w[j * in + k];
                    value += wk * x[s * in + k];
                    magnitude += fabs(wk) * (fabs(x[s * in + k]) +
                                             e[s * in + k]);
                    moved += fabs(wk) * e[s * in + k];
                }
                const bool hidden = l < model.layer_count - 1;
                y[s * out + j] = hidden && value < 0 ? 0 : value;
                f[s * out + j] = moved + 2 * gamma * magnitude;
            }
        double *swap = x;
        x = y, y = swap;
        swap = e, e = f, f = swap;
    }
    double total = 0;
    for (size_t s = 0; s < batch; s++) {
        double largest = 0;
        const size_t classes = (size_t)config.classes;
        for (size_t j = 0; j < classes; j++)
            if (e[s * classes + j] > largest)
                largest = e[s * classes + j];
        total += 2 * largest;
    }
    *bound = total / (double)batch + 8 * u * fabs(loss);
    /* The parallel loss sums the exps in float, where the serial one sums
     * in double: each expf within an ulp (2u) of its value, the float sum
     * of the C terms within gamma_C more; the sum is at least 1 (the
     * largest logit's term), so its log moves by about that relative
     * error, (C + 2) u: twice that allowed. */
    if (mode & PARALLEL_LOSS)
        *bound += 2 * (config.classes + 2) * u;
    free(x), free(e), free(y), free(f);
    dataset_free(&data);
    mlp_free(&model);
    return loss;
}

/* ---- The runs ---- */

/* The tests' model and run: 2 hidden layers of 37 units (not a multiple
 * of 2, 3 or 4), so layers 0 and 1 are a pair and the output layer is
 * left over; 3 steps of 4 samples from 40 (the shards wrap), 8 held out. */
static const run_shape test_run = { 2, 37, 3, 4, 40, 8, 1e-3, 0.1 };
/* 3 hidden layers: two pairs, the second ending in the output layer. */
static const run_shape two_pairs = { 3, 37, 3, 4, 40, 8, 1e-3, 0.1 };
/* Hidden layers of 3 units on 4 ranks: the last rank holds no row. */
static const run_shape narrow_run = { 2, 3, 3, 4, 40, 8, 1e-3, 0.1 };

static run_result run_tp(int ranks, int t, int mode, const run_shape *shape,
                         const char *out, double timeout_s)
{
    char number[16];
    snprintf(number, sizeof number, "%d", t);
    const char *flags[9] = { "--tp", number };
    int n = 2;
    if (mode & SEQUENCE)
        flags[n++] = "--sequence-parallel";
    if (mode & PARALLEL_LOSS)
        flags[n++] = "--parallel-loss";
    if (mode & FEW_CLASSES) {
        flags[n++] = "--classes";
        flags[n++] = "3";
    }
    char seed[24];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)seed_of(mode));
    flags[n++] = "--seed";
    flags[n++] = seed;
    return training_run(LESSON, "train_tp", ranks, shape, flags, out,
                        timeout_s);
}

static const char *const split_names[] = { "split by rows (column)",
                                           "split by columns (row)",
                                           "whole" };

/* Where a wrong gradient of a layer points, when the layers above it
 * are right: its own backward, or the gradient handed down to it; with
 * sequence parallelism, TODO 5's variants of them. */
static const char *layer_hint(split_kind split, int mode)
{
    if (mode & SEQUENCE)
        switch (split) {
        case COLUMN:
            return "TODO 5: a column layer's backward reads its gathered "
                   "input (layer->gathered where it has one), and the "
                   "gradient handed down to it is the row layer above's "
                   "(tp_row_backward_sp: ReLU's backward on this rank's "
                   "rows of dpost, at rows_first, then the allgather, "
                   "then the whole batch's backward)";
        case ROW:
            return "TODO 5: a row layer's backward needs the whole batch's "
                   "gradient: ReLU's backward on this rank's rows (at "
                   "rows_first * out), then tp_allgather, then as without "
                   "sequence parallelism; the gradient a column layer "
                   "above hands down is reduce-scattered, each rank's rows "
                   "at rows_first";
        default:
            return "TODO 5: the whole layer's backward reads its gathered "
                   "input, and its input's gradient is whole already";
        }
    switch (split) {
    case COLUMN:
        return (mode & PARALLEL_LOSS)
                   ? "TODO 1: a column layer's backward (ReLU's backward "
                     "only where the layer is activated: not the output "
                     "layer split by class), or TODO 6: the loss's "
                     "gradient, (p - onehot) / samples on this rank's "
                     "classes, or TODO 2: the gradient a row layer hands "
                     "down"
                   : "TODO 1: a column layer's backward (ReLU's backward on "
                     "its rows, then layer_columns_backward), or TODO 2: "
                     "the gradient the row layer above hands down, at this "
                     "rank's part of its input (layer_rows_backward's; "
                     "whole already, not summed), or TODO 3: the two "
                     "gradient buffers used in turn";
    case ROW:
        return "TODO 2: a row layer's backward: ReLU's backward where "
               "activated, its columns of dW from the whole dpre, its "
               "bias's gradient the column sums of dpre, the same on every "
               "rank, never summed over the ranks; or TODO 1: the "
               "gradient a column layer above hands down is summed over "
               "the ranks (tp_allreduce) first; or TODO 3: each layer's "
               "input is the output of the layer below";
    default:
        return "TODO 3: the layer left over is whole on every rank: "
               "layer_columns_backward with every row, no communication";
    }
}

/* What a wrong first loss points to. */
static const char *forward_hint(int mode)
{
    if (mode & SEQUENCE)
        return "TODO 5: the forward with sequence parallelism: each "
               "gathered input from every rank's rows (this rank's at row "
               "rows_first, rows_first * in floats in), the row layers' "
               "sums reduce-scattered and read from this rank's place "
               "(rows_first * out), the last row layer's logits whole "
               "(tp_row_forward); or the forward of TODO 1-3";
    if (mode & PARALLEL_LOSS)
        return "TODO 6: the loss on logits split by class: the largest "
               "logit over every rank's classes (tp_allreduce_max, from "
               "-INFINITY on a rank with none) before the exps, their sum "
               "and the label's logit summed over the ranks, log(sum) + "
               "largest - the label's logit; or else the forward of TODO "
               "1-3";
    return "the forward pass: TODO 1: a column layer's rows from the whole "
           "input, then ReLU; TODO 2: a row layer's partial sums summed "
           "over the ranks (tp_allreduce), then the bias once, then ReLU; "
           "TODO 3: each layer's input is the output of the one before, "
           "the logits without activation";
}

/* Where element i of layer l's `held` values on rank r sits in the whole
 * layer, as "W[row][column]" or "b[j]", into `where`. */
static bool describe(const tp_layout *g, int l, int r, size_t i,
                     char *where, size_t len)
{
    const size_t in = (size_t)g->in[l], out = (size_t)g->out[l];
    const size_t count = g->count[l][r];
    const size_t weights = g->split[l] == ROW      ? out * count
                           : g->split[l] == COLUMN ? count * in
                                                   : out * in;
    const bool bias = i >= weights;
    const size_t k = bias ? i - weights : i;
    if (bias)
        snprintf(where, len, "b[%zu]",
                 (g->split[l] == COLUMN ? g->first[l][r] : 0) + k);
    else
        snprintf(where, len, "W[%zu][%zu]",
                 (g->split[l] == COLUMN ? g->first[l][r] : 0) +
                     (g->split[l] == ROW ? k / count : k / in),
                 (g->split[l] == ROW ? g->first[l][r] : 0) +
                     (g->split[l] == ROW ? k % count : k % in));
    return bias;
}

/* Compares every rank's `name` file (its held values, layer by layer)
 * with want[l][r], the last layer first; fails at the first difference,
 * with `what_kind` ("gradient after the first step") and `hint` (NULL:
 * the layer's own hint). */
static void expect_held_values(const char *out, const char *name,
                               int ranks, const tp_layout *g,
                               float *const want[MOST_LAYERS][MOST_T],
                               const char *what_kind, const char *hint,
                               const char *what)
{
    /* Every rank's values first, then layer by layer, the last first,
     * each over every rank: the first difference is in the lowest layer
     * above which every rank holds the right values. */
    enum { MOST_RANKS = 2 * MOST_T };
    ck_assert(ranks <= MOST_RANKS);
    double *got[MOST_RANKS];
    size_t at[MOST_RANKS][MOST_LAYERS];
    for (int rank = 0; rank < ranks; rank++) {
        const int r = rank % g->t;
        size_t total = 0;
        for (int l = 0; l < g->layer_count; l++) {
            at[rank][l] = total;
            total += g->held[l][r];
        }
        got[rank] = malloc((total ? total : 1) * sizeof *got[rank]);
        ck_assert(got[rank] != NULL);
        harness_read_doubles(out, name, rank, got[rank], total);
    }
    for (int l = g->layer_count - 1; l >= 0; l--)
        for (int rank = 0; rank < ranks; rank++) {
            const int r = rank % g->t;
            for (size_t i = 0; i < g->held[l][r]; i++) {
                const double value = got[rank][at[rank][l] + i];
                const double w = want[l][r][i];
                if (value == w && signbit(value) == signbit(w))
                    continue;
                char where[160];
                const bool bias = describe(g, l, r, i, where, sizeof where);
                ck_assert_msg(0, "%s: rank %d's layer %d (%s) %s: %s %.9g; "
                              "the lesson's algorithm gives %.9g%s (every "
                              "rank's layers above it hold the right "
                              "values). Hint: %s", what, rank, l,
                              split_names[g->split[l]], where, what_kind,
                              value, w,
                              bias && g->split[l] == ROW
                                  ? " (the replicated bias, the same on "
                                    "every rank: its gradient is too, "
                                    "summed over nothing)"
                                  : "",
                              hint != NULL ? hint
                                           : layer_hint(g->split[l],
                                                        g->mode));
            }
        }
    for (int rank = 0; rank < ranks; rank++)
        free(got[rank]);
}

/* The parallel loss's gradient at each logit of replica 0's ranks after
 * the first step's loss, bitwise: TODO 6's (exp(z - M) / S - onehot) /
 * samples. */
static void expect_logit_gradients(const char *out, const tp_layout *g,
                                   size_t batch,
                                   float *const want[MOST_T],
                                   const char *what)
{
    const int last = g->layer_count - 1;
    for (int r = 0; r < g->t; r++) {
        const size_t n = g->count[last][r];
        if (n == 0)
            continue;
        double *got = malloc(batch * n * sizeof *got);
        ck_assert(got != NULL);
        harness_read_doubles(out, "dlogits0", r, got, batch * n);
        for (size_t i = 0; i < batch * n; i++) {
            const double w = want[r][i];
            if (got[i] == w && signbit(got[i]) == signbit(w))
                continue;
            const double value = got[i];
            free(got);
            ck_assert_msg(0, "%s: rank %d's gradient at the logit of "
                          "sample %zu, class %zu, after the first step's "
                          "loss is %.9g; the lesson's algorithm gives %.9g. "
                          "Hint: TODO 6: the softmax from the largest logit "
                          "over every rank (tp_allreduce_max, each rank's "
                          "from -INFINITY) and the exps' sum over the "
                          "ranks, then (expf(z - largest) / sum - onehot) "
                          "/ samples, into gradient[0]",
                          what, r, i / n, g->first[last][r] + i % n, value,
                          w);
        }
        free(got);
    }
}

/* After every step, what every rank holds whole (a row layer's bias, a
 * whole layer) against the simulation's, by train_tp's hash of its bits:
 * equal on every rank, step after step, without being communicated. */
static void expect_replicated(const char *out, int ranks, const tp_layout *g,
                              const tp_reference *ref, int steps,
                              const char *later, const char *what)
{
    double hashes[MOST_T * 2][2 * TRAINING_REFERENCE_MAX_STEPS];
    ck_assert(ranks <= MOST_T * 2 && steps <= TRAINING_REFERENCE_MAX_STEPS);
    for (int rank = 0; rank < ranks; rank++)
        harness_read_doubles(out, "replicated", rank, hashes[rank],
                             2 * (size_t)steps);
    for (int step = 0; step < steps; step++)
        for (int rank = 0; rank < ranks; rank++) {
            const uint64_t got =
                (uint64_t)hashes[rank][2 * step] << 32 |
                (uint64_t)hashes[rank][2 * step + 1];
            if (got == ref->replicated[step][rank % g->t])
                continue;
            const bool rank0_right =
                ((uint64_t)hashes[0][2 * step] << 32 |
                 (uint64_t)hashes[0][2 * step + 1]) ==
                ref->replicated[step][0];
            ck_assert_msg(0, "%s: after step %d, rank %d's replicated "
                          "parameters (the row layers' biases, a whole "
                          "layer) are not the lesson's algorithm's%s. "
                          "Hint: %s", what, step, rank,
                          rank0_right ? "; rank 0's are" : "",
                          rank0_right
                              ? "they are the same on every rank, and stay "
                                "so without being sent: their gradients "
                                "are the same on every rank (TODO 2: a row "
                                "layer's bias gradient is never summed over "
                                "the ranks), and TODO 4 updates every "
                                "parameter a rank holds the same way"
                              : later);
        }
}

/* In order, each one's check naming the TODO its difference points to:
 *   1. the first step's loss (rank 0's report: train.h's mean over the
 *      ranks of their float losses, summed in MPI's order, so within 8
 *      units in the last place of the simulation's, which adds in
 *      double): a difference is in forward;
 *   1b. with the parallel loss, every rank's gradient at its logits,
 *      bitwise: a difference is TODO 6's;
 *   2. every rank's gradients after the first step's backward, bitwise,
 *      the last layer first (each layer's depend on the layers above
 *      only): the first wrong layer is the backward that made it;
 *   3. what every rank holds whole, after every step (a hash of its
 *      bits): the same on every rank, and the simulation's;
 *   3b. the later steps' losses: with the first step's gradients right, a
 *      difference is in what step 0 could not show (the biases start at
 *      0) or in the update;
 *   4. every rank's final parameters, bitwise, the last layer first. The
 *      replicated parameters (a row layer's bias, a whole layer) are
 *      compared with the same values on every rank. */
static void expect_weights(const char *out, int ranks, int t, int mode,
                           const run_shape *shape, const char *what)
{
    const int dp = ranks / t;
    tp_reference ref = reference_run(shape, t, dp, mode);
    const tp_layout *g = &ref.g;
    double losses[TRAINING_REFERENCE_MAX_STEPS];
    harness_read_doubles(out, "losses", 0, losses, (size_t)shape->steps);
    const double first = ref.losses[0];
    ck_assert_msg(fabs(losses[0] - first) <= 8 * ldexp(fabs(first), -24),
                  "%s: the first step's loss is %.9g; the lesson's algorithm "
                  "gives %.9g. Hint: %s", what, losses[0], first,
                  forward_hint(mode));
    if (mode & PARALLEL_LOSS)
        expect_logit_gradients(out, g, (size_t)shape->batch, ref.dlogits0,
                               what);
    expect_held_values(out, "grads0", ranks, g, ref.grads0,
                       "its gradient after the first step is", NULL, what);
    const char *later =
        mode & PARALLEL_LOSS
            ? "the first step's gradients are right, so what it could not "
              "show: a bias, 0 at the start (TODO 1: a column layer's b, "
              "its count floats after its count x in weights; TODO 2: the "
              "row layer's, added once, after the sum); or TODO 4: AdamW on "
              "every parameter each rank holds, with step + 1, and nothing "
              "sent (its gradients are whole already); or TODO 6: "
              "a buffer read before this step writes it (a rank without "
              "the label adds 0 for its logit)"
            : "the first step's gradients are right, so what it could not "
              "show: a bias, 0 at the start (TODO 1: a column layer's b, "
              "its count floats after its count x in weights; TODO 2: the "
              "row layer's, added once, after the sum); or TODO 4: AdamW on "
              "every parameter each rank holds, with step + 1, and nothing "
              "sent (its gradients are whole already)";
    expect_replicated(out, ranks, g, &ref, shape->steps, later, what);
    for (int step = 1; step < shape->steps; step++) {
        const double want = ref.losses[step];
        ck_assert_msg(fabs(losses[step] - want) <=
                          8 * ldexp(fabs(want), -24),
                      "%s: step %d's loss is %.9g; the lesson's algorithm "
                      "gives %.9g. Hint: %s", what, step, losses[step],
                      want, later);
    }
    expect_held_values(out, "params", ranks, g, ref.params,
                       "after the last step it is", later, what);
    if (mode & PARALLEL_LOSS) {
        /* Rank 0's held-out accuracy (train.h: the count its classify
         * returned over the held-out samples, in parts per million). */
        char *report = harness_read_report(out, 0);
        const long long got =
            (long long)harness_report_value(report, 0, "accuracy_ppm");
        free(report);
        /* 10 classes after 3 steps get none of the 8 right; the run of
         * 3 classes gets 3, which a count never set (0) would miss. */
        ck_assert_msg(!(mode & FEW_CLASSES) || ref.held_out_right > 0,
                      "the test's data no longer has a held-out sample the "
                      "3-class model gets right: the count is not tested");
        const long long want = llround((double)ref.held_out_right /
                                       shape->held_out * 1e6);
        ck_assert_msg(got == want, "%s: the held-out accuracy is %.6f; the "
                      "lesson's algorithm classifies %zu of the %d held-out "
                      "samples right, %.6f. Hint: TODO 6: *correct, when "
                      "not NULL, receives the samples whose label's logit "
                      "is the largest over every rank's (the held-out "
                      "accuracy counts them)", what, (double)got / 1e6,
                      ref.held_out_right, shape->held_out,
                      (double)want / 1e6);
    }
    reference_free(&ref);
}

/* The layers' parts, as the driver reported them, against the lesson's
 * split and the balanced partition. */
static void expect_layout(const char *report, int rank, int t, int mode,
                          const run_shape *shape, const char *what)
{
    const tp_layout g = layout_of(shape, t, mode);
    const int r = rank % t;
    for (int l = 0; l < g.layer_count; l++) {
        char key[32];
        unsigned long long v[6];
        snprintf(key, sizeof key, "layer %d", l);
        ck_assert_msg(harness_report_values(report, key, v, 6) == 6,
                      "%s: rank %d's report has no \"%s\" line", what, rank,
                      key);
        ck_assert_msg(v[0] == (unsigned long long)g.split[l] &&
                      v[3] == g.first[l][r] && v[4] == g.count[l][r],
                      "%s, rank %d: layer %d is %s with the part [%llu, "
                      "%llu); the lesson's is %s, [%zu, %zu)", what, rank,
                      l, split_names[v[0] > 2 ? 2 : v[0]], v[3], v[3] + v[4],
                      split_names[g.split[l]], g.first[l][r],
                      g.first[l][r] + g.count[l][r]);
    }
}

/* The first step's loss (rank 0's report: the mean over the ranks) within
 * the derived bound of the serial model's. */
static void expect_serial_loss(const char *out, const run_shape *shape,
                               int mode, const char *what)
{
    double bound, serial = serial_first_loss(shape, mode, &bound);
    double losses[64];
    ck_assert(shape->steps <= 64);
    harness_read_doubles(out, "losses", 0, losses, (size_t)shape->steps);
    ck_assert_msg(fabs(losses[0] - serial) <= bound, "%s: the first step's "
                  "loss is %.9g, the serial model's %.9g: %.3g apart, more "
                  "than summing in another order can explain (%.3g). "
                  "Hint: TODO 2: the row layer's bias is added once, after "
                  "the sum; TODO 3: every layer's input is the output of "
                  "the one before", what, losses[0], serial,
                  fabs(losses[0] - serial), bound);
}

/* ---- The costs ---- */

enum { PHASE_FORWARD = 1, PHASE_LOSS = 2, PHASE_BACKWARD = 3,
       PHASE_UPDATE = 4 };
enum { ALLREDUCE = 0, REDUCE_SCATTER = 1, ALLGATHER = 2, MAXIMUM = 3 };

/* Bytes rank r sends in a collective of `count` floats over t ranks, its
 * block of the balanced partition |own| (common/collectives.h): a
 * reduce-scatter sends each peer its block, count - |own|; an allgather
 * its own block to each peer, (t-1)|own|; an allreduce both. 4 bytes
 * each. */
static unsigned long long collective_sent(int kind, size_t count, int t,
                                          int r)
{
    size_t begin, end;
    training_block_of(count, t, r, &begin, &end);
    const unsigned long long own = end - begin;
    const unsigned long long scatter = count - own;
    const unsigned long long gather = (unsigned long long)(t - 1) * own;
    /* tp_allreduce_max allgathers every rank's count values: (t-1) x
     * count sent. */
    if (kind == MAXIMUM)
        return 4ull * (unsigned long long)(t - 1) * count;
    return 4 * (kind == REDUCE_SCATTER ? scatter
                : kind == ALLGATHER    ? gather
                                       : scatter + gather);
}

/* The collectives a step must issue, in order. Without sequence
 * parallelism: forward, an allreduce of batch x out after each row layer
 * (g); backward, one of batch x in at each column layer but the first
 * (f; the inputs are data, their gradient nobody needs), last layer
 * first. With it, outside the pairs each rank keeps its rows: a row
 * layer but the last reduce-scatters (its backward allgathers the
 * gradient of its rows), a layer after one (a column layer, the whole
 * layer) allgathers its input first (its backward reduce-scatters the
 * input's gradient: the whole layer's is whole already, and needs none);
 * the last row layer's logits stay whole (the loss needs them), an
 * allreduce as before. */
typedef struct {
    int phase, kind;
    size_t count;
} expected_call;

static int expected_calls(const tp_layout *g, size_t batch,
                          expected_call calls[])
{
    const bool sp = g->mode & SEQUENCE;
    int n = 0;
    const int last = g->layer_count - 1;
    for (int l = 0; l < g->layer_count; l++) {
        const size_t in = batch * (size_t)g->in[l];
        const size_t out = batch * (size_t)g->out[l];
        if (sp && l > 0 && g->split[l] != ROW)
            calls[n++] = (expected_call){ PHASE_FORWARD, ALLGATHER, in };
        if (g->split[l] == ROW)
            calls[n++] = (expected_call){ PHASE_FORWARD,
                                          sp && l != last ? REDUCE_SCATTER
                                                          : ALLREDUCE,
                                          out };
    }
    if (g->mode & PARALLEL_LOSS) {
        calls[n++] = (expected_call){ PHASE_LOSS, MAXIMUM, batch };
        calls[n++] = (expected_call){ PHASE_LOSS, ALLREDUCE, 2 * batch };
    }
    for (int l = last; l > 0; l--) {
        const size_t in = batch * (size_t)g->in[l];
        const size_t out = batch * (size_t)g->out[l];
        if (sp && g->split[l] == ROW && l != last)
            calls[n++] = (expected_call){ PHASE_BACKWARD, ALLGATHER, out };
        if (g->split[l] == COLUMN)
            calls[n++] = (expected_call){ PHASE_BACKWARD,
                                          sp ? REDUCE_SCATTER : ALLREDUCE,
                                          in };
    }
    return n;
}

static const char *const phase_names[] = { "outside the step", "forward",
                                           "the loss", "backward",
                                           "tp_update" };
static const char *const kind_names[] = { "allreduce", "reduce-scatter",
                                          "allgather", "maximum",
                                          "unknown call" };

/* What the lesson says of an expected call, for a message. */
static const char *call_hint(const expected_call *c, bool sp)
{
    if (c->phase == PHASE_LOSS)
        return "TODO 6: the loss combines three numbers a sample over the "
               "ranks: the largest logit (tp_allreduce_max), then the sum "
               "of exp(logit - largest) and the label's logit (one "
               "tp_allreduce of both, or one each)";
    if (!sp)
        return c->phase == PHASE_FORWARD
                   ? "TODO 2: a row layer's outputs are partial sums until "
                     "tp_allreduce adds them (g: sum forward, nothing "
                     "backward)"
                   : "TODO 1: a column layer's input gradient is a partial "
                     "sum; tp_allreduce adds them (f: nothing forward, "
                     "sum backward)";
    switch (c->kind) {
    case REDUCE_SCATTER:
        return c->phase == PHASE_FORWARD
                   ? "TODO 5: a row layer's partial sums are "
                     "reduce-scattered: each rank needs its rows' sums only "
                     "(an allreduce, then keeping the rows, sends twice as "
                     "much)"
                   : "TODO 5: a column layer's input gradient goes to the "
                     "rank whose rows they are: tp_reduce_scatter";
    case ALLGATHER:
        return c->phase == PHASE_FORWARD
                   ? "TODO 5: a layer after a row layer needs the whole "
                     "input: tp_gather_input"
                   : "TODO 5: a row layer's backward needs the whole batch's "
                     "gradient: every rank's rows, allgathered";
    default:
        return "TODO 5: the last row layer's logits stay whole: an "
               "allreduce, as without sequence parallelism";
    }
}

/* The first step's record, call by call, against the expected calls;
 * the bytes of each phase over the steps against what those calls send.
 * One freedom: the parallel loss's two sums (the exps', the label
 * logit's) may go in one allreduce of 2 x batch or in two of batch each,
 * in either order; what is expected then is what was issued. */
static void expect_traffic(const char *report, int rank, int t, int mode,
                           const run_shape *shape, const char *what)
{
    const tp_layout g = layout_of(shape, t, mode);
    const bool sp = mode & SEQUENCE;
    const int r = rank % t;
    expected_call calls[4 * MOST_LAYERS + 1];
    int n = expected_calls(&g, (size_t)shape->batch, calls);
    /* On one rank a sum over the ranks is no sum at all: a program may
     * skip the call, and nothing is sent either way. */
    if (t > 1) {
        unsigned long long issued =
            harness_report_value(report, rank, "collectives");
        for (int k = 0; k < n || k < (int)issued; k++) {
            char key[32];
            unsigned long long v[3] = { 0, 0, 0 };
            snprintf(key, sizeof key, "collective %d", k);
            bool have = k < (int)issued &&
                        harness_report_values(report, key, v, 3) == 3;
            const char *kind = kind_names[v[1] < 4 ? v[1] : 4];
            const char *phase = phase_names[v[0] < 5 ? v[0] : 0];
            if (have && k < n && calls[k].phase == PHASE_LOSS &&
                calls[k].kind == ALLREDUCE && v[0] == PHASE_LOSS &&
                v[1] == ALLREDUCE && 2 * v[2] == calls[k].count) {
                /* The two sums one at a time: expect the second too. */
                for (int j = n; j > k; j--)
                    calls[j] = calls[j - 1];
                calls[k].count = calls[k + 1].count = calls[k].count / 2;
                n++;
            }
            if (k >= n)
                ck_assert_msg(0, "%s, rank %d: the first step's collective "
                              "%d, a%s %s of %llu floats in %s, is one too "
                              "many: a step issues %d. Hint: %s", what,
                              rank, k + 1, v[1] == 0 ? "n" : "", kind, v[2],
                              phase, n,
                              v[0] == PHASE_UPDATE
                                  ? "TODO 4: every gradient a rank holds "
                                    "is whole: nothing to sum before the "
                                    "update"
                              : v[0] == PHASE_BACKWARD
                                  ? "TODO 2-3: a row layer's backward and "
                                    "the bias's gradient need no sum; "
                                    "layer 0's input gradient is not "
                                    "needed"
                              : v[0] == PHASE_LOSS
                                  ? "TODO 6: the loss needs a maximum of "
                                    "batch floats and sums of 2 x batch, "
                                    "no more"
                                  : "TODO 1-3: a column layer's forward "
                                    "and the whole layer's need no "
                                    "communication");
            const expected_call *c = &calls[k];
            ck_assert_msg(have, "%s, rank %d: the first step issued %llu "
                          "collectives; it must issue %d: a%s %s of %zu "
                          "floats in %s is missing. Hint: %s", what, rank,
                          issued, n, c->kind == ALLREDUCE ? "n" : "",
                          kind_names[c->kind], c->count,
                          phase_names[c->phase], call_hint(c, sp));
            ck_assert_msg(v[0] == (unsigned long long)c->phase &&
                          v[1] == (unsigned long long)c->kind &&
                          v[2] == c->count, "%s, rank %d: the first step's "
                          "collective %d is a%s %s of %llu floats in %s; "
                          "the lesson's is a%s %s of %zu in %s. Hint: %s",
                          what, rank, k + 1, v[1] == 0 ? "n" : "", kind,
                          v[2], phase, c->kind == ALLREDUCE ? "n" : "",
                          kind_names[c->kind], c->count,
                          phase_names[c->phase], call_hint(c, sp));
        }
    }
    unsigned long long want[5] = { 0 };
    for (int k = 0; k < n; k++)
        want[calls[k].phase] += collective_sent(calls[k].kind,
                                                calls[k].count, t, r);
    static const char *const keys[] = { NULL, "sent_forward", "sent_loss",
                                        "sent_backward", "sent_update" };
    for (int p = PHASE_FORWARD; p <= PHASE_UPDATE; p++) {
        unsigned long long got = harness_report_value(report, rank, keys[p]);
        unsigned long long expected = want[p] * (unsigned long long)
                                                     shape->steps;
        ck_assert_msg(got == expected, "%s, rank %d: %s sent %llu bytes "
                      "over %d steps; the lesson's collectives send %llu. "
                      "Hint: every sum over the ranks through the given "
                      "tp_ helpers, each once", what, rank, phase_names[p],
                      got, shape->steps, expected);
    }
}

/* The model state a rank holds, in floats: its parts (held). */
static size_t held_floats(const tp_layout *g, int r)
{
    size_t total = 0;
    for (int l = 0; l < g->layer_count; l++)
        total += g->held[l][r];
    return total;
}

/* The activations the given code holds: every layer's pre and post (a
 * column layer's for its rows, the others' whole; with sequence
 * parallelism a row layer's but the last's for the rank's batch / t
 * samples, and a gathered input for each layer after a row layer), the
 * two gradient buffers of the widest layer, and the loop's batch of
 * inputs (common/train.c), for `batch` samples. */
static size_t activation_floats(const tp_layout *g, int r, size_t batch)
{
    const bool sp = g->mode & SEQUENCE;
    size_t total = 0, widest = FEATURES;
    const int last = g->layer_count - 1;
    for (int l = 0; l < g->layer_count; l++) {
        const bool rows = sp && g->split[l] == ROW && l != last;
        total += 2 * (rows ? batch / (size_t)g->t : batch) *
                 (g->split[l] == COLUMN ? g->count[l][r]
                                        : (size_t)g->out[l]);
        if (sp && l > 0 && g->split[l] != ROW)
            total += batch * (size_t)g->in[l];
        if ((size_t)g->out[l] > widest)
            widest = (size_t)g->out[l];
    }
    return total + 2 * batch * widest + batch * FEATURES;
}

/* The bytes a rank's allocator may hold beyond the ledger's count: the
 * libraries' own bookkeeping, as in lesson 06 (tests/test_06-zero.c: up
 * to 72 KiB seen); less than any whole copy on the measured model below. */
enum { HEAP_SLACK = 96 << 10 };

static void expect_memory(const char *report, int rank, int t, int mode,
                          const run_shape *shape, const char *what)
{
    const bool sp = mode & SEQUENCE;
    const tp_layout g = layout_of(shape, t, mode);
    const int r = rank % t;
    const unsigned long long held = 4ull * held_floats(&g, r);
    static const struct {
        const char *key;
        int times;
    } state[] = { { "peak parameters", 1 }, { "peak gradients", 1 },
                  { "peak optimizer", 2 } };
    for (int k = 0; k < 3; k++) {
        unsigned long long got =
            harness_report_value(report, rank, state[k].key);
        ck_assert_msg(got == state[k].times * held, "%s, rank %d: %s "
                      "peaked at %llu bytes; this rank's parts hold %zu "
                      "floats, so %llu bytes%s. Hint: TODO 1-3: "
                      "tp_allocate_layer allocates each buffer held floats, "
                      "through ledger_alloc with its category, and nothing "
                      "more of the layer", what, rank, state[k].key + 5,
                      got, held_floats(&g, r), state[k].times * held,
                      got == 0 ? " (0: allocated without ledger_alloc?)"
                               : "");
    }
    unsigned long long activations =
        harness_report_value(report, rank, "peak activations");
    unsigned long long want = 4ull * activation_floats(&g, r,
                                                       (size_t)shape->batch);
    ck_assert_msg(activations == want, "%s, rank %d: activations peaked at "
                  "%llu bytes; the given buffers hold %llu, and the "
                  "lesson's algorithm needs no more. Hint: %s: no copy of "
                  "a layer's output or gradient beside them%s", what, rank,
                  activations, want,
                  sp ? "TODO 5" : mode & PARALLEL_LOSS ? "TODO 1-3 or 6"
                                                       : "TODO 1-3",
                  sp ? " (a row layer's partial sums fit z->gradient[0], "
                       "free during forward)"
                  : mode & PARALLEL_LOSS ? " (the loss's three numbers a "
                                           "sample fit z->gradient[1])"
                                         : "");
    if (harness_outside_measures())
        return;
    unsigned long long heap = harness_report_value(report, rank, "heap_growth");
    unsigned long long ledger =
        harness_report_value(report, rank, "ledger_growth");
    ck_assert_msg(heap <= ledger + HEAP_SLACK, "%s, rank %d: the process's "
                  "allocator held %llu bytes more than before the state "
                  "was allocated, the memory ledger only %llu: memory "
                  "allocated behind the ledger's back (malloc?). Hint: "
                  "TODO 1-3: every buffer with ledger_alloc and its "
                  "category", what, rank, heap, ledger);
}

/* What a rank may hold after its boundary: the state and activations by
 * the formulas (the loop's batch of inputs among them), the collectives'
 * receive and send slots (collectives.h: at most a chunk a peer each,
 * fp32), and the report's copy of the parameters. */
static unsigned long long allowed_after_boundary(const run_shape *shape,
                                                 int t, int mode, int r)
{
    const tp_layout g = layout_of(shape, t, mode);
    const size_t held = held_floats(&g, r);
    unsigned long long allowed = 4ull * (4 * held + held) +
        4ull * activation_floats(&g, r, (size_t)shape->batch);
    size_t slot = (size_t)shape->batch * (size_t)shape->width;
    if (slot > COLLECTIVES_CHUNK_ELEMENTS)
        slot = COLLECTIVES_CHUNK_ELEMENTS;
    allowed += 8ull * (unsigned long long)(t - 1) * slot;
    return allowed;
}

static void expect_outside(const run_result *res, const char *report,
                           int ranks, int rank, int t, int mode,
                           const run_shape *shape, const char *what)
{
    watch_report w = harness_read_watch(res, rank);
    ledger_traffic counted = harness_ledger_traffic(report, ranks);
    const char *hint = "every sum over the ranks through tp_allreduce";
    harness_expect_sent(&w, rank, &counted, what, hint);
    harness_expect_received(&w, rank, &counted, what, hint);
#ifndef HARNESS_SHADOW_MEMORY
    harness_expect_memory(&w, rank, allowed_after_boundary(shape, t, mode,
                                                           rank % t),
                          what, "TODO 1-3: each rank holds its part of "
                          "every split layer, not the whole");
#endif
}

/* One run on `ranks` ranks in groups of t, every check on every rank. */
static void check_run(int ranks, int t, int mode, const run_shape *shape,
                      const char *name)
{
    char out[HARNESS_PATH], what[192];
    harness_out_dir(out);
    snprintf(what, sizeof what, "%s, t = %d on %d rank%s%s%s", name, t,
             ranks, ranks == 1 ? "" : "s",
             mode & SEQUENCE ? ", sequence-parallel" : "",
             mode & PARALLEL_LOSS ? ", parallel loss" : "");
    run_result r = run_tp(ranks, t, mode, shape, out, 15);
    harness_expect_success(&r, what);
    for (int rank = 0; rank < ranks; rank++) {
        char *report = harness_read_report(out, rank);
        expect_layout(report, rank, t, mode, shape, what);
        free(report);
    }
    expect_weights(out, ranks, t, mode, shape, what);
    if (ranks == t)
        expect_serial_loss(out, shape, mode, what);
    for (int rank = 0; rank < ranks; rank++) {
        char *report = harness_read_report(out, rank);
        expect_traffic(report, rank, t, mode, shape, what);
        expect_memory(report, rank, t, mode, shape, what);
        if (harness_outside_measures() && harness_outside_traffic())
            expect_outside(&r, report, ranks, rank, t, mode, shape, what);
        free(report);
    }
    run_result_free(&r);
    harness_remove_out_dir(out);
}

static void expect_nothing_kept(int mode, const char *hint);

START_TEST(pair_and_whole_layer)
{
    for (int t = 1; t <= 4; t++)
        check_run(t, t, PLAIN, &test_run,
                  "a pair and the output layer whole");
    expect_nothing_kept(PLAIN, "TODO 1-4: what a step allocates, it frees "
                        "(the given buffers hold everything a step needs)");
}
END_TEST

START_TEST(two_pairs_run)
{
    for (int t = 2; t <= 4; t += 2)
        check_run(t, t, PLAIN, &two_pairs, "two pairs");
}
END_TEST

/* Hidden layers of 3 units on 4 ranks, in two pairs: the last rank holds
 * no row of either column layer, and still takes part in the sums of
 * the second one's input gradient. */
static const run_shape narrow_two_pairs = { 3, 3, 3, 4, 40, 8, 1e-3, 0.1 };

START_TEST(narrow_layers)
{
    check_run(4, 4, PLAIN, &narrow_run, "layers of 3 units");
    check_run(4, 4, PLAIN, &narrow_two_pairs, "two pairs of 3 units");
}
END_TEST

START_TEST(groups_and_replicas)
{
    check_run(4, 2, PLAIN, &test_run,
              "2 replicas of a pair and a whole layer");
}
END_TEST

/* Sequence parallelism trains bitwise the same model: a reduce-scatter
 * adds the same terms in the same order as the allreduce it replaces. */
START_TEST(sequence_parallel_pair_and_whole_layer)
{
    for (int t = 2; t <= 4; t += 2)
        check_run(t, t, SEQUENCE, &test_run,
                  "a pair and the output layer whole");
    expect_nothing_kept(SEQUENCE, "TODO 5, or TODO 1-4 if the same check "
                        "fails without --sequence-parallel: what a step "
                        "allocates, it frees (a row layer's partial sums "
                        "fit z->gradient[0])");
}
END_TEST

START_TEST(sequence_parallel_two_pairs)
{
    for (int t = 2; t <= 4; t += 2)
        check_run(t, t, SEQUENCE, &two_pairs, "two pairs");
}
END_TEST

START_TEST(sequence_parallel_replicas)
{
    check_run(4, 2, SEQUENCE, &two_pairs, "2 replicas of two pairs");
}
END_TEST

/* The parallel loss: 10 classes on 2, 3 and 4 ranks (3 and 4 do not
 * divide 10), and with sequence parallelism too. */
START_TEST(parallel_loss_runs)
{
    for (int t = 2; t <= 4; t++)
        check_run(t, t, PARALLEL_LOSS, &test_run,
                  "a pair and the output layer split by class");
    expect_nothing_kept(PARALLEL_LOSS, "TODO 6, or TODO 1-4 if the same "
                        "check fails without --parallel-loss: what a step "
                        "allocates, it frees (the loss's three numbers a "
                        "sample fit z->gradient[1])");
}
END_TEST

/* 3 classes on 4 ranks: the last holds none, and still takes part in
 * the maximum (its own is -infinity) and the sums. */
START_TEST(parallel_loss_a_rank_without_classes)
{
    check_run(4, 4, PARALLEL_LOSS | FEW_CLASSES, &test_run,
              "3 classes split among 4 ranks");
}
END_TEST

START_TEST(parallel_loss_with_sequence_parallelism)
{
    for (int t = 2; t <= 4; t += 2)
        check_run(t, t, PARALLEL_LOSS | SEQUENCE, &test_run,
                  "a pair and the output layer split by class");
}
END_TEST

/* ---- Memory, measured outside on a model large enough to tell ---- */

/* 2 hidden layers of 1024 units: the row layer's W alone is 4 MiB, a
 * whole copy of it on a rank of 4 is 3 MiB more than its quarter, three
 * times HARNESS_MEMORY_SLACK. One step of 4 samples, no report. */
static const run_shape measured_run = { 2, 1024, 1, 4, 16, 4, 1e-3, 0.1 };

START_TEST(memory_measured)
{
    const int ranks = 4;
    if (!harness_outside_measures())
        HARNESS_SKIP("memory is measured outside the process only on Linux "
                     "(the watch reads /proc); the other tests check the "
                     "ledger's count");
#ifdef HARNESS_SHADOW_MEMORY
    HARNESS_SKIP("under the sanitizers the kernel counts their shadow "
                 "memory too");
#endif
    const char *what = "t = 4, 2 hidden layers of 1024";
    run_result r = run_tp(ranks, ranks, PLAIN, &measured_run, NULL, 20);
    harness_expect_success(&r, what);
    for (int rank = 0; rank < ranks; rank++) {
        watch_report w = harness_read_watch(&r, rank);
        harness_expect_memory(&w, rank,
                              allowed_after_boundary(&measured_run, ranks,
                                                     PLAIN, rank),
                              what, "TODO 1-3: each rank holds its part of "
                              "every split layer, not the whole");
    }
    run_result_free(&r);
}
END_TEST

/* ---- Nothing kept from one step to the next, measured outside ---- */

/* One pair and the output layer, on 2 ranks, for 20 steps and for 300
 * (training_expect_nothing_kept). */
static void expect_nothing_kept(int mode, const char *hint)
{
    char what[160];
    snprintf(what, sizeof what, "a pair and the output layer, t = 2 on 2 "
             "ranks%s%s", mode & SEQUENCE ? ", sequence-parallel" : "",
             mode & PARALLEL_LOSS ? ", parallel loss" : "");
    const run_shape shape = { 2, 37, 20, 4, 40, 8, 1e-3, 0.1 };
    const char *flags[] = { "--tp", "2",
                            mode & SEQUENCE ? "--sequence-parallel" : NULL,
                            NULL, NULL };
    if (mode & PARALLEL_LOSS)
        flags[mode & SEQUENCE ? 3 : 2] = "--parallel-loss";
    training_expect_nothing_kept(LESSON, "train_tp", 2, &shape, flags, what,
                                 hint);
}

/* ---- Training: the default task learned ---- */

START_TEST(learns_the_task)
{
    const double accuracy = training_accuracy_after(
        LESSON, "train_tp", 2, 150, "train_tp on 2 ranks, 150 steps");
    /* 1 and 2 ranks both reach 0.8208 in 150 steps of the default run
     * (the same model: the weights tests above hold it to the bit of the
     * lesson's algorithm; another C library's expf and log may move the
     * last digits); chance is 0.10. 0.75 fails a run that does not learn,
     * and no honest one. */
    ck_assert_msg(accuracy >= 0.75, "train_tp on 2 ranks: held-out accuracy "
                  "%.3f after 150 steps; the default task reaches 0.82. "
                  "Hint: TODO 4", accuracy);
}
END_TEST

Suite *lesson_suite(void)
{
    static char names[16][160];
    int k = 0;
    Suite *suite = suite_create(LESSON);
    for (size_t c = 0; c < sizeof parts / sizeof parts[0]; c++) {
        snprintf(names[k], sizeof names[k], "column part: %s",
                 parts[c].why);
        harness_add(suite, names[k++], column_part_case, (int)c, 10);
    }
    harness_add(suite, "a pair and the output layer whole on t = 1-4: "
                "weights bitwise, loss near serial, collectives and memory "
                "as the formulas say", pair_and_whole_layer, 0, 60);
    harness_add(suite, "two pairs on t = 2 and 4: the same checks",
                two_pairs_run, 0, 40);
    harness_add(suite, "layers of 3 units on t = 4 (a rank holds none), one "
                "pair and two: the same checks", narrow_layers, 0, 30);
    harness_add(suite, "2 replicas of a group of 2 on 4 ranks: the same "
                "checks", groups_and_replicas, 0, 25);
    harness_add(suite, "sequence parallelism, a pair and the output layer "
                "whole on t = 2 and 4: the same weights, its collectives and "
                "memory", sequence_parallel_pair_and_whole_layer, 0, 40);
    harness_add(suite, "sequence parallelism, two pairs on t = 2 and 4: the "
                "same checks", sequence_parallel_two_pairs, 0, 40);
    harness_add(suite, "sequence parallelism, 2 replicas of a group of 2: "
                "the same checks", sequence_parallel_replicas, 0, 25);
    harness_add(suite, "the parallel loss, 10 classes on t = 2, 3 and 4: "
                "weights bitwise, loss near serial, collectives and memory",
                parallel_loss_runs, 0, 40);
    harness_add(suite, "the parallel loss, 3 classes on t = 4 (a rank holds "
                "none): the same checks", parallel_loss_a_rank_without_classes,
                0, 25);
    harness_add(suite, "the parallel loss with sequence parallelism on t = 2 "
                "and 4: the same checks",
                parallel_loss_with_sequence_parallelism, 0, 30);
    harness_add(suite, "t = 4, a model of 1.1 million parameters: the "
                "memory each rank holds, measured outside it",
                memory_measured, 0, 25);
    harness_add(suite, "learns the default task on 2 ranks", learns_the_task,
                0, 45);
    return suite;
}
