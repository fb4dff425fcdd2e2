/* Lesson 06's memory calculator: how many bytes of model state each
 * data-parallel rank holds at each ZeRO stage, and how many devices each
 * stage needs, by the formulas of the ZeRO paper (Rajbhandari et al.,
 * arXiv 1910.02054; common/zero_memory.h). The table is laid out like
 * DeepSpeed's estimate_zero2/zero3 model-state estimators, with one column
 * per stage. Model states only: activations, buffers and fragmentation come
 * on top, so a "fits" here is necessary, not sufficient. With --offload a
 * second table gives ZeRO-Offload's bytes per rank, on the device and on
 * the host, like DeepSpeed's estimators with offload_optimizer (lesson 07
 * builds it). GB here is 10^9 bytes, as in the paper. You do not need to
 * change this file.
 *
 * Lesson 08 adds tensor parallelism: --tp T divides the model by t
 * before ZeRO's tables (each rank of a t-way group holds 1/t of every
 * split weight); --mlp gives the exact bytes of lesson 08's own model per
 * rank, and --transformer the activations of one transformer layer by
 * the formula Megatron-LM's authors publish (common/tensor_memory.h).
 *
 *     memory_calculator --params 7.5B --ranks 64     Figure 1 of the paper
 *     memory_calculator --offload --ranks 1          7.5B on one device
 *     memory_calculator --talk                       the opening arithmetic
 *     memory_calculator --mlp 2,128,32 --tp 1,2,4    lesson 08's model
 *     memory_calculator --transformer 2048,1,12288,96 --tp 8
 *
 * Lesson 09 adds pipeline parallelism: --mlp with --pipeline P gives each
 * stage's layers (the rule of lesson 09's TODO 1), its model state and
 * the activations it holds at its peak, by the micro-batches in flight
 * that the schedule keeps there (--micro-batches, --schedule, --chunks).
 *
 *     memory_calculator --mlp 3,128,32 --pipeline 4 --micro-batches 8
 *
 * Lesson 10 adds the planner: --plan lists every layout (tp, pp, dp,
 * ZeRO stage) of a transformer on --devices, --per-host of them a host,
 * that fits a device, with what the device holding the most holds and
 * what each axis sends a step, sorted by the bytes that cross hosts
 * (common/parallel_plan.h has the formulas).
 *
 *     memory_calculator --plan --params 100B --transformer 2048,1,10240,80
 *                       --devices 64 --per-host 8 --micro-batches 8 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parallel_plan.h"
#include "tensor_memory.h"
#include "zero_memory.h"

enum { MAX_RANK_COUNTS = 32 };
#define MAX_PARAMETERS 1e15 /* a thousand trillion: far past any model */
#define GB 1e9

/* A parameter count: digits, an optional fraction, and an optional suffix
 * k, M, B (or G) or T for 10^3, 10^6, 10^9, 10^12: "7500000000", "7.5B",
 * "1T". Read digit by digit, not through a double, so that "7.5B" is
 * exactly 7 500 000 000; a count that is not whole ("1.5") is refused.
 * Returns false for anything else. */
static bool parse_parameter_count(const char *text, uint64_t *count)
{
    uint64_t whole = 0, fraction = 0, fraction_scale = 1;
    const char *p = text;
    if (!isdigit((unsigned char)*p))
        return false;
    for (; isdigit((unsigned char)*p); p++) {
        if (whole > (uint64_t)MAX_PARAMETERS)
            return false;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return false;
        for (; isdigit((unsigned char)*p); p++) {
            if (fraction_scale >= UINT64_C(1000000000000000))
                return false; /* 15 digits: more than any suffix makes whole */
            fraction = fraction * 10 + (uint64_t)(*p - '0');
            fraction_scale *= 10;
        }
        /* "7.50B" is "7.5B". */
        while (fraction_scale > 1 && fraction % 10 == 0) {
            fraction /= 10;
            fraction_scale /= 10;
        }
    }
    uint64_t unit = 1;
    switch (*p) {
    case '\0':
        break;
    case 'k': case 'K':
        unit = UINT64_C(1000);
        p++;
        break;
    case 'M':
        unit = UINT64_C(1000000);
        p++;
        break;
    case 'B': case 'G':
        unit = UINT64_C(1000000000);
        p++;
        break;
    case 'T':
        unit = UINT64_C(1000000000000);
        p++;
        break;
    default:
        return false;
    }
    if (*p != '\0' || whole > (uint64_t)MAX_PARAMETERS / unit)
        return false;
    /* fraction/fraction_scale of a unit is whole when the fraction has no
     * more digits than the unit has zeros (both are powers of ten). */
    if (fraction_scale > unit)
        return false;
    *count = whole * unit + fraction * (unit / fraction_scale);
    return *count >= 1 && *count <= (uint64_t)MAX_PARAMETERS;
}

