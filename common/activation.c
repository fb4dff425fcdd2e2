/* The hidden layers' activations: see activation.h. */
#include "activation.h"

#include <math.h>

/* sqrt(2/pi), in the tanh approximation of GELU (Hendrycks and Gimpel,
 * "Gaussian error linear units", 2016). */
static const float gelu_scale = 0.7978845608028654f;
static const float gelu_cubic = 0.044715f;

static float gelu(float x)
{
    float u = gelu_scale * (x + gelu_cubic * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
}

/* d/dx of 0.5 x (1 + tanh(u)), u = s (x + c x^3):
 * 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) s (1 + 3 c x^2). */
static float gelu_derivative(float x)
{
    float u = gelu_scale * (x + gelu_cubic * x * x * x);
    float t = tanhf(u);
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * gelu_scale *
               (1.0f + 3.0f * gelu_cubic * x * x);
}

void activation_forward(activation_kind kind, const float *pre, float *post,
                        size_t count)
{
    if (kind == ACTIVATION_RELU) {
        for (size_t i = 0; i < count; i++)
            post[i] = pre[i] > 0.0f ? pre[i] : 0.0f;
    } else {
        for (size_t i = 0; i < count; i++)
            post[i] = gelu(pre[i]);
    }
}

void activation_backward(activation_kind kind, const float *pre,
                         float *gradient, size_t count)
{
    if (kind == ACTIVATION_RELU) {
        for (size_t i = 0; i < count; i++)
            gradient[i] = pre[i] > 0.0f ? gradient[i] : 0.0f;
    } else {
        for (size_t i = 0; i < count; i++)
            gradient[i] *= gelu_derivative(pre[i]);
    }
}
