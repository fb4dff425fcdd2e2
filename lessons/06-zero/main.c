/* Lesson 06's driver: mixed-precision training under ZeRO stage 0, 1, 2 or
 * 3. Every rank builds the same model shape from the seed, with no storage
 * of its own; your zero.c holds the parameters, gradients and optimizer
 * state, whole or in parts, and the driver calls its hooks around every
 * layer's forward and backward and after them (zero.h). The loop itself is
 * common/train.h's, shared with lessons 05 and 07.
 *
 *   mpirun -np 4 build/student/06-zero/train_zero --stage 3
 *   mpirun -np 2 build/student/06-zero/train_zero --find-batch --memory-cap 2000000
 *
 * With --out, every rank reports to the tests: the parameters it holds at
 * the end, its own part of the fp32 master weights, the memory ledger's
 * peaks by category, what each kind of hook sent, and with --prefetch
 * what each prefetch left running (the communication ledger, so what your
 * code claims plays no part). With --memory-cap,
 * every allocation past the cap is refused, as a device's memory would.
 * You do not need to change this file. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check_mpi.h"
#include "cli.h"
#include "collectives.h"
#include "comm_ledger.h"
#include "dataset.h"
#include "matmul.h"
#include "memory_ledger.h"
#include "mlp.h"
#include "optimizer.h"
#include "partition.h"
#include "report.h"
#include "timer.h"
#include "train.h"
#include "zero.h"
#include "zero_memory.h"
#include "zero_stages.h"

typedef struct {
    size_t steps, local_batch, samples, held_out, memory_cap;
    int stage, hidden, width, features, classes;
    double learning_rate, weight_decay;
    uint64_t seed;
    bool prefetch, find_batch;
    const char *out;
    int rank, ranks;
} run_config;

/* Stops every rank with status 2 after rank 0 says why. */
static _Noreturn void refuse(const run_config *c, const char *why)
{
    if (c->rank == 0)
        fprintf(stderr, "train_zero: %s\n", why);
    mpi_exit_all(2);
}

/* ---- What a step costs: the bound the cap is checked against ---------- */

/* The model state a rank holds at `stage`: the paper's formula with the
 * partition's rounding (zero_memory.h), this rank's block for what the
 * stage shards. UINT64_MAX when it cannot be counted. */
static uint64_t state_bytes(int stage, const mlp *model, int ranks, int rank)
{
    uint64_t state[ZERO_STATE_KINDS];
    char error[256];
    const zero_model sizes = { model->parameter_count, 2, 2, 12 };
    if (zero_rank_state_bytes(&sizes, stage, (uint64_t)ranks, (uint64_t)rank,
                              state, error, sizeof error) != 0)
        return UINT64_MAX;
    uint64_t sum = 0;
    for (int kind = 0; kind < ZERO_STATE_KINDS; kind++)
        sum += state[kind];
    return sum;
}

/* What a rank holds at `stage` besides the model state and the
 * activations, at most: one layer's gradient bucket (stages 2-3),
 * gathered layers (stage 3: one, or two with prefetch), and the
 * reduce-scatter's communication buffers (collectives.h: at most (P-1)
 * receive and (P-1) send slots of fp32, each no longer than a chunk or a
 * rank's block). */
static uint64_t buffer_bytes(int stage, bool prefetch, const mlp *model,
                             int ranks)
{
    const uint64_t largest = model->largest_layer;
    uint64_t slot = block_size(model->parameter_count, (size_t)ranks, 0);
    if (slot > COLLECTIVES_CHUNK_ELEMENTS)
        slot = COLLECTIVES_CHUNK_ELEMENTS;
    uint64_t need = 8 * (uint64_t)(ranks - 1) * slot;
    if (stage >= 2)
        need += 2 * largest;
    if (stage == 3)
        need += (prefetch ? 4 : 2) * largest;
    return need;
}

/* The most bytes a rank holds at once at `stage`: what it holds already
 * (`held`: the model's activations), the loop's input buffer, the model
 * state and the buffers above. The bound a cap is checked against. */
static uint64_t bytes_needed(int stage, bool prefetch, const mlp *model,
                             size_t batch, int ranks, int rank, size_t held)
{
    const uint64_t state = state_bytes(stage, model, ranks, rank);
    if (state == UINT64_MAX)
        return UINT64_MAX;
    return held + (uint64_t)batch * (uint64_t)model->config.inputs *
                      sizeof(float) +
           state + buffer_bytes(stage, prefetch, model, ranks);
}

