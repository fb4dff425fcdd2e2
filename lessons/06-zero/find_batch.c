/* Lesson 06: the bound a rank's memory cap is checked against, and
 * --find-batch's search under it. */
#include "find_batch.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

#include "check_mpi.h"
#include "collectives.h"
#include "memory_ledger.h"
#include "partition.h"
#include "zero.h"
#include "zero_memory.h"

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

void cap_check_or_exit(size_t cap, bool prefetch, const mlp *model,
                       size_t batch, int ranks, int rank)
{
    if (cap == 0)
        return;
    uint64_t need = bytes_needed(3, prefetch, model, batch, ranks, rank,
                                 memory_ledger_current_total());
    char why[320] = "";
    bool bad = need > cap;
    if (bad)
        snprintf(why, sizeof why, "--memory-cap %zu bytes is too small even "
                 "for stage 3 on %d rank%s: this rank needs at least %" PRIu64
                 " bytes (its part of the model state, a gathered layer and "
                 "a gradient bucket, communication buffers, activations)",
                 cap, ranks, ranks == 1 ? "" : "s", need);
    mpi_exit_if_any(bad, "train_zero", why);
}

/* ---- The trade-off: the largest batch each stage fits ----------------- */

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
static uint64_t bound_for_batch(const mlp_config *shape, int stage,
                                size_t batch, int ranks, int rank)
{
    const size_t base = memory_ledger_current_total();
    size_t held = model_bytes(shape, batch);
    mlp sizes;
    char error[256];
    if (held == 0 || mlp_create_without_storage(&sizes, shape, 1, error,
                                                sizeof error) != 0)
        return UINT64_MAX;
    /* `sizes`, a model for one sample, only lends its shape. */
    uint64_t need = bytes_needed(stage, false, &sizes, batch, ranks, rank,
                                 base + held);
    mlp_free(&sizes);
    return need;
}

/* Whether `stage` fits the cap with local batches of `batch`, on every
 * rank (the ranks' parts differ by one element: each judges its own). */
static bool fits(const mlp_config *shape, size_t cap, int stage,
                 size_t batch, int ranks, int rank)
{
    int ok = bound_for_batch(shape, stage, batch, ranks, rank) <= cap;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN,
                            MPI_COMM_WORLD));
    return ok != 0;
}

void find_batch(const mlp_config *shape, size_t cap, int ranks, int rank,
                batch_speed_fn *speed, void *context)
{
    enum { MOST = 1 << 16 };
    /* The model state and buffers of each stage, from a model for one
     * sample, freed before the search measures what the batches hold. */
    uint64_t states[ZERO_MAX_STAGE + 1], buffers[ZERO_MAX_STAGE + 1];
    mlp sizes;
    char error[256] = "";
    mpi_exit_if_any(mlp_create_without_storage(&sizes, shape, 1, error,
                                               sizeof error) != 0,
                    "train_zero", error);
    for (int stage = 0; stage <= ZERO_MAX_STAGE; stage++) {
        states[stage] = state_bytes(stage, &sizes, ranks, rank);
        buffers[stage] = buffer_bytes(stage, false, &sizes, ranks);
    }
    if (rank == 0)
        printf("train_zero: the largest local batch each stage fits in "
               "%zu bytes a rank, on %d rank%s\n%zu parameters, %zu in the "
               "largest layer; rank 0's bytes, by the bound the cap is "
               "checked against\n\n"
               "  stage | model state |  buffers | activations |   total | "
               "local batch | samples/s\n", cap, ranks,
               ranks == 1 ? "" : "s", sizes.parameter_count,
               sizes.largest_layer);
    mlp_free(&sizes);
    for (int stage = 0; stage <= ZERO_MAX_STAGE; stage++) {
        const uint64_t state = states[stage], buffer = buffers[stage];
        size_t low = 0, high = MOST;   /* fits(low) (or low 0), not high */
        if (fits(shape, cap, stage, MOST, ranks, rank))
            low = MOST;
        while (high - low > 1 && low < MOST) {
            size_t middle = low + (high - low) / 2;
            if (fits(shape, cap, stage, middle, ranks, rank))
                low = middle;
            else
                high = middle;
        }
        if (low == 0) {
            if (rank == 0)
                printf("  %5d | %11" PRIu64 " | %8" PRIu64 " | %11s | %7s | "
                       "%11s | %9s\n", stage, state, buffer, "-", "-",
                       "none", "-");
            continue;
        }
        const uint64_t total = bound_for_batch(shape, stage, low, ranks,
                                               rank);
        double samples_per_second = speed(context, stage, low);
        if (rank == 0)
            printf("  %5d | %11" PRIu64 " | %8" PRIu64 " | %11" PRIu64
                   " | %7" PRIu64 " | %11zu | %9.0f\n", stage, state,
                   buffer, total - state - buffer, total, low,
                   samples_per_second);
    }
}
