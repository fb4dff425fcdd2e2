/* Lesson 07, the CPU Adam of ZeRO-Offload (cpu_adam.h).
 * You write: one fused, vectorised pass over a tile of the optimizer's
 * state (TODO 1); the whole step in tiles, split among OpenMP threads,
 * each tile handed to the offload driver as soon as it is done (TODO 2).
 * Given: the step's constants (cpu_adam_step_of), and the reference you
 * must match bit for bit, adamw_step_mixed (common/optimizer.c: read its
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
    /* TODO 1 start */
    /* In registers for the whole loop: through *step the compiler would
     * reload each one after every store, not knowing it is not master. */
    const float learning_rate = step->adamw.learning_rate;
    const float beta1 = step->adamw.beta1, beta2 = step->adamw.beta2;
    const float one_minus_beta1 = 1.0f - beta1, one_minus_beta2 = 1.0f - beta2;
    const float epsilon = step->adamw.epsilon;
    const float weight_decay = step->adamw.weight_decay;
    const float correction1 = step->adamw.correction1;
    const float correction2 = step->adamw.correction2;
    const float scale = step->scale;
    /* adamw_element's operations in its order, one rounding each; lane k
     * of each vector instruction computes element i + k as the scalar
     * code would. No if, no call: bf16_to_float and bf16_from_float are
     * inline integer operations, and sqrtf becomes a vector square root
     * under -fno-math-errno. */
    #pragma omp simd
    for (size_t i = begin; i < end; i++) {
        float g = bf16_to_float(grads[i]) * scale;
        float m_new = beta1 * m[i] + one_minus_beta1 * g;
        float v_new = beta2 * v[i] + one_minus_beta2 * g * g;
        float m_hat = m_new / correction1;
        float v_hat = v_new / correction2;
        float w = master[i];
        w -= learning_rate * (m_hat / (sqrtf(v_hat) + epsilon) +
                              weight_decay * w);
        m[i] = m_new;
        v[i] = v_new;
        master[i] = w;
        params[i] = bf16_from_float(w);
    }
    /* TODO 1 end */
}

void cpu_adam_update(const cpu_adam_step *step, float *master, float *m,
                     float *v, const bf16 *grads, bf16 *params, size_t count,
                     cpu_adam_tile_done *tile_done, void *context)
{
    /* TODO 2 start */
    const size_t tiles = (count + CPU_ADAM_TILE - 1) / CPU_ADAM_TILE;
    /* Each thread a contiguous run of tiles (schedule(static)): its five
     * streams through memory never jump, so the hardware prefetchers run
     * on from one tile into the next. Dealing the tiles in turn
     * (static, 1) measured 10% slower on 2 threads; the tiles are equal
     * work, so nothing is gained by handing them out dynamically. One tile
     * is not worth waking the threads for. */
    #pragma omp parallel for schedule(static) if (tiles > 1)
    for (size_t t = 0; t < tiles; t++) {
        size_t begin = t * CPU_ADAM_TILE;
        size_t end = count - begin < CPU_ADAM_TILE ? count
                                                   : begin + CPU_ADAM_TILE;
        cpu_adam_tile(step, master, m, v, grads, params, begin, end);
        if (tile_done != NULL)
            tile_done(context, begin, end);
    }
    /* TODO 2 end */
}
