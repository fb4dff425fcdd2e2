/* Lesson 09's given set-up of a rank's pipeline state, and the record of
 * what it ran: what the driver (main.c) calls around your code. You do
 * not call these. */
#ifndef ZZ_LESSON09_PP_SETUP_H
#define ZZ_LESSON09_PP_SETUP_H

#include <stdint.h>
#include <stdio.h>

#include "mlp.h"
#include "pipeline.h"

/* Sets up *z for the model of `shape` on the pipeline `comm` (duplicated;
 * every rank of it calls this): `chunks` chunks a rank (1 but for the
 * interleaved schedule), the layers of each from your pp_layers_of,
 * checked to be runs that cover the model in order, one layer at least
 * each (the job stops with the reason when not); each chunk's stage
 * (common/stage.h) for micro-batches of max_batch / micro_batches
 * samples, its parameters mlp_init(seed)'s; the receive buffer and the
 * gradients' send buffers. Returns 0, or -1 with the ledger's line in
 * z->error when a buffer is refused. */
int pp_create(pp_state *z, const mlp_config *shape, MPI_Comm comm,
              pp_schedule schedule, int chunks, int micro_batches,
              size_t max_batch, const adamw_config *adamw, uint64_t seed);

/* Frees everything, and the communicator. */
void pp_destroy(pp_state *z);

/* The parameters this rank holds, chunk by chunk, and how many. */
size_t pp_held_total(const pp_state *z);

/* The step every rank is in while its schedule runs (steps.h), `mark`
 * ("the schedule (pp_gpipe: ...)"); after each forward and backward it
 * adds which ran last: a hang's report then says where in the schedule
 * each rank stopped. */
void pp_mark_schedule(const char *mark);

/* ---- The record of what ran ---- */

/* Records the operations from now until pp_record_stop (the driver
 * records the first training step). */
void pp_record_start(void);
void pp_record_stop(void);

/* The report's lines of the record: "operations N", then per operation,
 * in order, "operation K KIND MICRO CHUNK" (KIND 0 forward, 1 backward,
 * 2 optimizer step, whose MICRO is 0). */
void pp_record_write(FILE *report);

/* The clock of the steps' computation: while on, each forward's and
 * backward's wall time is added to this rank's busy time, and the step's
 * first start and last end kept (pp_clock_read), for the measured
 * bubble. */
void pp_clock_start(void);
void pp_clock_stop(void);
void pp_clock_read(double *busy, double *first_start, double *last_end);

/* The recorded forwards and backwards (not the optimizer steps), in
 * order, as triples (KIND 0 or 1, MICRO, CHUNK) into `triples`, at most
 * `most` of them; returns how many. */
size_t pp_record_operations(int *triples, size_t most);

#endif
