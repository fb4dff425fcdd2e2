/* Optimizers: SGD with momentum, and AdamW, on one slice of the flat buffers.
 *
 * Each element is updated on its own, so the loops are split among OpenMP
 * threads and vectorised freely: the order does not change any result.
 * This is the plain version; lesson 07 writes the fast CPU Adam. (GCC and
 * Clang vectorise SGD's loop but not AdamW's under the toolkit's flags:
 * sqrtf may set errno, which a vector square root cannot; -fno-math-errno
 * lifts that, and sqrt is exactly rounded either way, so the results would
 * not change.) */
#include "optimizer.h"

#include <math.h>

/* Below this many elements, waking the threads costs more than the work. */
#define PARALLEL_THRESHOLD 65536

void sgd_step(const sgd_config *config, float *params, const float *grads,
              float *velocity, size_t count)
{
    const float learning_rate = config->learning_rate;
    const float momentum = config->momentum;
    #pragma omp parallel for simd schedule(static) if (count >= PARALLEL_THRESHOLD)
    for (size_t i = 0; i < count; i++) {
        velocity[i] = momentum * velocity[i] + grads[i];
        params[i] -= learning_rate * velocity[i];
    }
}

void adamw_step(const adamw_config *config, long step, float *params,
                const float *grads, float *m, float *v, size_t count)
{
    const float learning_rate = config->learning_rate;
    const float beta1 = config->beta1, beta2 = config->beta2;
    const float epsilon = config->epsilon;
    const float weight_decay = config->weight_decay;
    /* The moments start at zero, so after `step` steps they are biased
     * towards it by the factors 1 - beta^step; dividing by them corrects
     * that (Kingma and Ba, section 3). In double: beta2^step for step in
     * the thousands is 1 minus a small number. */
    const float correction1 = (float)(1.0 - pow((double)beta1, (double)step));
    const float correction2 = (float)(1.0 - pow((double)beta2, (double)step));

    #pragma omp parallel for schedule(static) if (count >= PARALLEL_THRESHOLD)
    for (size_t i = 0; i < count; i++) {
        float g = grads[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        float m_hat = m[i] / correction1;
        float v_hat = v[i] / correction2;
        /* Decoupled weight decay: it shrinks the parameter directly,
         * lr * wd * param, instead of being added to the gradient, where
         * Adam's scaling would weaken it for parameters with large
         * gradients (Loshchilov and Hutter, 2019). */
        params[i] -= learning_rate *
                     (m_hat / (sqrtf(v_hat) + epsilon) +
                      weight_decay * params[i]);
    }
}