/* "1,4,16,64": each count 1 .. 2^30, at most MAX_RANK_COUNTS of them. */
static bool parse_rank_list(const char *text, uint64_t *ranks, int *count)
{
    *count = 0;
    const char *p = text;
    for (;;) {
        if (!isdigit((unsigned char)*p) || *count == MAX_RANK_COUNTS)
            return false;
        uint64_t value = 0;
        for (; isdigit((unsigned char)*p); p++) {
            value = value * 10 + (uint64_t)(*p - '0');
            if (value > (UINT64_C(1) << 30))
                return false;
        }
        if (value == 0)
            return false;
        ranks[(*count)++] = value;
        if (*p == '\0')
            return true;
        if (*p++ != ',')
            return false;
    }
}

/* Exactly `want` whole numbers from `least` to 2^40, separated by commas,
 * into values; false for anything else. */
static bool parse_numbers(const char *text, int want, uint64_t least,
                          uint64_t *values)
{
    const char *p = text;
    for (int k = 0; k < want; k++) {
        if (!isdigit((unsigned char)*p))
            return false;
        uint64_t value = 0;
        for (; isdigit((unsigned char)*p); p++) {
            value = value * 10 + (uint64_t)(*p - '0');
            if (value > (UINT64_C(1) << 40))
                return false;
        }
        if (value < least)
            return false;
        values[k] = value;
        if (*p++ != (k + 1 == want ? '\0' : ','))
            return false;
    }
    return true;
}

/* "7.5B", "128B", "1T", "60M": a count as people say it. */
static void format_count(uint64_t count, char *buf, size_t len)
{
    static const struct { double unit; const char *suffix; } units[] = {
        { 1e12, "T" }, { 1e9, "B" }, { 1e6, "M" }, { 1e3, "k" },
    };
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
        if ((double)count >= units[k].unit) {
            snprintf(buf, len, "%.4g%s", (double)count / units[k].unit,
                     units[k].suffix);
            return;
        }
    snprintf(buf, len, "%" PRIu64, count);
}

/* Stops the program on the library's refusal, which the checks on the
 * flags should have made impossible. */
static void or_exit(int rc, const char *error)
{
    if (rc < 0) {
        fprintf(stderr, "memory_calculator: %s\n", error);
        exit(2);
    }
}

/* One line: the devices one stage needs, or why none are enough. */
static void print_devices_needed(const zero_model *model, int stage,
                                 uint64_t capacity)
{
    char error[256];
    uint64_t devices;
    int rc = zero_devices_needed(model, stage, capacity, &devices, error,
                                 sizeof error);
    or_exit(rc, error);
    printf("  stage %d %-9s ", stage, zero_stage_name(stage));
    if (rc == ZERO_NEVER_FITS) {
        zero_bytes any;
        or_exit(zero_bytes_per_rank(model, stage, 1, &any, error,
                                    sizeof error), error);
        printf("   none: the %.2fGB every rank keeps whole does not leave "
               "room\n", (double)any.replicated / GB);
        return;
    }
    zero_bytes there;
    or_exit(zero_bytes_per_rank(model, stage, devices, &there, error,
                                sizeof error), error);
    printf("%7" PRIu64 "  (%.2fGB each)\n", devices,
           zero_bytes_value(there) / GB);
}

/* ZeRO-Offload's bytes per rank, for each count of ranks: the device's,
 * and the host's in three columns, without and with the delayed parameter
 * update. */
static void print_offload_table(const zero_model *model, const char *precision,
                                const uint64_t *ranks, int rank_counts)
{
    char error[256];
    printf("\nZeRO-Offload (lesson 07), per rank: stage 2's partition, with "
           "the optimizer's\nstate and step on the host. The device keeps "
           "the %s parameters whole, %" PRIu64 "\nbytes each. The host keeps "
           "the optimizer state of the rank's slice, K = %" PRIu64 "\nbytes "
           "a parameter, and stages the slice's gradients down and new "
           "parameters\nup, %" PRIu64 " + %" PRIu64 " bytes: what crosses "
           "the bus each step. The delayed parameter\nupdate (DPU) stages "
           "two steps' gradients. Gradients in flight on the device\nare "
           "not counted; a host serving several ranks holds the sum of "
           "theirs.\n\n",
           precision, model->parameter_bytes, model->optimizer_bytes,
           model->gradient_bytes, model->parameter_bytes);
    printf("       Nd |   device   |    host    |    host    |    host    |"
           "    host    |\n");
    printf("          | parameters |  optimizer |    staging |      total |"
           " total, DPU |\n");
    for (int row = 0; row < rank_counts; row++) {
        zero_offload_bytes plain, delayed;
        or_exit(zero_offload_bytes_per_rank(model, ranks[row], false, &plain,
                                            error, sizeof error), error);
        or_exit(zero_offload_bytes_per_rank(model, ranks[row], true, &delayed,
                                            error, sizeof error), error);
        const zero_bytes cells[] = { plain.device, plain.host_optimizer,
                                     plain.host_staging, plain.host,
                                     delayed.host };
        printf(" %8" PRIu64 " |", ranks[row]);
        for (size_t k = 0; k < sizeof cells / sizeof cells[0]; k++)
            printf(" %8.2fGB |", zero_bytes_value(cells[k]) / GB);
        printf("\n");
    }
}

