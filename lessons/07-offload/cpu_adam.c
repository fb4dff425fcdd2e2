/* Lesson 07, the CPU Adam of ZeRO-Offload (cpu_adam.h).
 * You write: one fused, vectorised pass over a tile of the optimizer's
 * state (TODO 1); the whole step in tiles, split among OpenMP threads,
 * each tile handed to the offload driver as soon as it is done (TODO 2).
 * Given: the step's constants (cpu_adam_step_of), and the reference you
 * must match bit for bit, adamw_step_mixed (common/adamw.c: read its
 * adamw_element, the formula and its order of operations). */
#include <math.h>

#include <omp.h>

#include "cpu_adam.h"
#include "not_done.h"

void cpu_adam_tile(const cpu_adam_step *step, float *restrict master,
                   float *restrict m, float *restrict v,
                   const bf16 *restrict grads, bf16 *restrict params,
                   size_t begin, size_t end)
{
    /* TODO 1 start: one loop over [begin, end) that, for each element,
     * widens and scales its gradient, updates m, v and the master weight
     * exactly as adamw_element does (the same operations, in the same
     * order), and stores the new bf16 parameter, bf16_from_float(master),
     * in the same pass: every buffer read once and written once. Make the
     * compiler vectorise it (#pragma omp simd): read the constants into
     * local variables before the loop (the stores through master, m and v
     * could otherwise change *step, as far as the compiler knows), and
     * keep the loop free of branches and calls it cannot inline. Last,
     * once the tests pass (optional; the README's "Streaming stores"):
     * write the parameters with cpu_adam_store_line (cpu_adam.h). */
    NOT_DONE();
    /* TODO 1 end */
}

void cpu_adam_update(const cpu_adam_step *step, float *master, float *m,
                     float *v, const bf16 *grads, bf16 *params, size_t count,
                     cpu_adam_tile_done *tile_done, void *context)
{
    /* TODO 2 start: cut [0, count) into tiles of CPU_ADAM_TILE elements
     * (the last one shorter; none at all when count is 0), share them out
     * among the threads of one parallel region, and after each tile call
     * tile_done (if it is not NULL) from the thread that updated it,
     * before that thread starts its next tile. */
    NOT_DONE();
    /* TODO 2 end */
}
