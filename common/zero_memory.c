/* ZeRO's model-state bytes per rank, on whole numbers. */
#include "zero_memory.h"

#include <inttypes.h>
#include <stdio.h>

#include "partition.h"

bool zero_stage_partitions(int stage, zero_state_kind kind)
{
    /* Stage s partitions the last s kinds of (parameters, gradients,
     * optimizer state): stage 1 the optimizer's, 3 all three. */
    return stage >= 1 && stage <= 3 && (int)kind >= ZERO_STATE_KINDS - stage;
}

const char *zero_stage_name(int stage)
{
    static const char *const names[ZERO_STAGES] = { "baseline", "P_os",
                                                    "P_os+g", "P_os+g+p" };
    return stage >= 0 && stage < ZERO_STAGES ? names[stage] : "?";
}

uint64_t zero_kind_bytes(const zero_model *model, zero_state_kind kind)
{
    switch (kind) {
    case ZERO_PARAMETERS:
        return model->parameter_bytes;
    case ZERO_GRADIENTS:
        return model->gradient_bytes;
    case ZERO_OPTIMIZER_STATE:
        return model->optimizer_bytes;
    case ZERO_STATE_KINDS:
        break;
    }
    return 0;
}

/* a * b into *product, or false when it would pass 2^64 - 1. */
static bool multiply(uint64_t a, uint64_t b, uint64_t *product)
{
    if (a != 0 && b > UINT64_MAX / a)
        return false;
    *product = a * b;
    return true;
}

/* Every kind's bytes for the whole model (bytes per parameter times Ψ),
 * and their sum, or false when one of them passes 2^64 - 1. */
static bool whole_model_bytes(const zero_model *model,
                              uint64_t kind_total[ZERO_STATE_KINDS])
{
    uint64_t sum = 0;
    for (int kind = 0; kind < ZERO_STATE_KINDS; kind++) {
        if (!multiply(zero_kind_bytes(model, (zero_state_kind)kind),
                      model->parameters, &kind_total[kind]) ||
            kind_total[kind] > UINT64_MAX - sum)
            return false;
        sum += kind_total[kind];
    }
    return true;
}

static int check_stage(int stage, char *error, size_t error_len)
{
    if (stage < 0 || stage >= ZERO_STAGES) {
        snprintf(error, error_len, "ZeRO stage %d does not exist: stages are "
                 "0 (plain data parallel) to 3", stage);
        return -1;
    }
    return 0;
}

/* At least one rank, and a model whose state fits in 64 bits: then
 * kind_total holds each kind's bytes for the whole model. */
static int check_model(const zero_model *model, uint64_t ranks,
                       uint64_t kind_total[ZERO_STATE_KINDS], char *error,
                       size_t error_len)
{
    if (ranks == 0) {
        snprintf(error, error_len, "0 ranks: the state must live somewhere, "
                 "at least 1 rank is needed");
        return -1;
    }
    if (!whole_model_bytes(model, kind_total)) {
        snprintf(error, error_len, "%" PRIu64 " parameters of %" PRIu64
                 " + %" PRIu64 " + %" PRIu64 " bytes each: more than 2^64 "
                 "bytes in all", model->parameters, model->parameter_bytes,
                 model->gradient_bytes, model->optimizer_bytes);
        return -1;
    }
    return 0;
}

/* The parameters rank `rank` of `ranks` owns in the balanced partition of
 * the flat buffer. */
static int owned_slice(const zero_model *model, uint64_t ranks, uint64_t rank,
                       uint64_t *slice, char *error, size_t error_len)
{
    if (rank >= ranks) {
        snprintf(error, error_len, "rank %" PRIu64 " of %" PRIu64 " does not "
                 "exist: ranks are 0 to %" PRIu64, rank, ranks, ranks - 1);
        return -1;
    }
    if (model->parameters > SIZE_MAX || ranks > SIZE_MAX) {
        snprintf(error, error_len, "%" PRIu64 " parameters on %" PRIu64
                 " ranks: more than a flat buffer can index here (size_t)",
                 model->parameters, ranks);
        return -1;
    }
    *slice = block_size((size_t)model->parameters, (size_t)ranks,
                        (size_t)rank);
    return 0;
}

int zero_bytes_per_rank(const zero_model *model, int stage, uint64_t ranks,
                        zero_bytes *bytes, char *error, size_t error_len)
{
    if (check_stage(stage, error, error_len) != 0)
        return -1;
    uint64_t kind_total[ZERO_STATE_KINDS];
    if (check_model(model, ranks, kind_total, error, error_len) != 0)
        return -1;
    bytes->replicated = 0;
    bytes->sharded = 0;
    bytes->ranks = ranks;
    /* The sums cannot overflow: all three together fit, checked above. */
    for (int kind = 0; kind < ZERO_STATE_KINDS; kind++) {
        if (zero_stage_partitions(stage, (zero_state_kind)kind))
            bytes->sharded += kind_total[kind];
        else
            bytes->replicated += kind_total[kind];
    }
    return 0;
}

double zero_bytes_value(zero_bytes bytes)
{
    /* The whole and the fractional part of sharded/ranks apart, so that
     * only the last step rounds: what a printed table needs. */
    uint64_t whole = bytes.replicated + bytes.sharded / bytes.ranks;
    return (double)whole +
           (double)(bytes.sharded % bytes.ranks) / (double)bytes.ranks;
}

