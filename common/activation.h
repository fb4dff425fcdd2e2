/* The hidden layers' activations, elementwise: ReLU and GELU (its tanh
 * approximation), forward and backward. The model (mlp.h) applies them to
 * a whole layer's outputs; lesson 08's column split applies them to a
 * rank's slice of them, which is the same, element by element. */
#ifndef ZZ_ACTIVATION_H
#define ZZ_ACTIVATION_H

#include <stddef.h>

typedef enum { ACTIVATION_RELU, ACTIVATION_GELU } activation_kind;

/* post = activation(pre), `count` elements. */
void activation_forward(activation_kind kind, const float *pre, float *post,
                        size_t count);

/* In the forward pass this was post = activation(pre), so the gradient at
 * pre is the gradient at post times activation'(pre): `gradient` is
 * multiplied in place. ReLU's derivative at exactly 0 is taken as 0. */
void activation_backward(activation_kind kind, const float *pre,
                         float *gradient, size_t count);

#endif