/* The devices line for offload: its device bytes do not shrink with more
 * ranks, so one device is enough or none is. */
static void print_offload_devices_needed(const zero_model *model,
                                         uint64_t capacity)
{
    char error[256];
    zero_offload_bytes one;
    or_exit(zero_offload_bytes_per_rank(model, 1, false, &one, error,
                                        sizeof error), error);
    printf("  offload %-9s ", "to host");
    if (!zero_bytes_fit(one.device, capacity)) {
        printf("   none: the %.2fGB of parameters every device keeps is "
               "more than it holds\n", zero_bytes_value(one.device) / GB);
        return;
    }
    printf("%7d  (%.2fGB each, and %.2fGB on the host)\n", 1,
           zero_bytes_value(one.device) / GB, zero_bytes_value(one.host) / GB);
}

static void print_table(const zero_model *model, const char *precision,
                        const uint64_t *ranks, int rank_counts,
                        uint64_t capacity, double device_gb, bool offload)
{
    char count[32], error[256];
    format_count(model->parameters, count, sizeof count);
    printf("Memory for the model states (parameters, gradients, optimizer "
           "state)\nper rank, by the ZeRO paper's formulas, for a model "
           "with %s parameters (%" PRIu64 "):\n%s parameters and "
           "gradients (%" PRIu64 " + %" PRIu64 " bytes), K = %" PRIu64
           " bytes of optimizer state each.\n", count, model->parameters,
           precision, model->parameter_bytes, model->gradient_bytes,
           model->optimizer_bytes);
    printf("GB = 10^9 bytes. Activations and buffers not included.\n\n");
    printf("       Nd |");
    for (int stage = 0; stage < ZERO_STAGES; stage++)
        printf("   stage %d  |", stage);
    printf("\n          |");
    for (int stage = 0; stage < ZERO_STAGES; stage++)
        printf(" %10s |", zero_stage_name(stage));
    printf("\n");
    for (int row = 0; row < rank_counts; row++) {
        printf(" %8" PRIu64 " |", ranks[row]);
        for (int stage = 0; stage < ZERO_STAGES; stage++) {
            zero_bytes bytes;
            or_exit(zero_bytes_per_rank(model, stage, ranks[row], &bytes,
                                        error, sizeof error), error);
            printf(" %8.2fGB |", zero_bytes_value(bytes) / GB);
        }
        printf("\n");
    }
    if (offload)
        print_offload_table(model, precision, ranks, rank_counts);
    printf("\nDevices of %gGB each stage needs (the fewest ranks whose model "
           "states fit):\n", device_gb);
    for (int stage = 0; stage < ZERO_STAGES; stage++)
        print_devices_needed(model, stage, capacity);
    if (offload)
        print_offload_devices_needed(model, capacity);
}

/* The talk's opening: what 10B, 100B and 1T parameters weigh in fp32, then
 * what training them takes, against one 141 GB H200. */
static void print_talk(void)
{
    static const uint64_t sizes[] = { UINT64_C(10000000000),
                                      UINT64_C(100000000000),
                                      UINT64_C(1000000000000) };
    const uint64_t h200 = UINT64_C(141000000000);
    char count[32], error[256];
    printf("One H200 holds 141GB. In fp32 a parameter is 4 bytes, so the "
           "weights alone of\n");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        zero_model weights = { sizes[k], 4, 0, 0 };
        zero_bytes bytes;
        uint64_t devices;
        or_exit(zero_bytes_per_rank(&weights, 0, 1, &bytes, error,
                                    sizeof error), error);
        /* Weights spread over devices: the stage that partitions them. */
        or_exit(zero_devices_needed(&weights, 3, h200, &devices, error,
                                    sizeof error), error);
        format_count(sizes[k], count, sizeof count);
        printf("  %4s parameters are %5.0fGB: %s\n", count,
               zero_bytes_value(bytes) / GB,
               devices == 1 ? "they fit on one H200"
                            : "more than one H200 can hold");
        if (devices > 1)
            printf("                             (%" PRIu64 " H200s just to "
                   "hold them)\n", devices);
    }
    printf("\nTraining needs more than the weights: with mixed-precision "
           "Adam, 2 bytes of\nparameter, 2 of gradient and 12 of optimizer "
           "state, 16 bytes per parameter.\nH200s each ZeRO stage needs for "
           "those model states:\n\n");
    printf("  parameters | model states | stage 0 | stage 1 | stage 2 | "
           "stage 3 |\n");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        zero_model model = { sizes[k], 2, 2, 12 };
        zero_bytes bytes;
        or_exit(zero_bytes_per_rank(&model, 0, 1, &bytes, error,
                                    sizeof error), error);
        format_count(sizes[k], count, sizeof count);
        printf("  %10s | %10.0fGB |", count, zero_bytes_value(bytes) / GB);
        for (int stage = 0; stage < ZERO_STAGES; stage++) {
            uint64_t devices;
            int rc = zero_devices_needed(&model, stage, h200, &devices, error,
                                         sizeof error);
            or_exit(rc, error);
            if (rc == ZERO_NEVER_FITS)
                printf(" %7s |", "none");
            else
                printf(" %7" PRIu64 " |", devices);
        }
        printf("\n");
    }
    printf("\n(none: what every rank keeps whole at that stage, 16, 4 or 2 "
           "bytes per\nparameter, is more than one H200 holds, however many "
           "there are.)\n");
}

