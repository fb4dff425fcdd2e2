/* AdamW's step, in fp32 and in mixed precision (bf16 gradients and
 * parameters), on one slice of the flat buffers (optimizer.h).
 *
 * Each element is updated on its own, so the loops are split among OpenMP
 * threads and vectorised freely: the order does not change any result.
 * This is the plain version; lesson 07 writes the fast CPU Adam, and is
 * tested against this one, which is why it is in a file of its own: no
 * program of lesson 07 that runs the student's code may hold it
 * (scripts/check-program.sh). (GCC and Clang vectorise SGD's loop but not
 * AdamW's under the toolkit's flags: sqrtf may set errno, which a vector
 * square root cannot; -fno-math-errno lifts that, and sqrt is exactly
 * rounded either way, so the results would not change. Lesson 07's files
 * are compiled with it: its lesson.mk's CFLAGS.) */
#include "optimizer.h"

#include <math.h>

/* Below this many elements, waking the threads costs more than the work. */
#define PARALLEL_THRESHOLD 65536

/* One element's update. Both forms below call this one function, so the
 * mixed-precision step is bitwise the fp32 one on the same numbers (the
 * toolkit compiles with -ffp-contract=off: no fused multiply-add in one
 * and not the other). */
static inline void adamw_element(const adamw_constants *c, float *param,
                                 float g, float *m, float *v)
{
    *m = c->beta1 * *m + (1.0f - c->beta1) * g;
    *v = c->beta2 * *v + (1.0f - c->beta2) * g * g;
    float m_hat = *m / c->correction1;
    float v_hat = *v / c->correction2;
    /* Decoupled weight decay: it shrinks the parameter directly,
     * lr * wd * param, instead of being added to the gradient, where
     * Adam's scaling would weaken it for parameters with large gradients
     * (Loshchilov and Hutter, 2019). */
    *param -= c->learning_rate *
              (m_hat / (sqrtf(v_hat) + c->epsilon) + c->weight_decay * *param);
}

void adamw_step(const adamw_config *config, long step, float *params,
                const float *grads, float *m, float *v, size_t count)
{
    const adamw_constants c = adamw_constants_of(config, step);
    #pragma omp parallel for schedule(static) if (count >= PARALLEL_THRESHOLD)
    for (size_t i = 0; i < count; i++)
        adamw_element(&c, &params[i], grads[i], &m[i], &v[i]);
}

void adamw_step_mixed(const adamw_config *config, long step, float *master,
                      float *m, float *v, const bf16 *grads, float scale,
                      bf16 *params, size_t count)
{
    const adamw_constants c = adamw_constants_of(config, step);
    #pragma omp parallel for schedule(static) if (count >= PARALLEL_THRESHOLD)
    for (size_t i = 0; i < count; i++) {
        /* The gradient is widened and scaled here, element by element:
         * no fp32 copy of the slice's gradients is ever made. */
        float g = bf16_to_float(grads[i]) * scale;
        adamw_element(&c, &master[i], g, &m[i], &v[i]);
        params[i] = bf16_from_float(master[i]);
    }
}