/* ---- The steps of the loop (train.h) ---------------------------------- */

/* Bytes sent by the hooks, by what they move. */
typedef struct {
    uint64_t bf16_sent;   /* the parameter hooks and zero_update */
    uint64_t fp32_sent;   /* zero_backward_done and zero_reduce */
    uint64_t other_sent;  /* zero_forward_done: none expected */
} traffic_counts;

typedef struct {
    const run_config *config;
    mlp model;
    zero_state zero;
    bool counting;          /* in a training step, not the accuracy's */
    traffic_counts traffic;
    size_t heap_baseline, heap_growth;   /* the allocator's bytes */
    size_t ledger_baseline, ledger_growth; /* the ledger's, at the same
                                              moments */
    size_t peaks[MEMORY_CATEGORIES], peak_total;
    float *widened;         /* the parameters held, widened for the report */
} trainer;

/* Bytes sent since the ledger's last reset. */
static uint64_t sent_so_far(void)
{
    return comm_ledger_total().bytes_sent;
}

/* After each hook: the memory the process's allocator holds, beyond what
 * it held before the state was allocated. A copy allocated outside the
 * memory ledger shows here. */
static void sample_heap(trainer *t)
{
    size_t heap = memory_ledger_heap_in_use();
    if (heap > t->heap_baseline && heap - t->heap_baseline > t->heap_growth)
        t->heap_growth = heap - t->heap_baseline;
    /* The ledger at the same moments: what the heap's growth is compared
     * with (its own peak also counts the collectives' buffers, which come
     * and go inside a hook). */
    size_t held = memory_ledger_current_total();
    if (held > t->ledger_baseline &&
        held - t->ledger_baseline > t->ledger_growth)
        t->ledger_growth = held - t->ledger_baseline;
}

/* What a hook sent, into the count of its kind (during training steps). */
static void count_sent(trainer *t, uint64_t before, uint64_t *kind)
{
    if (t->counting)
        *kind += sent_so_far() - before;
    sample_heap(t);
}

/* Stops the job when a per-layer step refused (a hook gave it nothing, or
 * a step out of order, which the driver's order rules out). */
static void layer_step_ok(trainer *t, int result, const char *hook, int l,
                          const void *given)
{
    char why[320];
    if (given == NULL) {
        snprintf(why, sizeof why, "%s gave no buffer for layer %d (zero.c)",
                 hook, l);
        zero_abort(&t->zero, why);
    }
    if (result != 0)
        zero_abort(&t->zero, t->model.error);
}

/* Forward through every layer, each layer's parameters from the hooks. */
static void forward(trainer *t, const float *inputs, size_t batch)
{
    zero_state *z = &t->zero;
    layer_step_ok(t, mlp_set_inputs(&t->model, inputs, batch),
                  "mlp_set_inputs", 0, inputs);
    for (int l = 0; l < t->model.layer_count; l++) {
        uint64_t before = sent_so_far();
        const bf16 *params = zero_forward_params(z, l);
        count_sent(t, before, &t->traffic.bf16_sent);
        int result = params == NULL ? -1
                     : mlp_forward_layer_bf16(&t->model, l, params);
        layer_step_ok(t, result, "zero_forward_params", l, params);
        before = sent_so_far();
        zero_forward_done(z, l);
        count_sent(t, before, &t->traffic.other_sent);
    }
}

/* Stops the job on a NaN loss. mlp_loss returns NaN for a refusal, with
 * the reason in the model's error, and for a loss that is not a number,
 * with none: then say so, and what makes it. */
static void loss_ok(trainer *t, float loss, const char *when)
{
    if (!isnan(loss))
        return;
    if (t->model.error[0] != '\0')
        zero_abort(&t->zero, t->model.error);
    char why[320];
    snprintf(why, sizeof why, "the loss is NaN %s: a layer computed on "
             "parameters that are not numbers (a gather used before it "
             "completed, or a buffer never filled), or updates that "
             "diverge", when);
    zero_abort(&t->zero, why);
}