/* Lesson 08's model on t tensor-parallel ranks: rank 0's bytes (it holds
 * the largest parts), plain and with sequence parallelism. */
static void print_mlp_table(const uint64_t shape_values[3],
                            const uint64_t *ranks, int rank_counts,
                            bool parallel_loss)
{
    const tensor_mlp_shape shape = { 64, 10, shape_values[0],
                                     shape_values[1], shape_values[2] };
    char error[256];
    printf("Lesson 08's model on t tensor-parallel ranks: %" PRIu64 " hidden "
           "layer%s of %" PRIu64 ",\n64 features, 10 classes%s, batches of "
           "%" PRIu64 ". The bytes rank 0 holds (the largest\nparts), as "
           "train_tp's memory ledger counts them: fp32 parameters and\n"
           "gradients, AdamW's m and v; the activations of the given code, "
           "without and\nwith sequence parallelism (-: the batch is not a "
           "multiple of t).\n\n", shape.hidden, shape.hidden == 1 ? "" : "s",
           shape.width, parallel_loss ? " (the output layer split by class)"
                                      : "", shape.batch);
    printf("        t | parameters |  gradients |  optimizer | activations "
           "| activations, sequence-parallel\n");
    for (int row = 0; row < rank_counts; row++) {
        tensor_mlp_bytes plain, sp;
        or_exit(tensor_mlp_rank_bytes(&shape, ranks[row], 0, false,
                                      parallel_loss, &plain, error,
                                      sizeof error), error);
        printf(" %8" PRIu64 " | %10" PRIu64 " | %10" PRIu64 " | %10" PRIu64
               " | %11" PRIu64 " | ", ranks[row], plain.parameters,
               plain.gradients, plain.optimizer, plain.activations);
        if (shape.batch % ranks[row] == 0) {
            or_exit(tensor_mlp_rank_bytes(&shape, ranks[row], 0, true,
                                          parallel_loss, &sp, error,
                                          sizeof error), error);
            printf("%" PRIu64 "\n", sp.activations);
        } else
            printf("-\n");
    }
}

/* Lesson 09's pipeline of P stages (v chunks a rank) over lesson 08's
 * model: the stages' boundaries by the rule of TODO 1 (boundary s is the
 * layer whose parameters before it are nearest s / S of all, after
 * boundary s - 1 and leaving a layer to each stage after it). */
static void pipeline_bounds(const uint64_t shape[3], int stages, int *bounds)
{
    const int layers = (int)shape[0] + 1;
    uint64_t before[66] = { 0 };
    for (int l = 0; l < layers; l++)
        before[l + 1] = before[l] +
                        (l == layers - 1 ? 10 : shape[1]) *
                            ((l == 0 ? 64 : shape[1]) + 1);
    bounds[0] = 0;
    bounds[stages] = layers;
    for (int s = 1; s < stages; s++) {
        const uint64_t target = before[layers] * (uint64_t)s;
        int best = bounds[s - 1] + 1;
        for (int l = best; l <= layers - (stages - s); l++) {
            const uint64_t a = before[l] * (uint64_t)stages;
            const uint64_t b = before[best] * (uint64_t)stages;
            const uint64_t d = a > target ? a - target : target - a;
            const uint64_t db = b > target ? b - target : target - b;
            if (d < db)
                best = l;
        }
        bounds[s] = best;
    }
}

