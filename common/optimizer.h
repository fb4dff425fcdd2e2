/* Optimizers: update parameters from gradients, one slice of the flat
 * buffers at a time, so that a process can update only the shard it owns
 * (lesson 06). `count` floats from each pointer. */
#ifndef ZZ_OPTIMIZER_H
#define ZZ_OPTIMIZER_H

#include <stddef.h>

#include "bf16.h"

typedef struct {
    float learning_rate;
    float momentum;       /* 0 for plain SGD */
} sgd_config;

/* velocity = momentum * velocity + grad; param -= learning_rate * velocity */
void sgd_step(const sgd_config *config, float *params, const float *grads,
              float *velocity, size_t count);

typedef struct {
    float learning_rate;
    float beta1, beta2;   /* 0.9, 0.999 */
    float epsilon;        /* 1e-8 */
    float weight_decay;   /* decoupled (AdamW; Loshchilov and Hutter, 2019) */
} adamw_config;

/* What one AdamW step needs besides the elements: the settings, and this
 * step's bias corrections 1 - beta1^step and 1 - beta2^step (computed in
 * double, rounded once to float). adamw_step and adamw_step_mixed use
 * exactly these; a faster update that must give the same bits (lesson 07's
 * CPU Adam) starts from them too, rather than from a copy of the formula. */
typedef struct {
    float learning_rate, beta1, beta2, epsilon, weight_decay;
    float correction1, correction2;
} adamw_constants;

adamw_constants adamw_constants_of(const adamw_config *config, long step);

/* One AdamW step (Kingma and Ba, 2015, with decoupled weight decay);
 * `step` counts from 1 and sets the bias corrections. m and v are the
 * first and second moments, zero before the first step. */
void adamw_step(const adamw_config *config, long step, float *params,
                const float *grads, float *m, float *v, size_t count);

/* AdamW in mixed precision, as ZeRO updates a rank's slice: the gradients
 * arrive in bf16, the optimizer keeps fp32 master weights and moments, and
 * the model gets back bf16 parameters. For each i < count, with
 * g = bf16_to_float(grads[i]) * scale in fp32 (scale = 1/P turns a sum
 * over P ranks into their mean without a second pass):
 *     master[i], m[i], v[i]  updated bitwise as adamw_step updates
 *                            params[i], m[i], v[i] from the gradient g
 *     params[i] = bf16_from_float(master[i])   (the new value, rounded)
 * No fp32 copy of the gradients is made. master, m, v are (count) fp32,
 * grads and params (count) bf16; params may not overlap grads. */
void adamw_step_mixed(const adamw_config *config, long step, float *master,
                      float *m, float *v, const bf16 *grads, float scale,
                      bf16 *params, size_t count);

#endif