uint64_t zero_bytes_ceiling(zero_bytes bytes)
{
    /* At most replicated + sharded, which fits: no overflow. */
    uint64_t slice = bytes.sharded / bytes.ranks +
                     (bytes.sharded % bytes.ranks != 0 ? 1 : 0);
    return bytes.replicated + slice;
}

bool zero_bytes_fit(zero_bytes bytes, uint64_t capacity)
{
    /* capacity is whole, so replicated + sharded/ranks <= capacity exactly
     * when its ceiling is. */
    return zero_bytes_ceiling(bytes) <= capacity;
}

int zero_devices_needed(const zero_model *model, int stage, uint64_t capacity,
                        uint64_t *devices, char *error, size_t error_len)
{
    zero_bytes one;
    *devices = 0;
    if (zero_bytes_per_rank(model, stage, 1, &one, error, error_len) != 0)
        return -1;
    if (one.sharded == 0) {
        /* Stage 0, or a model with no partitioned bytes: more ranks do not
         * help, one either fits or nothing does. */
        if (one.replicated > capacity)
            return ZERO_NEVER_FITS;
        *devices = 1;
        return 0;
    }
    /* More ranks shrink only the slice, never the replicated part, and a
     * slice of a nonzero total is at least one byte. */
    if (one.replicated >= capacity)
        return ZERO_NEVER_FITS;
    /* ceil(sharded / Nd) <= room  <=>  sharded <= room * Nd  <=>
     * Nd >= sharded / room: the smallest such Nd is ceil(sharded / room). */
    uint64_t room = capacity - one.replicated;
    *devices = (one.sharded - 1) / room + 1;
    return 0;
}

int zero_rank_state_bytes(const zero_model *model, int stage, uint64_t ranks,
                          uint64_t rank, uint64_t bytes[ZERO_STATE_KINDS],
                          char *error, size_t error_len)
{
    zero_bytes total;
    if (zero_bytes_per_rank(model, stage, ranks, &total, error, error_len) !=
        0)
        return -1;
    uint64_t slice;
    if (owned_slice(model, ranks, rank, &slice, error, error_len) != 0)
        return -1;
    /* No overflow: each product is at most its kind's whole-model total,
     * which zero_bytes_per_rank found to fit. */
    for (int kind = 0; kind < ZERO_STATE_KINDS; kind++) {
        uint64_t count = zero_stage_partitions(stage, (zero_state_kind)kind)
                             ? slice
                             : model->parameters;
        bytes[kind] = zero_kind_bytes(model, (zero_state_kind)kind) * count;
    }
    return 0;
}

/* Host bytes per parameter of a rank's slice under offload: the optimizer's
 * K, and staging's g + p (2g + p with the delayed update, whose host holds
 * the gradients of two steps). False when the sums pass 2^64 - 1. */
static bool offload_host_per_parameter(const zero_model *model,
                                       bool delayed_update,
                                       uint64_t *staging, uint64_t *host)
{
    uint64_t gradients = model->gradient_bytes;
    if (delayed_update && !multiply(2, gradients, &gradients))
        return false;
    if (gradients > UINT64_MAX - model->parameter_bytes)
        return false;
    *staging = gradients + model->parameter_bytes;
    if (*staging > UINT64_MAX - model->optimizer_bytes)
        return false;
    *host = *staging + model->optimizer_bytes;
    return true;
}

int zero_offload_bytes_per_rank(const zero_model *model, uint64_t ranks,
                                bool delayed_update, zero_offload_bytes *bytes,
                                char *error, size_t error_len)
{
    uint64_t kind_total[ZERO_STATE_KINDS];
    if (check_model(model, ranks, kind_total, error, error_len) != 0)
        return -1;
    uint64_t staging, host, host_total;
    if (!offload_host_per_parameter(model, delayed_update, &staging, &host) ||
        !multiply(host, model->parameters, &host_total)) {
        snprintf(error, error_len, "%" PRIu64 " parameters of %" PRIu64
                 " + %s%" PRIu64 " + %" PRIu64 " bytes each on the host: "
                 "more than 2^64 bytes in all", model->parameters,
                 model->optimizer_bytes, delayed_update ? "2 x " : "",
                 model->gradient_bytes, model->parameter_bytes);
        return -1;
    }
    /* Each part is at most host_total, which fits. */
    bytes->device = (zero_bytes){ kind_total[ZERO_PARAMETERS], 0, ranks };
    bytes->host_optimizer = (zero_bytes){ 0, kind_total[ZERO_OPTIMIZER_STATE],
                                          ranks };
    bytes->host_staging = (zero_bytes){ 0, staging * model->parameters,
                                        ranks };
    bytes->host = (zero_bytes){ 0, host_total, ranks };
    return 0;
}

int zero_rank_offload_bytes(const zero_model *model, uint64_t ranks,
                            uint64_t rank, bool delayed_update,
                            zero_offload_rank_bytes *bytes, char *error,
                            size_t error_len)
{
    zero_offload_bytes total;
    if (zero_offload_bytes_per_rank(model, ranks, delayed_update, &total,
                                    error, error_len) != 0)
        return -1;
    uint64_t slice;
    if (owned_slice(model, ranks, rank, &slice, error, error_len) != 0)
        return -1;
    /* The same sums zero_offload_bytes_per_rank checked: they fit, and
     * times slice <= Ψ they still fit. */
    uint64_t staging = 0, host = 0;
    (void)offload_host_per_parameter(model, delayed_update, &staging, &host);
    bytes->device = total.device.replicated;
    bytes->host_optimizer = model->optimizer_bytes * slice;
    bytes->host_staging = staging * slice;
    bytes->host = host * slice;
    return 0;
}