/* Each stage's bytes: its layers' fp32 parameters, gradients and AdamW's
 * m and v (16 bytes a parameter), and its activations at their peak, as
 * train_pp's ledger counts them: the step's batch of inputs, each chunk's
 * two backward buffers, and the micro-batches in flight at once (GPipe:
 * m; 1F1B: min(m, p - r); interleaved: 2 (p - r - 1) + (v - 1) p + 1, or
 * all v m when m = p, each of them counted as the chunk that keeps the
 * most: a bound), each its input and every layer's two outputs. */
static void print_pipeline_table(const uint64_t shape[3], int ranks,
                                 int micro_batches, const char *schedule,
                                 int chunks)
{
    const int stages = ranks * chunks, m = micro_batches;
    const uint64_t rows = shape[2] / (uint64_t)m, width = shape[1];
    const int layers = (int)shape[0] + 1;
    const bool interleaved = strcmp(schedule, "interleaved") == 0;
    int bounds[66];
    pipeline_bounds(shape, stages, bounds);
    printf("Lesson 09's pipeline: %" PRIu64 " hidden layer%s of %" PRIu64
           ", 64 features, 10 classes, on %d stage%s%s,\n%s, %d micro-"
           "batches of %" PRIu64 " samples. The bytes each rank holds, as "
           "train_pp's\nmemory ledger counts them%s.\n\n", shape[0],
           shape[0] == 1 ? "" : "s", width, ranks, ranks == 1 ? "" : "s",
           chunks > 1 ? " of several chunks" : "", schedule, m, rows,
           interleaved ? " (the activations: a bound)" : "");
    printf("     rank | layers      | model state | in flight | "
           "activations\n");
    for (int r = 0; r < ranks; r++) {
        uint64_t parameters = 0, fixed = shape[2] * 64, most_saved = 0;
        char held[64] = "";
        size_t used = 0;
        for (int c = 0; c < chunks; c++) {
            const int s = c * ranks + r;
            uint64_t widest = 0, saved = rows * (bounds[s] == 0 ? 64 : width);
            for (int l = bounds[s]; l < bounds[s + 1]; l++) {
                const uint64_t in = l == 0 ? 64 : width;
                const uint64_t out = l == layers - 1 ? 10 : width;
                parameters += out * (in + 1);
                saved += 2 * rows * out;
                widest = in > widest ? in : widest;
                widest = out > widest ? out : widest;
            }
            fixed += 2 * rows * widest;
            most_saved = saved > most_saved ? saved : most_saved;
            int n = snprintf(held + used, sizeof held - used, "%s%d-%d",
                             c > 0 ? "," : "", bounds[s], bounds[s + 1] - 1);
            if (n > 0 && (size_t)n < sizeof held - used)
                used += (size_t)n;
        }
        int in_flight = m;
        if (strcmp(schedule, "1f1b") == 0)
            in_flight = ranks - r < m ? ranks - r : m;
        else if (interleaved) {
            const int total = chunks * m;
            const int warm = 2 * (ranks - r - 1) + (chunks - 1) * ranks;
            in_flight = m == ranks || warm >= total ? total : warm + 1;
        }
        printf(" %8d | %-11s | %11" PRIu64 " | %9d | %" PRIu64 "\n", r, held,
               16 * parameters, in_flight,
               4 * (fixed + (uint64_t)in_flight * most_saved));
    }
}

/* One transformer layer's activations per rank, by Korthikanti et al.'s
 * formula, without parallelism, with tensor parallelism and with sequence
 * parallelism too. */
static void print_transformer_table(const uint64_t values[4],
                                    const uint64_t *ranks, int rank_counts)
{
    const transformer_shape shape = { values[0], values[1], values[2],
                                      values[3] };
    char error[256];
    printf("Activations one transformer layer keeps for backward, per rank "
           "(Korthikanti\net al. 2022, arXiv 2205.05198): sequence %" PRIu64
           ", micro-batch %" PRIu64 ",\nhidden %" PRIu64 ", %" PRIu64
           " heads, 16-bit. Bytes:\n\n", shape.sequence, shape.micro_batch,
           shape.hidden, shape.heads);
    printf("        t |         none |       tensor | tensor + sequence\n");
    static const tensor_parallelism kinds[] = { TENSOR_NONE, TENSOR_PARALLEL,
                                                TENSOR_SEQUENCE_PARALLEL };
    for (int row = 0; row < rank_counts; row++) {
        printf(" %8" PRIu64 " |", ranks[row]);
        for (int k = 0; k < 3; k++) {
            zero_bytes bytes;
            or_exit(transformer_activation_bytes(&shape, kinds[k],
                                                 ranks[row], &bytes, error,
                                                 sizeof error), error);
            printf(k < 2 ? " %12.0f |" : " %.0f\n", zero_bytes_value(bytes));
        }
    }
}

/* An amount of the planner's table: in GB to two decimals in `width`
 * characters, or in whole bytes. */
