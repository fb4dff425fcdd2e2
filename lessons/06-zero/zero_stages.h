/* Lesson 06: what the student's zero.c and the given zero_stages.c share.
 * zero_stages.c holds stage 0 (the worked example) and the hooks the
 * driver calls (zero.h), which pick each stage's functions; zero.c defines
 * those of stages 1-3, declared here. The driver also reads here what the
 * hooks saw of the prefetch. */
#ifndef ZZ_LESSON06_ZERO_STAGES_H
#define ZZ_LESSON06_ZERO_STAGES_H

#include <stddef.h>

#include "bf16.h"
#include "zero.h"

/* How many elements a part holds. */
static inline size_t length_of(zero_part part)
{
    return part.end - part.begin;
}

/* The factor that turns the sum of P ranks' gradients into their mean. */
static inline float mean_of(const zero_state *z)
{
    return 1.0f / (float)z->ranks;
}

/* The step forward and backward are marked with (common/steps.h) outside
 * your functions; inside each, the hooks mark its TODO and name. */
#define ZERO_HOOKS_STEP "forward and backward (zero.c's layer hooks)"

/* Stages 1-3 (zero.c): the TODOs. */
int stage1_allocate(zero_state *z);
void stage1_reduce(zero_state *z);
void stage1_update(zero_state *z, long step);
int stage2_allocate(zero_state *z);
void stage2_backward_done(zero_state *z, int layer);
bf16 *stage2_bucket(zero_state *z, int layer);
void stage2_update(zero_state *z, long step);
int stage3_allocate(zero_state *z);
void stage3_backward_done(zero_state *z, int layer);
const bf16 *stage3_gather(zero_state *z, int layer);
const bf16 *stage3_prefetched(zero_state *z, int layer, int next);
void stage3_release(zero_state *z, int layer);
void stage3_update(zero_state *z, long step);

/* What the given hooks saw each time your stage3_prefetched returned (the
 * communication ledger's open requests, not anything zero.c says), for
 * the driver's report. A prefetch overlaps only if the next layer's gather
 * is still running when the caller starts computing, and the current
 * layer's is complete: right after the return exactly one MPI_Iallgatherv
 * request is open, or none after the last layer of a pass. */
typedef struct {
    size_t returns;     /* returns of stage3_prefetched */
    size_t overlapped;  /* with exactly that request open */
    size_t waited;      /* none open while the next layer's should be:
                           waited for at once, or gathered by a blocking
                           call */
    size_t unfinished;  /* more open than that: the current layer's gather
                           not complete, or another one left running */
    size_t other_bytes; /* one open, but not receiving the other ranks'
                           parts of the next layer */
} zero_prefetch_seen;

zero_prefetch_seen zero_prefetch_observed(void);

#endif
