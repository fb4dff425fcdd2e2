/* Lesson 06's driver: mixed-precision training under ZeRO stage 0, 1, 2 or
 * 3. Every rank builds the same model shape from the seed, with no storage
 * of its own; your zero.c holds the parameters, gradients and optimizer
 * state, whole or in parts, and the driver calls its hooks around every
 * layer's forward and backward and after them (zero.h). The loop itself is
 * common/train.h's, shared with lessons 05 and 07: the step below is what
 * it runs, every step, on every rank.
 *
 *   scripts/mpirun -np 4 build/student/06-zero/train_zero --stage 3
 *   scripts/mpirun -np 2 build/student/06-zero/train_zero --find-batch --memory-cap 2000000
 *
 * With --out, every rank reports to the tests: the parameters it holds at
 * the end, its own part of the fp32 master weights, the memory ledger's
 * peaks by category, what each kind of hook sent, and with --prefetch
 * what each prefetch left running (the communication ledger, so what your
 * code claims plays no part). With --memory-cap,
 * every allocation past the cap is refused, as a device's memory would
 * (find_batch.c: the bound it is checked against, and --find-batch).
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
#include "comm_ledger.h"
#include "dataset.h"
#include "find_batch.h"
#include "ledger_watch.h"
#include "memory_ledger.h"
#include "mlp.h"
#include "optimizer.h"
#include "report.h"
#include "steps.h"
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
    ledger_watch memory;    /* sampled after every hook */
    float *widened;         /* the parameters held, widened for the report */
} trainer;

/* What the step calls, defined after it: zero.c's hooks, each one's
 * bytes sent counted by what it moves and the memory watched after it;
 * a hook that gives no buffer, a refused layer step and a NaN loss each
 * stop the job with the reason. */
static const bf16 *forward_params(trainer *t, int l);
static void forward_done(trainer *t, int l);
static const bf16 *backward_params(trainer *t, int l, bf16 **grads);
static void backward_done(trainer *t, int l);
static void reduce_sums(trainer *t);
static void update_params(trainer *t, long step);
static void model_ok(trainer *t, int result);
static void loss_ok(trainer *t, float loss, long step);

/* ---- The step ---------------------------------------------------------- */

/* Forward through every layer, each layer's parameters from the hooks. */
static void forward(trainer *t, const float *inputs, size_t batch)
{
    model_ok(t, mlp_set_inputs(&t->model, inputs, batch));
    for (int l = 0; l < t->model.layer_count; l++) {
        model_ok(t, mlp_forward_layer_bf16(&t->model, l,
                                           forward_params(t, l)));
        forward_done(t, l);
    }
}

/* One training step is these three, in this order (train.h's compute,
 * synchronise and update): forward, the loss and backward, layer by
 * layer, each layer's parameters and gradient buffer from zero.c's hooks;
 * the reduction still to do after backward; the optimizer step. */
static float forward_backward(void *context, long step, const float *inputs,
                              const int *labels, size_t batch)
{
    trainer *t = context;
    t->counting = true;
    forward(t, inputs, batch);
    float loss = mlp_loss(&t->model, labels, 1, NULL);
    loss_ok(t, loss, step);
    for (int l = t->model.layer_count - 1; l >= 0; l--) {
        bf16 *grads;
        const bf16 *params = backward_params(t, l, &grads);
        model_ok(t, mlp_backward_layer_bf16(&t->model, l, params, grads));
        backward_done(t, l);
    }
    return loss;
}

static void reduce(void *context, long step)
{
    (void)step;
    reduce_sums(context);
}

static void update(void *context, long step)
{
    trainer *t = context;
    update_params(t, step);
    t->counting = false;
    if (step + 1 == (long)t->config->steps)
        ledger_watch_keep_peaks(&t->memory);
}

/* ---- What the step calls ----------------------------------------------- */

/* Bytes sent since the ledger's last reset. */
static uint64_t sent_so_far(void)
{
    return comm_ledger_total().bytes_sent;
}

/* After each hook: what it sent, into the count of its kind (during
 * training steps), and the memory held (a copy allocated outside the
 * memory ledger shows in the allocator's growth). */
static void count_sent(trainer *t, uint64_t before, uint64_t *kind)
{
    if (t->counting)
        *kind += sent_so_far() - before;
    ledger_watch_sample(&t->memory);
}