static void print_amount(uint64_t bytes, int width, bool in_bytes)
{
    if (in_bytes)
        printf(" %*" PRIu64, width, bytes);
    else
        printf(" %*.2f", width, (double)bytes / GB);
}

/* The planner's table: the first `top` layouts that fit, in GB or, with
 * `in_bytes`, in whole bytes (what the tests compare). */
static void print_plan_table(const plan_model *model,
                             const plan_cluster *cluster, double device_gb,
                             bool layers_given, size_t top, bool in_bytes)
{
    plan_layout *layouts = malloc((top ? top : 1) * sizeof *layouts);
    or_exit(layouts == NULL ? -1 : 0, "no memory for the layouts");
    size_t count;
    char error[256], params[32];
    or_exit(plan_layouts(model, cluster, layouts, top, &count, error,
                         sizeof error), error);
    format_count(model->parameters, params, sizeof params);
    const transformer_shape *shape = &model->shape;
    printf("Layouts of %s parameters on %" PRIu64 " devices, %" PRIu64
           " a host, %g GB each:\na transformer of %" PRIu64 " layers%s, "
           "hidden size %" PRIu64 ", %" PRIu64 " heads;\n%" PRIu64
           " micro-batches a step of %" PRIu64 " x %" PRIu64 " tokens, "
           "%s; %" PRIu64 " + %" PRIu64 " + %" PRIu64 " bytes a parameter.\n"
           "For the device that holds the most: model state, activations "
           "and the two\ntogether, and what each axis sends a step, in %s "
           "(the formulas:\ncommon/parallel_plan.h). * marks an axis whose "
           "groups span two hosts;\ncrossing adds those up.\n\n",
           params, cluster->devices, cluster->per_host, device_gb,
           model->layers, layers_given ? "" : " (parameters / 12 h^2)",
           shape->hidden, shape->heads, model->micro_batches,
           shape->micro_batch, shape->sequence,
           model->gpipe ? "GPipe" : "1F1B", model->parameter_bytes,
           model->gradient_bytes, model->optimizer_bytes,
           in_bytes ? "bytes" : "GB");
    printf("  tp  pp  dp ZeRO |   state  activ.    held | tp sent pp sent "
           "dp sent | crossing\n");
    for (size_t k = 0; k < count && k < top; k++) {
        const plan_layout *l = &layouts[k];
        printf(" %3" PRIu64 " %3" PRIu64 " %3" PRIu64 " %4d |", l->tp,
               l->pp, l->dp, l->stage);
        print_amount(l->state, 7, in_bytes);
        print_amount(l->activations, 7, in_bytes);
        print_amount(l->state + l->activations, 7, in_bytes);
        printf(" |");
        for (int axis = 0; axis < PLAN_AXES; axis++) {
            print_amount(l->sent[axis], 6, in_bytes);
            putchar(l->crosses[axis] ? '*' : ' ');
        }
        printf("|");
        print_amount(l->crossing, 8, in_bytes);
        putchar('\n');
    }
    if (count == 0)
        printf("(none: no layout of these devices holds the model: more "
               "devices, smaller\nmicro-batches, or a larger device)\n");
    else if (count > top)
        printf("%zu layouts fit; the first %zu are shown (--top).\n", count,
               top);
    else
        printf("%zu layout%s fit%s.\n", count, count == 1 ? "" : "s",
               count == 1 ? "s" : "");
    free(layouts);
}