static float forward_backward(void *context, long step, const float *inputs,
                              const int *labels, size_t batch)
{
    trainer *t = context;
    zero_state *z = &t->zero;
    t->counting = true;
    forward(t, inputs, batch);
    float loss = mlp_loss(&t->model, labels, 1, NULL);
    char when[64];
    snprintf(when, sizeof when, "at step %ld", step);
    loss_ok(t, loss, when);
    for (int l = t->model.layer_count - 1; l >= 0; l--) {
        bf16 *grads = NULL;
        uint64_t before = sent_so_far();
        const bf16 *params = zero_backward_params(z, l, &grads);
        count_sent(t, before, &t->traffic.bf16_sent);
        const bool given = params != NULL && grads != NULL;
        layer_step_ok(t, given ? mlp_backward_layer_bf16(&t->model, l, params,
                                                         grads) : -1,
                      "zero_backward_params", l, given ? params : NULL);
        before = sent_so_far();
        zero_backward_done(z, l);
        count_sent(t, before, &t->traffic.fp32_sent);
    }
    return loss;
}

static void reduce(void *context, long step)
{
    trainer *t = context;
    (void)step;
    uint64_t before = sent_so_far();
    zero_reduce(&t->zero);
    count_sent(t, before, &t->traffic.fp32_sent);
}

static void update(void *context, long step)
{
    trainer *t = context;
    uint64_t before = sent_so_far();
    zero_update(&t->zero, step);
    count_sent(t, before, &t->traffic.bf16_sent);
    t->counting = false;
    /* The ledger's peaks at the end of the last step, before the held-out
     * accuracy and the report add anything. */
    if (step + 1 == (long)t->config->steps) {
        for (int c = 0; c < MEMORY_CATEGORIES; c++)
            t->peaks[c] = memory_ledger_peak((memory_category)c);
        t->peak_total = memory_ledger_peak_total();
    }
}

static size_t classify(void *context, const float *inputs, const int *labels,
                       size_t batch)
{
    trainer *t = context;
    int correct = 0;
    forward(t, inputs, batch);
    loss_ok(t, mlp_loss(&t->model, labels, 0, &correct),
            "on the held-out samples");
    return (size_t)correct;
}

/* The parameters this rank holds (all, or its own part in stage 3). */
static zero_part held_part(const zero_state *z)
{
    return z->stage == 3 ? z->own : (zero_part){ 0, z->total };
}

static const float *parameters(void *context)
{
    trainer *t = context;
    zero_part held = held_part(&t->zero);
    size_t count = held.end - held.begin;
    t->widened = malloc((count ? count : 1) * sizeof *t->widened);
    if (t->widened == NULL)
        zero_abort(&t->zero, "out of memory for the report");
    bf16_to_floats(t->widened, t->zero.params, count);
    return t->widened;
}

/* The report's lines of this lesson (after train.h's own). */
static void report_lines(void *context, FILE *report)
{
    trainer *t = context;
    const zero_state *z = &t->zero;
    const zero_part held = held_part(z);
    fprintf(report, "stage %d\nprefetch %d\nmodel_parameters %zu\n"
            "own %zu %zu\nheld %zu %zu\nlargest_layer %zu\nlayers %d\n",
            z->stage, z->prefetch ? 1 : 0, z->total, z->own.begin,
            z->own.end, held.begin, held.end, z->largest_layer,
            z->layer_count);
    for (int l = 0; l < z->layer_count; l++)
        fprintf(report, "layer %d %zu %zu\n", l, z->layers[l].begin,
                z->layers[l].end);
    fprintf(report, "traffic_bf16_sent %" PRIu64 "\ntraffic_fp32_sent %"
            PRIu64 "\ntraffic_other_sent %" PRIu64 "\n",
            t->traffic.bf16_sent, t->traffic.fp32_sent,
            t->traffic.other_sent);
    for (int c = 0; c < MEMORY_CATEGORIES; c++)
        fprintf(report, "peak %s %zu\n",
                memory_category_name((memory_category)c), t->peaks[c]);
    fprintf(report, "peak total %zu\nledger_growth %zu\nheap_growth %zu\n",
            t->peak_total, t->ledger_growth, t->heap_growth);
    /* What the hooks saw after each return of stage3_prefetched (all 0
     * without prefetch): returns, overlapped, waited, unfinished, other
     * bytes. */
    const zero_prefetch_seen seen = zero_prefetch_observed();
    fprintf(report, "prefetch_returns %zu %zu %zu %zu %zu\n", seen.returns,
            seen.overlapped, seen.waited, seen.unfinished, seen.other_bytes);
    /* The own part of the fp32 master weights: every stage keeps it. */
    const size_t own = z->own.end - z->own.begin;
    const float *master = z->master + (z->stage == 0 ? z->own.begin : 0);
    double *values = malloc((own ? own : 1) * sizeof *values);
    if (values == NULL)
        zero_abort(&t->zero, "out of memory for the report");
    for (size_t k = 0; k < own; k++)
        values[k] = master[k];
    if (report_write_doubles(t->config->out, "master", z->rank, values,
                             own) != 0)
        zero_abort(&t->zero, "the master weights could not be written");
    free(values);
}

