/* Lesson 08's given set-up of a rank's tensor-parallel state, and the
 * record of the collectives it issues: what the driver (main.c) calls
 * around your code. You do not call these. */
#ifndef ZZ_LESSON08_TP_SETUP_H
#define ZZ_LESSON08_TP_SETUP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "mlp.h"
#include "tensor_parallel.h"

/* Sets up *z for the model of `shape` on the group `comm` (a communicator
 * of its own is duplicated from it; every rank of it calls this): the
 * layers' splits, in pairs, and their parts from your tp_column_part,
 * checked against the balanced partition (the job stops with the reason
 * when they differ: the given code and the tests assume it); the
 * activations and the gradient buffers for max_batch samples (a multiple
 * of t with sequence parallelism), as tensor_parallel.h says; with
 * parallel_loss the output layer (left over after the pairs: the driver
 * checks) split by class. Returns 0,
 * or -1 with the ledger's line in z->error when a buffer is refused. */
int tp_create(tp_state *z, const mlp_config *shape, size_t max_batch,
              MPI_Comm comm, const adamw_config *adamw,
              bool sequence_parallel, bool parallel_loss);

/* Your tp_allocate_layer for every layer, each one's `held` checked
 * against its split (the job stops when it differs); -1 as soon as one is
 * refused by the ledger. */
int tp_allocate(tp_state *z);

/* Fills what tp_allocate gave: every rank's parts of the parameters of
 * mlp_init(seed)'s model (so t ranks start from one rank's model), grads,
 * m and v zero. */
void tp_initialize(tp_state *z, uint64_t seed);

/* Frees everything, and the communicator. */
void tp_destroy(tp_state *z);

/* The parameters this rank holds, layer by layer (params of each), and
 * how many. */
size_t tp_held_total(const tp_state *z);

/* ---- The record of the collectives ---- */

typedef enum { TP_PHASE_NONE, TP_PHASE_FORWARD, TP_PHASE_LOSS,
               TP_PHASE_BACKWARD, TP_PHASE_UPDATE, TP_PHASES } tp_phase;

/* The phase the driver is in: the collectives of the first training step
 * are recorded by phase (TP_PHASE_NONE records nothing). */
void tp_record_phase(tp_phase phase);
void tp_record_stop(void);

/* The report's lines of the record: "collectives N", then per call, in
 * order, "collective K PHASE KIND COUNT" (KIND 0 allreduce, 1
 * reduce-scatter, 2 allgather). */
void tp_record_write(FILE *report);

#endif
