/* Lesson 09: pipeline parallelism. The model's layers are split by depth
 * among the ranks of a pipeline, a run of consecutive layers each (a
 * stage); a step's batch is cut into m micro-batches, which go forward
 * through the stages and back, and each rank updates its layers once a
 * step from the gradients of every micro-batch added up.
 *
 * Your file, pipeline.c, holds the parallel algorithm, in the order of the
 * lesson:
 *   TODO 1  pp_layers_of: the layers of a stage, balanced by parameters;
 *   TODO 2  pp_forward, pp_backward, pp_gpipe and pp_update on one
 *           rank: every forward, then every backward (GPipe's order),
 *           the gradients accumulated, one update a step;
 *   TODO 3  the messages between stages in pp_forward and pp_backward,
 *           waited for in pp_update: GPipe across ranks;
 *   TODO 4  pp_one_f_one_b: warm-up, one forward and one backward in
 *           turn, cool-down;
 *   TODO 5  pp_interleaved: v chunks a rank, the interleaved 1F1B.
 *
 * A micro-batch's computation on a stage is given (pp_compute_forward,
 * pp_loss, pp_compute_backward, pp_optimizer_step, over common/stage.h):
 * each records what it ran, in order, which is how the tests see your
 * schedule, and the memory ledger counts the activations each micro-batch
 * keeps until its backward. */
#ifndef ZZ_PIPELINE_H
#define ZZ_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>

#include <mpi.h>

#include "mlp.h"
#include "optimizer.h"
#include "stage.h"

/* The most chunks a rank holds, and micro-batches a step. */
enum { PP_MOST_CHUNKS = 4, PP_MOST_MICRO_BATCHES = 64 };

typedef enum { PP_GPIPE, PP_1F1B, PP_INTERLEAVED } pp_schedule;

typedef struct {
    const char *program;
    MPI_Comm comm;            /* the pipeline: rank r runs stage r */
    int rank, ranks;
    pp_schedule schedule;
    int chunks;               /* v: 1, or with the interleaved schedule
                                 the chunks each rank holds */
    int stages;               /* chunks x ranks: chunk c of this rank is
                                 stage c x ranks + rank */
    pipeline_stage chunk[PP_MOST_CHUNKS];
    int micro_batches;        /* m */
    size_t batch;             /* this step's samples */
    size_t micro_rows;        /* a micro-batch's: batch / m */
    const float *inputs;      /* the step's batch (batch x features): the
                                 first stage's input */
    const int *labels;        /* (batch): the last stage's */
    float *received;          /* room for one micro-batch's activations or
                                 gradient from a neighbour (micro_rows x
                                 the widest boundary) */
    float *sent_gradient[PP_MOST_CHUNKS][PP_MOST_MICRO_BATCHES];
                              /* each micro-batch's gradient at a chunk's
                                 input, sent to the stage before while
                                 the step goes on (micro_rows x its in) */
    MPI_Request forward_send[PP_MOST_CHUNKS][PP_MOST_MICRO_BATCHES];
    MPI_Request backward_send[PP_MOST_CHUNKS][PP_MOST_MICRO_BATCHES];
                              /* MPI_REQUEST_NULL, or a send not waited for
                                 yet */
    double loss;              /* the last stage's: the step's cross-entropy
                                 summed over its samples */
    adamw_config adamw;
    char error[256];
} pp_state;

/* ---- TODO 1 ---------------------------------------------------------- */

/* Stage `stage_index` of `stages` holds the model's layers [*first,
 * *end): the boundary before stage s (1 <= s < stages) is the layer whose
 * count of parameters before it is nearest s / stages of the whole (the
 * smaller layer on a tie), kept so that every stage holds at least one
 * layer. layer_parameters[l] is layer l's count (W and b). */
void pp_layers_of(int layer_count, const size_t *layer_parameters,
                  int stages, int stage_index, int *first, int *end);

/* ---- TODO 2 and 3 ---------------------------------------------------- */

/* Micro-batch `micro` forward on chunk `chunk` of this rank: its input
 * from the batch (stage 0) or from the stage before, and its output to
 * the stage after (on the last stage, the loss). */
void pp_forward(pp_state *z, int chunk, int micro);

/* Micro-batch `micro` backward on chunk `chunk`: the gradient at its
 * output from the stage after (on the last stage, the loss's), and the
 * gradient at its input to the stage before. */
void pp_backward(pp_state *z, int chunk, int micro);

/* Once a step, after every micro-batch's backward: every message of the
 * step completed, then AdamW on each chunk's parameters. */
void pp_update(pp_state *z, long step);

/* ---- TODO 2, 4 and 5 --------------------------------------------------- */

/* The schedules: every micro-batch's forward and backward on every chunk
 * of this rank, in the schedule's order. */
void pp_gpipe(pp_state *z);
void pp_one_f_one_b(pp_state *z);
void pp_interleaved(pp_state *z);

/* ---- Given (pp_state.c) ------------------------------------------------ */

/* Micro-batch `micro`'s forward on chunk `chunk` from `input` (micro_rows
 * x the chunk's in), recorded: returns its output (micro_rows x the
 * chunk's out), which stays valid until its backward. */
const float *pp_compute_forward(pp_state *z, int chunk, int micro,
                                const float *input);

/* On the last stage, after micro-batch `micro`'s forward: its loss, summed
 * over its rows, added to z->loss, and the gradient at its logits,
 * divided by `samples` (the mean's count: the whole batch), into
 * z->chunk[chunk].gradient[0]. */
void pp_loss(pp_state *z, int chunk, int micro, size_t samples);

/* Micro-batch `micro`'s backward on chunk `chunk` from `doutput` (micro_rows
 * x the chunk's out), recorded: its gradients added to the chunk's, the
 * gradient at its input into `dinput` (NULL on stage 0), its activations
 * given back. */
void pp_compute_backward(pp_state *z, int chunk, int micro,
                         const float *doutput, float *dinput);

/* AdamW on chunk `chunk`'s parameters, recorded; `step` is pp_update's,
 * as given (AdamW's count, step + 1, is made inside). */
void pp_optimizer_step(pp_state *z, int chunk, long step);

/* Stops every rank with `why`, naming this rank. */
_Noreturn void pp_abort(pp_state *z, const char *why);

/* An MPI call's result: stops every rank unless MPI_SUCCESS. */
void pp_check(pp_state *z, int result, const char *call);

#endif
