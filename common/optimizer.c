/* Optimizers: SGD with momentum on one slice of the flat buffers, and
 * AdamW's constants for a step (the step itself is in adamw.c).
 *
 * AdamW's steps are lesson 06's optimizer and the reference that lesson
 * 07's CPU Adam is tested against: in a file of their own, so that a
 * program that needs only the constants here (lesson 07's producer, through
 * cpu_adam_step_of) does not link the reference beside them
 * (tests/symbols/07-offload.txt). */
#include "optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "steps.h"

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

/* A step below 1 is the caller's bug, not bad input: at step 0 both bias
 * corrections are 0, the update divides by them, and every parameter
 * becomes infinite or NaN, which a run would report steps later as a NaN
 * loss with no cause. Said here, with the step the rank was in. */
static _Noreturn void adamw_step_check_failed(long step)
{
    const char *where = steps_current();
    fprintf(stderr, "adamw: step %ld: AdamW's steps count from 1 (its bias "
            "corrections 1 - beta^step are 0 at step 0, and the update "
            "divides by them): pass the training loop's step + 1, the loop "
            "counting from 0%s%s%s\n", step, where[0] ? " (the rank was in " : "",
            where, where[0] ? ")" : "");
    exit(1);
}

adamw_constants adamw_constants_of(const adamw_config *config, long step)
{
    if (step < 1)
        adamw_step_check_failed(step);
    adamw_constants c = { config->learning_rate, config->beta1,
                          config->beta2, config->epsilon,
                          config->weight_decay, 0, 0 };
    /* The moments start at zero, so after `step` steps they are biased
     * towards it by the factors 1 - beta^step; dividing by them corrects
     * that (Kingma and Ba, section 3). In double: beta2^step for step in
     * the thousands is 1 minus a small number. */
    c.correction1 = (float)(1.0 - pow((double)c.beta1, (double)step));
    c.correction2 = (float)(1.0 - pow((double)c.beta2, (double)step));
    return c;
}
