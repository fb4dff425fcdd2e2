/* The virtual clock of a pipeline schedule (lesson 09): the order in which
 * each rank ran its forwards and backwards, replayed with fixed costs, so
 * that the bubble is a number of the schedule, not of the machine's noise.
 *
 * A pipeline of p ranks, each holding v chunks of layers (v = 1 without
 * interleaving): chunk c of rank r is virtual stage s = c * p + r, and a
 * micro-batch goes forward through stages 0, 1, ..., v * p - 1 and
 * backward through them in reverse. In the replay:
 *
 *   - a forward costs PIPELINE_FORWARD_COST units, a backward
 *     PIPELINE_BACKWARD_COST (twice: it computes two products a layer,
 *     forward one), communication nothing;
 *   - a rank runs its operations one at a time, in the order it ran them;
 *   - an operation starts when its rank is free and its input is there:
 *     the forward of micro-batch i on stage s once stage s - 1's forward
 *     of i has ended; its backward once stage s + 1's backward of i has
 *     ended (on the last stage, its own forward of i).
 *
 * The busy fraction of p ranks over the makespan T is (sum of costs) /
 * (p T); the bubble is the rest. For GPipe and 1F1B with m micro-batches
 * it is (p - 1) / (m + p - 1). */
#ifndef ZZ_PIPELINE_CLOCK_H
#define ZZ_PIPELINE_CLOCK_H

#include <stddef.h>
#include <stdio.h>

enum { PIPELINE_FORWARD_COST = 1, PIPELINE_BACKWARD_COST = 2 };

typedef enum { PIPELINE_FORWARD, PIPELINE_BACKWARD } pipeline_kind;

typedef struct {
    pipeline_kind kind;
    int micro;           /* 0 .. micro_batches - 1 */
    int chunk;           /* 0 .. chunks - 1 */
} pipeline_op;

/* A schedule as it ran: rank r's operations ops[r][0 .. counts[r] - 1]. */
typedef struct {
    int ranks, chunks, micro_batches;
    const pipeline_op *const *ops;
    const size_t *counts;
} pipeline_schedule;

/* The replay: starts[r][k], the start of rank r's k-th operation, and the
 * makespan. 0, or -1 with one line in `error` when the schedule cannot be
 * replayed: an operation out of range, one run twice, one missing (a
 * forward or backward some operation waits for that no rank runs), or an
 * order in which every rank waits for another (a deadlock of the
 * schedule itself), naming each rank left waiting and the operation it
 * waits at. */
int pipeline_replay(const pipeline_schedule *schedule, long *const *starts,
                    long *makespan, char *error, size_t error_len);

/* The bubble of a replayed schedule: 1 - busy / (ranks x makespan). */
double pipeline_bubble(const pipeline_schedule *schedule, long makespan);

/* The timeline as text: a row a rank ("rank 0 |"), a column a unit of
 * time: "F3" while the rank runs the forward of micro-batch 3, "B3" its
 * backward (in two columns), "." idle; with chunks, the chunk's letter
 * after the number ("F3a", "B3b"). Each column is as wide as the longest
 * label, and one space. */
void pipeline_print_timeline(FILE *out, const pipeline_schedule *schedule,
                             long *const *starts, long makespan);

#endif