/* Stops the job when a hook gave no buffer for layer l. */
static void given_ok(trainer *t, const void *given, const char *hook, int l)
{
    if (given != NULL)
        return;
    char why[320];
    snprintf(why, sizeof why, "%s gave no buffer for layer %d (zero.c)",
             hook, l);
    zero_abort(&t->zero, why);
}

static const bf16 *forward_params(trainer *t, int l)
{
    uint64_t before = sent_so_far();
    const bf16 *params = zero_forward_params(&t->zero, l);
    count_sent(t, before, &t->traffic.bf16_sent);
    given_ok(t, params, "zero_forward_params", l);
    return params;
}

static void forward_done(trainer *t, int l)
{
    uint64_t before = sent_so_far();
    zero_forward_done(&t->zero, l);
    count_sent(t, before, &t->traffic.other_sent);
}

static const bf16 *backward_params(trainer *t, int l, bf16 **grads)
{
    *grads = NULL;
    uint64_t before = sent_so_far();
    const bf16 *params = zero_backward_params(&t->zero, l, grads);
    count_sent(t, before, &t->traffic.bf16_sent);
    given_ok(t, params != NULL && *grads != NULL ? params : NULL,
             "zero_backward_params", l);
    return params;
}

static void backward_done(trainer *t, int l)
{
    uint64_t before = sent_so_far();
    zero_backward_done(&t->zero, l);
    count_sent(t, before, &t->traffic.fp32_sent);
}

static void reduce_sums(trainer *t)
{
    uint64_t before = sent_so_far();
    zero_reduce(&t->zero);
    count_sent(t, before, &t->traffic.fp32_sent);
}

/* After an update, every parameter this rank holds is a number. A NaN one
 * need not reach the loss (a ReLU turns it into 0), and when it does, the
 * loss cannot say which function made it: this names the update that has
 * just run (the step the hooks entered for it). */
static void check_parameters(trainer *t, long step)
{
    const zero_state *z = &t->zero;
    const size_t first = z->stage == 3 ? z->own.begin : 0;
    const size_t count = z->stage == 3 ? z->own.end - z->own.begin
                                       : z->total;
    size_t k = 0;
    while (k < count && (z->params[k] & 0x7fffu) <= 0x7f80u)
        k++;
    if (k == count)
        return;
    int layer = 0;
    while (layer + 1 < z->layer_count &&
           z->layers[layer + 1].begin <= first + k)
        layer++;
    char why[512];
    snprintf(why, sizeof why, "parameter %zu (layer %d) is NaN after step "
             "%ld's update, made in %s: an update that read or wrote past "
             "the elements of a buffer (an own-part buffer indexed with "
             "the whole model's offsets?), or one never filled",
             first + k, layer, step, steps_current());
    zero_abort(&t->zero, why);
}

static void update_params(trainer *t, long step)
{
    uint64_t before = sent_so_far();
    zero_update(&t->zero, step);
    count_sent(t, before, &t->traffic.bf16_sent);
    check_parameters(t, step);
}

/* Stops the job when the model refused a step (out of order, which the
 * driver's order rules out, or a wrong size), with the model's reason. */
static void model_ok(trainer *t, int result)
{
    if (result != 0)
        zero_abort(&t->zero, t->model.error);
}

/* Stops the job on a NaN loss, at step `step` (or, below 0, on the
 * held-out samples). mlp_loss returns NaN for a refusal, with the reason
 * in the model's error, and for a loss that is not a number, with none:
 * then say so, and what makes it. */
static void loss_ok(trainer *t, float loss, long step)
{
    if (!isnan(loss))
        return;
    if (t->model.error[0] != '\0')
        zero_abort(&t->zero, t->model.error);
    char when[64], why[320];
    if (step >= 0)
        snprintf(when, sizeof when, "at step %ld", step);
    else
        snprintf(when, sizeof when, "on the held-out samples");
    snprintf(why, sizeof why, "the loss is NaN %s: a layer computed on "
             "parameters that are not numbers (a gather used before it "
             "completed, or a buffer never filled), or updates that "
             "diverge", when);
    zero_abort(&t->zero, why);
}

/* ---- After the steps: the accuracy and the report ---------------------- */

