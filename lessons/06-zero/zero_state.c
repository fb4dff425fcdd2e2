/* Lesson 06's given helpers (zero.h): setting up a rank's ZeRO state,
 * filling it with the initial model, freeing it, and stopping the job on
 * an error. You do not need to change this file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_mpi.h"
#include "memory_ledger.h"
#include "partition.h"
#include "zero.h"

/* Prints "PROGRAM: LINE" and ends the job (every rank). */
static _Noreturn void abort_with(const zero_state *z, const char *line)
{
    char message[600];
    snprintf(message, sizeof message, "%s: %s",
             z->program != NULL ? z->program : "train_zero", line);
    mpi_abort_exit(message);
}

_Noreturn void zero_abort(zero_state *z, const char *why)
{
    char line[512];
    snprintf(line, sizeof line, "rank %d: %s", z->rank, why);
    abort_with(z, line);
}

void zero_check(zero_state *z, int result)
{
    /* The collectives' lines name the rank already. */
    if (result != 0)
        abort_with(z, z->error[0] ? z->error : "a collective failed");
}

void zero_check_alloc(zero_state *z, const void *block)
{
    /* The ledger's line names the rank already (the driver gives it with
     * the cap). */
    (void)z;
    if (block == NULL)
        abort_with(z, memory_ledger_last_error());
}

void zero_create(zero_state *z, int stage, bool prefetch, mlp *model,
                 const adamw_config *adamw)
{
    memset(z, 0, sizeof *z);
    z->program = "train_zero";
    z->stage = stage;
    z->prefetch = prefetch;
    z->model = model;
    z->adamw = *adamw;
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &z->comm));
    MPI_CHECK(MPI_Comm_rank(z->comm, &z->rank));
    MPI_CHECK(MPI_Comm_size(z->comm, &z->ranks));
    z->layer_count = model->layer_count;
    z->total = 0;
    z->layers = malloc((size_t)model->layer_count * sizeof *z->layers);
    for (int k = 0; k < 2; k++) {
        z->gathered_layer[k] = -1;
        z->prefetch_request[k] = MPI_REQUEST_NULL;
        z->prefetch_counts[k] = malloc((size_t)z->ranks * sizeof(int));
        z->prefetch_displs[k] = malloc((size_t)z->ranks * sizeof(int));
        if (z->prefetch_counts[k] == NULL || z->prefetch_displs[k] == NULL)
            zero_abort(z, "out of memory for the prefetch's counts");
    }
    if (z->layers == NULL)
        zero_abort(z, "out of memory for the layers' list");
    for (int l = 0; l < model->layer_count; l++) {
        size_t count = mlp_layer_parameter_count(model, l);
        z->layers[l] = (zero_part){ model->layers[l].weights,
                                    model->layers[l].weights + count };
        z->total += count;
        if (count > z->largest_layer)
            z->largest_layer = count;
    }
    /* TODO 1 gives this rank's block; the collectives use partition.h's.
     * If the two disagreed, a collective would write past your buffers:
     * better to stop here and say so. */
    z->own = zero_owned_part(z->total, z->ranks, z->rank, 0, z->total);
    size_t begin, end;
    block_range(z->total, (size_t)z->ranks, (size_t)z->rank, &begin, &end);
    bool empty = z->own.begin == z->own.end;
    if (!(empty && begin == end) &&
        (z->own.begin != begin || z->own.end != end)) {
        char why[256];
        snprintf(why, sizeof why, "TODO 1: zero_owned_part(%zu, %d, %d, 0, "
                 "%zu) gave [%zu, %zu), but rank %d's block of the balanced "
                 "partition is [%zu, %zu)", z->total, z->ranks, z->rank,
                 z->total, z->own.begin, z->own.end, z->rank, begin, end);
        zero_abort(z, why);
    }
    z->own = (zero_part){ begin, end };
}

void zero_initialize(zero_state *z, uint64_t seed)
{
    /* Stage 0 keeps the optimizer's state for all Ψ, the others for
     * their own part; stages 0-2 hold every parameter, stage 3 its own. */
    const zero_part optimized = z->stage == 0 ? (zero_part){ 0, z->total }
                                              : z->own;
    const zero_part held = z->stage == 3 ? z->own
                                         : (zero_part){ 0, z->total };
    const size_t optimized_count = optimized.end - optimized.begin;
    mlp_init_range(z->model, seed, optimized.begin, optimized_count,
                   z->master);
    memset(z->m, 0, optimized_count * sizeof *z->m);
    memset(z->v, 0, optimized_count * sizeof *z->v);
    /* The bf16 parameters are the masters rounded, element by element;
     * where no master is held (stages 1 and 2 outside the own part), the
     * same initial values, made a block at a time. */
    float block[1024];
    for (size_t at = held.begin; at < held.end; at += 1024) {
        size_t n = held.end - at < 1024 ? held.end - at : 1024;
        mlp_init_range(z->model, seed, at, n, block);
        bf16_from_floats(z->params + (at - held.begin), block, n);
    }
}

void zero_destroy(zero_state *z)
{
    ledger_free(z->params);
    ledger_free(z->grads);
    ledger_free(z->master);
    ledger_free(z->m);
    ledger_free(z->v);
    ledger_free(z->bucket);
    for (int k = 0; k < 2; k++) {
        ledger_free(z->gathered[k]);
        free(z->prefetch_counts[k]);
        free(z->prefetch_displs[k]);
    }
    free(z->layers);
    MPI_CHECK(MPI_Comm_free(&z->comm));
    memset(z, 0, sizeof *z);
}