/* Bytes this rank's hooks sent in one training step (every step sends
 * the same). */
static uint64_t sent_a_step(const trainer *t)
{
    return (t->traffic.bf16_sent + t->traffic.fp32_sent +
            t->traffic.other_sent) / t->config->steps;
}

/* Rank 0's summary keys after train.h's: the stage, the most it held at
 * once (all categories) and what it sent a step. */
static void summary_keys(void *context, FILE *out)
{
    const trainer *t = context;
    fprintf(out, " stage=%d%s peak_bytes=%zu sent_bytes_per_step=%" PRIu64,
            t->zero.stage, t->zero.prefetch ? " prefetch=1" : "",
            t->peak_total, sent_a_step(t));
}

/* ---- The run ----------------------------------------------------------- */

/* The cap, checked before anything is allocated: a cap too small even for
 * stage 3 is bad input, said once. A cap that fits stage 3 but not the
 * stage asked for is the ledger's to refuse, on every rank. */
static void check_cap(const run_config *c, const mlp *model)
{
    if (c->memory_cap == 0)
        return;
    uint64_t need = bytes_needed(3, c->prefetch, model, c->local_batch,
                                 c->ranks, c->rank,
                                 memory_ledger_current_total());
    char why[320] = "";
    bool bad = need > c->memory_cap;
    if (bad)
        snprintf(why, sizeof why, "--memory-cap %zu bytes is too small even "
                 "for stage 3 on %d rank%s: this rank needs at least %" PRIu64
                 " bytes (its part of the model state, a gathered layer and "
                 "a gradient bucket, communication buffers, activations)",
                 c->memory_cap, c->ranks, c->ranks == 1 ? "" : "s", need);
    mpi_exit_if_any(bad, "train_zero", why);
}

/* Allocates and fills the state; if the ledger refuses on any rank, every
 * rank that was refused says why (its own line: rank, category, bytes,
 * cap) and all end with status 2. */
static void allocate_state(const run_config *c, trainer *t)
{
    int refused = zero_allocate(&t->zero) != 0;
    int any = refused;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (any) {
        if (refused)
            fprintf(stderr, "train_zero: stage %d does not fit: %s\n",
                    c->stage, memory_ledger_last_error());
        mpi_exit_all(2);
    }
    zero_initialize(&t->zero, c->seed);
}

/* One training run of `c` on the data; the report goes to c->out. */
static int train(const run_config *c, const dataset *train_set,
                 const dataset *held, FILE *report, trainer *t, char *error,
                 size_t error_len)
{
    const train_steps steps = {
        .context = t,
        .shard = train_shard_interleaved, .shard_name = "the shard of the batch",
        .compute = forward_backward,
        .compute_mark = "forward and backward (zero.c's layer hooks)",
        .synchronise = reduce,
        .synchronise_mark = "zero_reduce",
        .update = update,
        .update_mark = "zero_update",
        .classify = classify,
        .parameters = parameters,
        .report_lines = report_lines,
        .summary_keys = summary_keys,
        .parameter_count = held_part(&t->zero).end -
                           held_part(&t->zero).begin,
        .timed_work = "forward, backward and reduction",
    };
    const train_setup setup = { c->steps, c->local_batch, train_set, held,
                                c->rank, c->ranks, report, c->out };
    return train_run(&setup, &steps, error, error_len);
}

/* ---- The trade-off: the largest batch each stage fits, and its speed ---- */

/* The bytes a model for batches of `batch` holds (activations, backward's
 * scratch, the one-layer copies): made, measured on the ledger, freed.
 * 0 when it cannot be made. */