static size_t classify(void *context, const float *inputs, const int *labels,
                       size_t batch)
{
    trainer *t = context;
    int correct = 0;
    forward(t, inputs, batch);
    loss_ok(t, mlp_loss(&t->model, labels, 0, &correct), -1);
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
    ledger_watch_write_peaks(&t->memory, report);
    fprintf(report, "peak total %zu\n", t->memory.peak_total);
    ledger_watch_write_growth(&t->memory, report);
    /* What the hooks saw after each return of stage3_prefetched (all 0
     * without prefetch): returns, overlapped, waited, unfinished, other
     * bytes. */
    const zero_prefetch_seen seen = zero_prefetch_observed();
    fprintf(report, "prefetch_returns %zu %zu %zu %zu %zu\n", seen.returns,
            seen.overlapped, seen.waited, seen.unfinished, seen.other_bytes);
    /* The own part of the fp32 master weights: every stage keeps it. */
    const float *master = z->master + (z->stage == 0 ? z->own.begin : 0);
    if (report_write_floats(t->config->out, "master", z->rank, master,
                            z->own.end - z->own.begin) != 0)
        zero_abort(&t->zero, "the master weights could not be written");
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
            t->memory.peak_total, sent_a_step(t));
}

/* ---- The run ----------------------------------------------------------- */

/* Allocates and fills the state; if the ledger refuses on any rank, every
 * rank that was refused says why (its own line: rank, category, bytes,
 * cap) and all end with status 2. */
static void allocate_state(const run_config *c, trainer *t)
{
    char why[512];
    bool refused = zero_allocate(&t->zero) != 0;
    snprintf(why, sizeof why, "stage %d does not fit: %s", c->stage,
             memory_ledger_last_error());
    mpi_exit_if_any_each_says(refused, "train_zero", why);
    zero_initialize(&t->zero, c->seed);
}

