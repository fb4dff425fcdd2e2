/* Lesson 09: pipeline parallelism, your part (pipeline.h says what each
 * function does; the lesson's README says why).
 *
 * Given: a micro-batch's computation on a chunk (pp_compute_forward,
 * pp_loss, pp_compute_backward) and the optimizer (pp_optimizer_step),
 * each recorded for the tests (pp_state.c); MPI's point-to-point calls
 * for the messages between stages. */
#include <stddef.h>

#include <mpi.h>

#include "not_done.h"
#include "pipeline.h"

/* ---- TODO 1: the stages ------------------------------------------------ */

void pp_layers_of(int layer_count, const size_t *layer_parameters,
                  int stages, int stage_index, int *first, int *end)
{
    /* TODO 1 start: the layers of stage `stage_index`, [*first, *end).
     * Stage s begins at boundary s and ends at boundary s + 1; boundary
     * 0 is layer 0 and boundary `stages` is layer_count. Boundary s in
     * between is the layer l whose parameters before it (the sum of
     * layer_parameters[0 .. l - 1]) are nearest s / stages of all the
     * model's, the smaller l on a tie, looked for after boundary s - 1
     * and up to layer_count - (stages - s), so that every stage keeps a
     * layer. Compare in whole numbers (before x stages against total x
     * s): no rounding. */
    NOT_DONE();
    /* TODO 1 end */
}

/* ---- TODO 2 and 3: one micro-batch on one chunk --------------------------- */

void pp_forward(pp_state *z, int chunk, int micro)
{
    /* TODO 2 start: the micro-batch's input is its micro_rows rows of
     * the batch, from row micro x micro_rows of z->inputs (a row is the
     * chunk's `in` floats); pp_compute_forward runs the chunk's layers on
     * them and keeps their activations until the micro-batch's backward.
     * That is the whole forward on one rank: the loss waits for the
     * backward (pp_loss), which needs its gradient. */
    NOT_DONE();
    /* TODO 2 end */
    /* TODO 3 start: across ranks, chunk `chunk` of this rank is stage
     * chunk x ranks + rank. Every stage but the first receives its input
     * from the stage before (MPI_Recv into z->received, before
     * pp_compute_forward), and every stage but the last sends its output
     * to the stage after, without waiting (MPI_Isend from the output
     * pp_compute_forward returned, its request in
     * z->forward_send[chunk][micro]); a tag per direction, chunk and
     * micro-batch keeps the messages apart. This code goes around TODO
     * 2's: move TODO 2's compute call between the receive and the send
     * (the blocks' markers may go). */
    if (z->stages > 1)
        NOT_DONE();
    /* TODO 3 end */
}

void pp_backward(pp_state *z, int chunk, int micro)
{
    /* TODO 2 start: on the last stage, pp_loss first: the micro-batch's
     * loss, and the gradient at its logits divided by the samples the
     * mean is over, the whole batch's (z->batch), so that the micro-
     * batches' gradients add up to the batch's; into the chunk's
     * gradient[0]. Then pp_compute_backward from that gradient: it adds
     * the micro-batch's gradients to the chunk's and gives its
     * activations back. The first stage has no input gradient to make
     * (dinput NULL). */
    NOT_DONE();
    /* TODO 2 end */
    /* TODO 3 start: every stage but the last receives the gradient at its
     * output from the stage after (MPI_Recv into z->received); before
     * pp_compute_backward gives the output's memory back, the forward's
     * send of it must be complete (MPI_Wait on its request). Every stage
     * but the first makes the gradient at its input into
     * z->sent_gradient[chunk][micro] and sends it to the stage before
     * (MPI_Isend, its request in z->backward_send[chunk][micro]). As in
     * pp_forward, this code goes around TODO 2's. */
    if (z->stages > 1)
        NOT_DONE();
    /* TODO 3 end */
}

void pp_update(pp_state *z, long step)
{
    /* TODO 3 start: every gradient sent this step completed
     * (z->backward_send: MPI_Waitall), so that no request is left open
     * and no buffer is written again while MPI may still read it. */
    if (z->stages > 1)
        NOT_DONE();
    /* TODO 3 end */
    /* TODO 2 start: one optimizer step a step, for each chunk
     * (pp_optimizer_step), after every micro-batch's backward. */
    NOT_DONE();
    /* TODO 2 end */
}

/* ---- The schedules ------------------------------------------------------ */

void pp_gpipe(pp_state *z)
{
    /* TODO 2 start: every micro-batch's forward, in order, then every
     * micro-batch's backward, in the same order (the gradients then add
     * up in the order of the samples, as one step on the whole batch). */
    NOT_DONE();
    /* TODO 2 end */
}

void pp_one_f_one_b(pp_state *z)
{
    /* TODO 4 start: on rank r of p, a warm-up of min(p - r - 1, m)
     * forwards; then, while forwards are left, the next forward and the
     * oldest backward in turn; then the backwards left, in order. */
    NOT_DONE();
    /* TODO 4 end */
}

void pp_interleaved(pp_state *z)
{
    /* TODO 5 start: v = z->chunks chunks a rank. The k-th forward of a
     * rank (k from 0 to v m - 1) is micro-batch k / (p v) x p + k % p on
     * chunk k / p % v; its k-th backward the same micro-batch on chunk
     * v - 1 - k / p % v. A warm-up of 2 (p - r - 1) + (v - 1) p forwards
     * (all v m of them when m = p, and never more than v m), then one
     * forward and one backward in turn, then the backwards left. */
    NOT_DONE();
    /* TODO 5 end */
}