static size_t model_bytes(const mlp_config *shape, size_t batch)
{
    mlp model;
    char error[256];
    size_t before = memory_ledger_current_total();
    if (mlp_create_without_storage(&model, shape, batch, error,
                                   sizeof error) != 0)
        return 0;
    size_t bytes = memory_ledger_current_total() - before;
    mlp_free(&model);
    return bytes;
}

/* The bound (bytes_needed) of `stage` with local batches of `batch` on
 * this rank: the bytes its model holds for that batch (activations,
 * backward's scratch, the one-layer copies) added to what the ledger
 * holds already. UINT64_MAX when the model cannot be made. */
static uint64_t bound_for_batch(const run_config *c, const mlp_config *shape,
                                int stage, size_t batch)
{
    const size_t base = memory_ledger_current_total();
    size_t held = model_bytes(shape, batch);
    mlp sizes;
    char error[256];
    if (held == 0 || mlp_create_without_storage(&sizes, shape, 1, error,
                                                sizeof error) != 0)
        return UINT64_MAX;
    /* `sizes`, a model for one sample, only lends its shape. */
    uint64_t need = bytes_needed(stage, false, &sizes, batch, c->ranks,
                                 c->rank, base + held);
    mlp_free(&sizes);
    return need;
}

/* Whether `stage` fits the cap with local batches of `batch`, on every
 * rank (the ranks' parts differ by one element: each judges its own). */
static bool fits(const run_config *c, const mlp_config *shape, int stage,
                 size_t batch)
{
    int ok = bound_for_batch(c, shape, stage, batch) <= c->memory_cap;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN,
                            MPI_COMM_WORLD));
    return ok != 0;
}

enum { TIMED_ROUNDS = 5, STEPS_A_ROUND = 3 };

/* Samples per second of `stage` with local batches of `batch`, under the
 * cap: one step to warm up, then TIMED_ROUNDS rounds of STEPS_A_ROUND
 * steps, each round the slowest rank's time; the median round (a busy
 * neighbour slows one round, not the median). */
static double samples_per_second(const run_config *c, const dataset *data,
                                 int stage, size_t batch)
{
    trainer t = { .config = c };
    char error[256];
    mlp_config shape = { data->features, data->classes, c->hidden, c->width,
                         ACTIVATION_RELU };
    float *inputs = malloc(batch * (size_t)data->features * sizeof *inputs);
    int *labels = malloc(batch * sizeof *labels);
    if (inputs == NULL || labels == NULL ||
        mlp_create_without_storage(&t.model, &shape, batch, error,
                                   sizeof error) != 0) {
        fprintf(stderr, "train_zero: rank %d: no memory for a batch of %zu\n",
                c->rank, batch);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const adamw_config adamw = { (float)c->learning_rate, 0.9f, 0.999f,
                                 1e-8f, (float)c->weight_decay };
    const size_t steps = 1 + TIMED_ROUNDS * STEPS_A_ROUND;
    run_config at_stage = *c;
    at_stage.stage = stage;
    at_stage.steps = steps;
    t.config = &at_stage;
    zero_create(&t.zero, stage, false, &t.model, &adamw);
    allocate_state(&at_stage, &t);
    double rounds[TIMED_ROUNDS], start = 0;
    for (size_t step = 0; step < steps; step++) {
        /* Step 0 warms up; round k is steps 1 + k*S .. (k+1)*S. */
        const size_t in_round = (step - 1) % STEPS_A_ROUND;
        if (step > 0 && in_round == 0) {
            MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
            start = timer_now();
        }
        for (size_t k = 0; k < batch; k++) {
            size_t sample = ((step * batch + k) * (size_t)c->ranks +
                             (size_t)c->rank) % data->count;
            memcpy(&inputs[k * (size_t)data->features],
                   &data->inputs[sample * (size_t)data->features],
                   (size_t)data->features * sizeof *inputs);
            labels[k] = data->labels[sample];
        }
        forward_backward(&t, (long)step, inputs, labels, batch);
        reduce(&t, (long)step);
        update(&t, (long)step);
        if (step > 0 && in_round == STEPS_A_ROUND - 1) {
            double seconds = timer_now() - start;
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE,
                                    MPI_MAX, MPI_COMM_WORLD));
            rounds[(step - 1) / STEPS_A_ROUND] = seconds;
        }
    }
    zero_destroy(&t.zero);
    mlp_free(&t.model);
    free(inputs);
    free(labels);
    return (double)STEPS_A_ROUND * (double)batch * c->ranks /
           timings_median(rounds, TIMED_ROUNDS);
}