/* One training run of `c` on the data; the report goes to c->out. */
static void train(const run_config *c, const dataset *train_set,
                  const dataset *held, FILE *report, trainer *t)
{
    const train_steps steps = {
        .context = t,
        .shard = train_shard_interleaved, .shard_name = "the shard of the batch",
        .compute = forward_backward,
        .compute_mark = ZERO_HOOKS_STEP,
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
    train_run_or_exit("train_zero", &setup, &steps);
}

/* Rank 0's closing lines: the most it held, by category, and what it
 * sent a step. */
static void print_totals(const trainer *t)
{
    const size_t *peaks = t->memory.peaks;
    const size_t steps = t->config->steps;
    printf("rank 0 held at most %zu bytes: parameters %zu, gradients %zu, "
           "optimizer %zu, gathered %zu, buckets %zu, comm %zu, activations "
           "%zu\n", t->memory.peak_total, peaks[MEMORY_PARAMETERS],
           peaks[MEMORY_GRADIENTS], peaks[MEMORY_OPTIMIZER],
           peaks[MEMORY_GATHERED], peaks[MEMORY_BUCKETS], peaks[MEMORY_COMM],
           peaks[MEMORY_ACTIVATIONS]);
    printf("rank 0 sent %" PRIu64 " bytes a step: %" PRIu64 " as bf16, %"
           PRIu64 " as fp32 partial sums\n", sent_a_step(t),
           t->traffic.bf16_sent / steps, t->traffic.fp32_sent / steps);
}

/* ---- --find-batch's speed: the step above, timed ---------------------- */

enum { TIMED_ROUNDS = 5, STEPS_A_ROUND = 3 };

/* What samples_per_second trains on. */
typedef struct {
    const run_config *config;
    const dataset *data;
} speed_run;

/* Samples per second of `stage` with local batches of `batch`, under the
 * cap (a batch_speed_fn): one step to warm up, then TIMED_ROUNDS rounds of
 * STEPS_A_ROUND steps, each round the slowest rank's time; the median
 * round (a busy neighbour slows one round, not the median). */
static double samples_per_second(void *context, int stage, size_t batch)
{
    const speed_run *run = context;
    const run_config *c = run->config;
    const dataset *data = run->data;
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

/* The flags, parsed by every rank alike; bad ones end every rank with
 * status 2 (rank 0 says why). */
static void read_flags(run_config *c, int *argc, char ***argv)
{
    const cli_option options[] = {
        { "stage", CLI_INT, &c->stage, "ZeRO stage: 0 (plain data "
          "parallel), 1, 2 or 3", 0, ZERO_MAX_STAGE },
        { "prefetch", CLI_FLAG, &c->prefetch, "stage 3: gather the next "
          "layer during this one (TODO 5)", 0, 0 },
        { "memory-cap", CLI_SIZE, &c->memory_cap, "bytes each rank may "
          "hold (0: no cap)", 0, 1e15 },
        TRAIN_RUN_OPTIONS(*c),
        { "find-batch", CLI_FLAG, &c->find_batch, "with --memory-cap: the "
          "largest batch each stage fits, and its samples per second", 0,
          0 },
    };
    const cli_spec spec = { "train_zero", "lesson 06: mixed-precision "
                            "training under ZeRO stage 0-3", options,
                            sizeof options / sizeof options[0] };
    mpi_start_or_exit(argc, argv, &spec, &c->rank, &c->ranks);
    mpi_exit_if_any(c->prefetch && c->stage != 3, "train_zero",
                    "--prefetch is for stage 3, which gathers parameters");
    mpi_exit_if_any(c->find_batch && (c->memory_cap == 0 || c->out != NULL),
                    "train_zero", "--find-batch needs --memory-cap, and "
                    "writes no report");
}

int main(int argc, char **argv)
{
    run_config c = { .steps = 300, .local_batch = 32, .samples = 8192,
                     .held_out = 2048, .stage = 0, .hidden = 2,
                     .width = 128, .features = 64, .classes = 10,
                     .learning_rate = 1e-3, .seed = 1 };
    read_flags(&c, &argc, &argv);
    FILE *report = mpi_report_open_or_exit("train_zero", c.out, c.rank);

    /* The ledger names this rank in a refusal, cap or none. */
    memory_ledger_set_cap(MEMORY_LEDGER_NO_CAP, c.rank);
    dataset train_set = { 0 }, held = { 0 };
    train_generate_or_exit("train_zero", c.samples, c.held_out, c.features,
                           c.classes, c.seed, &train_set, &held);
    trainer t = { .config = &c };
    char error[256] = "";
    mlp_config shape = { train_set.features, train_set.classes, c.hidden,
                         c.width, ACTIVATION_RELU };
    /* --find-batch looks for the batch: the cap must hold one sample. */
    if (c.find_batch)
        c.local_batch = 1;
    mpi_exit_if_any(mlp_create_without_storage(&t.model, &shape,
                                               c.local_batch, error,
                                               sizeof error) != 0,
                    "train_zero", error);
    cap_check_or_exit(c.memory_cap, c.prefetch, &t.model, c.local_batch,
                      c.ranks, c.rank);
    if (c.find_batch) {
        /* The model for the flags' batch only served the check above. */
        mlp_free(&t.model);
        memory_ledger_set_cap(c.memory_cap, c.rank);
        speed_run run = { &c, &train_set };
        find_batch(&shape, c.memory_cap, c.ranks, c.rank, samples_per_second,
                   &run);
        train_data_free(&train_set);
        MPI_CHECK(MPI_Finalize());
        return 0;
    }
    if (c.memory_cap != 0)
        memory_ledger_set_cap(c.memory_cap, c.rank);

    const adamw_config adamw = { (float)c.learning_rate, 0.9f, 0.999f, 1e-8f,
                                 (float)c.weight_decay };
    ledger_watch_start_threads();
    /* From here on your code runs: behind the boundary when graded. */
    train_enter_boundary_or_exit("train_zero", report, c.out, c.rank,
                                 (const char *const[]){ "master", NULL });
    zero_create(&t.zero, c.stage, c.prefetch, &t.model, &adamw);
    ledger_watch_start(&t.memory, false);
    allocate_state(&c, &t);
    if (c.rank == 0)
        printf("train_zero: stage %d (%s)%s on %d rank%s x %zu samples a "
               "step, %zu parameters in %d layers\n", c.stage,
               zero_stage_name(c.stage), c.prefetch ? " with prefetch" : "",
               c.ranks, c.ranks == 1 ? "" : "s", c.local_batch,
               t.zero.total, t.zero.layer_count);
    train(&c, &train_set, &held, report, &t);
    if (c.rank == 0)
        print_totals(&t);
    free(t.widened);
    zero_destroy(&t.zero);
    mlp_free(&t.model);
    train_data_free(&train_set);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