int main(int argc, char **argv)
{
    const char *params_text = "7.5B";
    const char *ranks_text = "1,4,16,64,256,1024";
    const char *precision = "bf16";
    size_t optimizer_bytes = 12;
    double device_gb = 141.0;
    bool talk = false, offload = false, parallel_loss = false;
    const char *tp_text = NULL, *mlp_text = NULL, *transformer_text = NULL;
    int pipeline = 0, micro_batches = 4, chunks = 1;
    const char *schedule = "1f1b";
    bool plan = false;
    size_t devices = 64, per_host = 8, plan_layers = 0, top = 20;
    bool plan_bytes = false;
    const cli_option options[] = {
        { "params", CLI_STRING, &params_text,
          "parameters: a count, or with k, M, B or T (7.5B, 1T)", 0, 0 },
        { "ranks", CLI_STRING, &ranks_text,
          "data-parallel ranks Nd, a list (1,4,16)", 0, 0 },
        { "k", CLI_SIZE, &optimizer_bytes,
          "bytes of optimizer state per parameter (12: mixed-precision "
          "Adam; 8: fp32 Adam)", 0, 1024 },
        { "precision", CLI_STRING, &precision,
          "of parameters and gradients: fp16, bf16 (2 bytes) or fp32 (4)",
          0, 0 },
        { "device-gb", CLI_DOUBLE, &device_gb,
          "memory of one device in GB (10^9 bytes; 141: one H200)", 0.001,
          1e6 },
        { "offload", CLI_FLAG, &offload,
          "also ZeRO-Offload's bytes per rank: the device's and the host's "
          "(lesson 07)", 0, 0 },
        { "talk", CLI_FLAG, &talk,
          "the opening arithmetic instead: 10B, 100B, 1T parameters "
          "against one H200 (other flags unused)", 0, 0 },
        { "tp", CLI_STRING, &tp_text,
          "tensor-parallel ranks t, a list (lesson 08): with --params, the "
          "tables for one t, each rank's 1/t of the model", 0, 0 },
        { "mlp", CLI_STRING, &mlp_text,
          "HIDDEN,WIDTH,BATCH: lesson 08's model instead, its bytes per "
          "rank for each t of --tp", 0, 0 },
        { "parallel-loss", CLI_FLAG, &parallel_loss,
          "with --mlp: the output layer split by class", 0, 0 },
        { "pipeline", CLI_INT, &pipeline,
          "P stages (lesson 09): with --mlp, each stage's layers, model "
          "state and peak activations", 0, 64 },
        { "micro-batches", CLI_INT, &micro_batches,
          "with --pipeline or --plan: micro-batches a step", 1, 1 << 16 },
        { "schedule", CLI_STRING, &schedule,
          "with --pipeline: gpipe, 1f1b or interleaved (--plan: gpipe or "
          "1f1b)", 0, 0 },
        { "chunks", CLI_INT, &chunks,
          "with --pipeline --schedule interleaved: chunks a rank", 1, 64 },
        { "transformer", CLI_STRING, &transformer_text,
          "S,B,H,A: one transformer layer's activations instead, for each "
          "t of --tp", 0, 0 },
        { "plan", CLI_FLAG, &plan,
          "the planner (lesson 10): every layout of --params with "
          "--transformer's shape on --devices that fits --device-gb", 0, 0 },
        { "devices", CLI_SIZE, &devices,
          "with --plan: devices in all", 1, 65536 },
        { "per-host", CLI_SIZE, &per_host,
          "with --plan: devices a host", 1, 65536 },
        { "layers", CLI_SIZE, &plan_layers,
          "with --plan: transformer layers (0: parameters / 12 h^2)", 0,
          1 << 20 },
        { "top", CLI_SIZE, &top, "with --plan: layouts shown at most", 1,
          10000 },
        { "bytes", CLI_FLAG, &plan_bytes,
          "with --plan: whole bytes instead of GB", 0, 0 },
    };
    const cli_spec spec = { "memory_calculator", "lesson 06: model-state "
                            "bytes per rank at each ZeRO stage, and the "
                            "devices each stage needs", options,
                            sizeof options / sizeof options[0] };
    char error[256];
    int result = cli_parse(&spec, argc, argv, error, sizeof error);

    uint64_t parameters = 0, ranks[MAX_RANK_COUNTS], tp[MAX_RANK_COUNTS];
    uint64_t mlp[3], transformer[4];
    int rank_counts = 0, tp_counts = 0;
    uint64_t precision_bytes = 0;
    if (result == CLI_OK) {
        if (strcmp(precision, "fp16") == 0 || strcmp(precision, "bf16") == 0)
            precision_bytes = 2;
        else if (strcmp(precision, "fp32") == 0)
            precision_bytes = 4;
        if (!parse_parameter_count(params_text, &parameters)) {
            snprintf(error, sizeof error, "--params needs a whole count of "
                     "parameters up to 10^15, such as 7500000000, 7.5B or "
                     "1T, got '%s'", params_text);
            result = CLI_ERROR;
        } else if (!parse_rank_list(ranks_text, ranks, &rank_counts)) {
            snprintf(error, sizeof error, "--ranks needs a list of up to %d "
                     "whole numbers from 1 to 2^30, such as 1,4,16, got '%s'",
                     MAX_RANK_COUNTS, ranks_text);
            result = CLI_ERROR;
        } else if (precision_bytes == 0) {
            snprintf(error, sizeof error, "--precision must be fp16, bf16 or "
                     "fp32, got '%s'", precision);
            result = CLI_ERROR;
        } else if (!parse_rank_list(tp_text != NULL ? tp_text : "1,2,4,8",
                                    tp, &tp_counts)) {
            snprintf(error, sizeof error, "--tp needs a list of up to %d "
                     "whole numbers from 1 to 2^30, such as 1,2,4, got '%s'",
                     MAX_RANK_COUNTS, tp_text);
            result = CLI_ERROR;
        } else if (mlp_text != NULL &&
                   (!parse_numbers(mlp_text, 3, 0, mlp) || mlp[0] > 64 ||
                    mlp[1] == 0 || mlp[2] == 0)) {
            snprintf(error, sizeof error, "--mlp needs HIDDEN,WIDTH,BATCH: "
                     "0 to 64 hidden layers, a width and a batch of at "
                     "least 1, got '%s'", mlp_text);
            result = CLI_ERROR;
        } else if (transformer_text != NULL &&
                   !parse_numbers(transformer_text, 4, 1, transformer)) {
            snprintf(error, sizeof error, "--transformer needs S,B,H,A: "
                     "sequence, micro-batch, hidden size and heads, each "
                     "at least 1, got '%s'", transformer_text);
            result = CLI_ERROR;
        } else if (tp_text != NULL && tp_counts > 1 && mlp_text == NULL &&
                   transformer_text == NULL) {
            snprintf(error, sizeof error, "--tp with the ZeRO tables takes "
                     "one t, got '%s' (a list is for --mlp or "
                     "--transformer)", tp_text);
            result = CLI_ERROR;
        } else if (pipeline > 0 &&
                   (mlp_text == NULL ||
                    (strcmp(schedule, "gpipe") != 0 &&
                     strcmp(schedule, "1f1b") != 0 &&
                     strcmp(schedule, "interleaved") != 0) ||
                    (chunks > 1 && strcmp(schedule, "interleaved") != 0) ||
                    (uint64_t)(pipeline * chunks) > mlp[0] + 1 ||
                    mlp[2] % (uint64_t)micro_batches != 0)) {
            snprintf(error, sizeof error, "--pipeline needs --mlp, a "
                     "--schedule of gpipe, 1f1b or interleaved (--chunks "
                     "only with interleaved), no more stages times chunks "
                     "than layers, and a batch that --micro-batches "
                     "divides");
            result = CLI_ERROR;
        } else if (plan && (transformer_text == NULL || tp_text != NULL ||
                            mlp_text != NULL || pipeline > 0 ||
                            (strcmp(schedule, "gpipe") != 0 &&
                             strcmp(schedule, "1f1b") != 0))) {
            snprintf(error, sizeof error, "--plan needs --transformer "
                     "S,B,H,A (its micro-batch's shape), a --schedule of "
                     "gpipe or 1f1b, and no --tp, --mlp or --pipeline (it "
                     "tries every tp and pp itself)");
            result = CLI_ERROR;
        } else if (parallel_loss && (mlp_text == NULL || mlp[0] % 2 != 0)) {
            snprintf(error, sizeof error, "--parallel-loss is for --mlp with "
                     "an even number of hidden layers (the output layer "
                     "left over after the pairs)");
            result = CLI_ERROR;
        }
    }
    int status = cli_report(&spec, result, error, false);
    if (status >= 0)
        return status;

    if (talk) {
        print_talk();
        return 0;
    }
    if (plan) {
        /* L from Ψ = 12 L h², a transformer layer's weights (4h² in
         * attention, 8h² in the MLP), when not given. */
        const double h = (double)transformer[2];
        uint64_t layers = plan_layers;
        if (layers == 0) {
            const double estimate = (double)parameters / (12 * h * h);
            layers = estimate < 1 ? 1 : (uint64_t)llround(estimate);
        }
        const plan_model model = {
            parameters, layers,
            { transformer[0], transformer[1], transformer[2],
              transformer[3] },
            (uint64_t)micro_batches, strcmp(schedule, "gpipe") == 0,
            precision_bytes, precision_bytes, optimizer_bytes
        };
        const plan_cluster cluster = { devices, per_host,
                                       (uint64_t)llround(device_gb * GB) };
        print_plan_table(&model, &cluster, device_gb, plan_layers != 0, top,
                         plan_bytes);
        return 0;
    }
    if (mlp_text != NULL && pipeline > 0) {
        print_pipeline_table(mlp, pipeline, micro_batches, schedule, chunks);
        return 0;
    }
    if (mlp_text != NULL) {
        print_mlp_table(mlp, tp, tp_counts, parallel_loss);
        return 0;
    }
    if (transformer_text != NULL) {
        print_transformer_table(transformer, tp, tp_counts);
        return 0;
    }
    /* A t-way group splits every weight: each rank's share, the largest
     * (rounded up), is the model ZeRO then divides over the replicas. */
    if (tp_text != NULL) {
        printf("Tensor parallelism over t = %" PRIu64 " ranks: each holds "
               "1/t of the model (the\nlargest share, rounded up; the "
               "few parameters kept whole, biases and norms,\nleft out), "
               "and ZeRO divides that over Nd replicas.\n\n", tp[0]);
        parameters = (parameters + tp[0] - 1) / tp[0];
    }
    zero_model model = { parameters, precision_bytes, precision_bytes,
                         optimizer_bytes };
    uint64_t capacity = (uint64_t)llround(device_gb * GB);
    print_table(&model, precision, ranks, rank_counts, capacity, device_gb,
                offload);
    return 0;
}