/* For each stage, the largest local batch whose bound (bytes_needed)
 * fits the cap, found by bisection, what the bound is made of at that
 * batch (rank 0's, whose block is the largest), and the samples per
 * second it trains at: one table, from rank 0. */
static void find_batch(const run_config *c, const dataset *data)
{
    const mlp_config shape = { data->features, data->classes, c->hidden,
                               c->width, ACTIVATION_RELU };
    enum { MOST = 1 << 16 };
    /* The model state and buffers of each stage, from a model for one
     * sample, freed before the search measures what the batches hold. */
    uint64_t states[ZERO_MAX_STAGE + 1], buffers[ZERO_MAX_STAGE + 1];
    mlp sizes;
    char error[256];
    if (mlp_create_without_storage(&sizes, &shape, 1, error,
                                   sizeof error) != 0)
        refuse(c, error);
    for (int stage = 0; stage <= ZERO_MAX_STAGE; stage++) {
        states[stage] = state_bytes(stage, &sizes, c->ranks, c->rank);
        buffers[stage] = buffer_bytes(stage, false, &sizes, c->ranks);
    }
    if (c->rank == 0)
        printf("train_zero: the largest local batch each stage fits in "
               "%zu bytes a rank, on %d rank%s\n%zu parameters, %zu in the "
               "largest layer; rank 0's bytes, by the bound the cap is "
               "checked against\n\n"
               "  stage | model state |  buffers | activations |   total | "
               "local batch | samples/s\n", c->memory_cap, c->ranks,
               c->ranks == 1 ? "" : "s", sizes.parameter_count,
               sizes.largest_layer);
    mlp_free(&sizes);
    for (int stage = 0; stage <= ZERO_MAX_STAGE; stage++) {
        const uint64_t state = states[stage], buffer = buffers[stage];
        size_t low = 0, high = MOST;   /* fits(low) (or low 0), not high */
        if (fits(c, &shape, stage, MOST))
            low = MOST;
        while (high - low > 1 && low < MOST) {
            size_t middle = low + (high - low) / 2;
            if (fits(c, &shape, stage, middle))
                low = middle;
            else
                high = middle;
        }
        if (low == 0) {
            if (c->rank == 0)
                printf("  %5d | %11" PRIu64 " | %8" PRIu64 " | %11s | %7s | "
                       "%11s | %9s\n", stage, state, buffer, "-", "-",
                       "none", "-");
            continue;
        }
        const uint64_t total = bound_for_batch(c, &shape, stage, low);
        double speed = samples_per_second(c, data, stage, low);
        if (c->rank == 0)
            printf("  %5d | %11" PRIu64 " | %8" PRIu64 " | %11" PRIu64
                   " | %7" PRIu64 " | %11zu | %9.0f\n", stage, state,
                   buffer, total - state - buffer, total, low, speed);
    }
}

