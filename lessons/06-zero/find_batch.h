/* Lesson 06: what a rank of train_zero holds at each ZeRO stage, by the
 * bound its --memory-cap is checked against, and --find-batch's search for
 * the largest local batch each stage fits under that cap. Given code of
 * the driver (main.c); you do not need to change it. */
#ifndef ZZ_LESSON06_FIND_BATCH_H
#define ZZ_LESSON06_FIND_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "mlp.h"

/* The cap, checked before anything is allocated, with the bound of stage
 * 3 for `model` (whose batch is `batch` samples) on `ranks` ranks: a cap
 * too small even for stage 3 is bad input, said once, and every rank ends
 * with status 2. A cap that fits stage 3 but not the stage asked for is
 * the ledger's to refuse, on every rank. A cap of 0 is none. */
void cap_check_or_exit(size_t cap, bool prefetch, const mlp *model,
                       size_t batch, int ranks, int rank);

/* Samples per second of `stage` with local batches of `batch`, under the
 * cap: the driver's own step, timed (the same on every rank). */
typedef double batch_speed_fn(void *context, int stage, size_t batch);

/* For each stage, the largest local batch (up to 65536) whose bound fits
 * `cap` on every rank, found by bisection, what the bound is made of at
 * that batch (rank 0's, whose block is the largest), and the samples per
 * second it trains at (`speed`): one table on stdout, from rank 0. Every
 * rank calls it, with the memory ledger's cap set to `cap`. */
void find_batch(const mlp_config *shape, size_t cap, int ranks, int rank,
                batch_speed_fn *speed, void *context);

#endif