int main(int argc, char **argv)
{
    run_config c = { .steps = 300, .local_batch = 32, .samples = 8192,
                     .held_out = 2048, .stage = 0, .hidden = 2,
                     .width = 128, .features = 64, .classes = 10,
                     .learning_rate = 1e-3, .seed = 1 };
    const cli_option options[] = {
        { "stage", CLI_INT, &c.stage, "ZeRO stage: 0 (plain data parallel), "
          "1, 2 or 3", 0, ZERO_MAX_STAGE },
        { "prefetch", CLI_FLAG, &c.prefetch, "stage 3: gather the next "
          "layer during this one (TODO 5)", 0, 0 },
        { "memory-cap", CLI_SIZE, &c.memory_cap, "bytes each rank may hold "
          "(0: no cap)", 0, 1e15 },
        TRAIN_RUN_OPTIONS(c),
        { "find-batch", CLI_FLAG, &c.find_batch, "with --memory-cap: the "
          "largest batch each stage fits, and its samples per second", 0,
          0 },
    };
    const cli_spec spec = { "train_zero", "lesson 06: mixed-precision "
                            "training under ZeRO stage 0-3", options,
                            sizeof options / sizeof options[0] };
    mpi_start_or_exit(&argc, &argv, &spec, &c.rank, &c.ranks);
    if (c.prefetch && c.stage != 3)
        refuse(&c, "--prefetch is for stage 3, which gathers parameters");
    if (c.find_batch && (c.memory_cap == 0 || c.out != NULL))
        refuse(&c, "--find-batch needs --memory-cap, and writes no report");
    FILE *report = mpi_report_open_or_exit("train_zero", c.out, c.rank);

    /* The ledger names this rank in a refusal, cap or none. */
    memory_ledger_set_cap(MEMORY_LEDGER_NO_CAP, c.rank);
    dataset train_set = { 0 }, held = { 0 };
    train_generate_or_exit("train_zero", c.samples, c.held_out, c.features,
                           c.classes, c.seed, &train_set, &held);
    trainer t = { .config = &c };
    char error[256];
    mlp_config shape = { train_set.features, train_set.classes, c.hidden,
                         c.width, ACTIVATION_RELU };
    /* --find-batch looks for the batch: the cap must hold one sample. */
    if (c.find_batch)
        c.local_batch = 1;
    if (mlp_create_without_storage(&t.model, &shape, c.local_batch, error,
                                   sizeof error) != 0)
        refuse(&c, error);
    check_cap(&c, &t.model);
    if (c.find_batch) {
        /* The model for the flags' batch only served the check above. */
        mlp_free(&t.model);
        memory_ledger_set_cap(c.memory_cap, c.rank);
        find_batch(&c, &train_set);
        train_data_free(&train_set);
        MPI_CHECK(MPI_Finalize());
        return 0;
    }
    if (c.memory_cap != 0)
        memory_ledger_set_cap(c.memory_cap, c.rank);

    const adamw_config adamw = { (float)c.learning_rate, 0.9f, 0.999f, 1e-8f,
                                 (float)c.weight_decay };
    /* The OpenMP runtime allocates its own bookkeeping when it first
     * starts its threads (LLVM's, under clang, some 70 KiB a process):
     * start them now, with a product just large enough to be shared among
     * threads (common/matmul.c), so that this is in the baselines (the
     * heap's and the watch's) and not taken for memory behind the
     * ledger's back. */
    static float warm_a[32 * 33], warm_b[33 * 32], warm_c[32 * 32];
    matmul_ab(32, 32, 33, warm_a, warm_b, warm_c, 0);
    /* From here on your code runs: behind the boundary when graded. */
    const char *const reports[] = { "master", "params",
                                    c.rank == 0 ? "losses" : NULL, NULL };
    mpi_enter_boundary_or_exit("train_zero", report, c.out, c.rank, reports);
    zero_create(&t.zero, c.stage, c.prefetch, &t.model, &adamw);
    t.heap_baseline = memory_ledger_heap_in_use();
    t.ledger_baseline = memory_ledger_current_total();
    allocate_state(&c, &t);
    if (c.rank == 0)
        printf("train_zero: stage %d (%s)%s on %d rank%s x %zu samples a "
               "step, %zu parameters in %d layers\n", c.stage,
               zero_stage_name(c.stage), c.prefetch ? " with prefetch" : "",
               c.ranks, c.ranks == 1 ? "" : "s", c.local_batch,
               t.zero.total, t.zero.layer_count);
    int status = train(&c, &train_set, &held, report, &t, error,
                       sizeof error);
    if (status != 0) {
        fprintf(stderr, "train_zero: %s\n", error);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    if (c.rank == 0)
        printf("rank 0 held at most %zu bytes: parameters %zu, gradients "
               "%zu, optimizer %zu, gathered %zu, buckets %zu, comm %zu, "
               "activations %zu\n", t.peak_total,
               t.peaks[MEMORY_PARAMETERS], t.peaks[MEMORY_GRADIENTS],
               t.peaks[MEMORY_OPTIMIZER], t.peaks[MEMORY_GATHERED],
               t.peaks[MEMORY_BUCKETS], t.peaks[MEMORY_COMM],
               t.peaks[MEMORY_ACTIVATIONS]);
    if (c.rank == 0)
        printf("rank 0 sent %" PRIu64 " bytes a step: %" PRIu64 " as bf16, %"
               PRIu64 " as fp32 partial sums\n", sent_a_step(&t),
               t.traffic.bf16_sent / c.steps, t.traffic.fp32_sent / c.steps);
    free(t.widened);
    zero_destroy(&t.zero);
    mlp_free(&t.model);
    train_data_free(&train_set);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
