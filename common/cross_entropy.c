/* Softmax cross-entropy: see cross_entropy.h. */
#include "cross_entropy.h"

#include <math.h>

/* Softmax of each row of logits (batch, classes) into probabilities, and
 * the summed cross-entropy. Subtracting the row's largest logit keeps every
 * exp() at most 1: no overflow, whatever the logits. Sums in double: the
 * loss is reported, and a sum of a few floats in double costs nothing. */
double cross_entropy_sum(const float *logits, float *probabilities,
                         const int *labels, size_t batch, int classes,
                         int *correct)
{
    double total = 0.0;
    int right = 0;
    for (size_t b = 0; b < batch; b++) {
        const float *z = &logits[b * (size_t)classes];
        float *p = &probabilities[b * (size_t)classes];
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (z[c] > z[best])
                best = c;
        double largest = z[best], sum = 0.0;
        for (int c = 0; c < classes; c++)
            sum += exp((double)z[c] - largest);
        for (int c = 0; c < classes; c++)
            p[c] = (float)(exp((double)z[c] - largest) / sum);
        /* -log softmax(z)[label] = log sum exp(z) - z[label] */
        total += log(sum) + largest - (double)z[labels[b]];
        right += best == labels[b];
    }
    if (correct != NULL)
        *correct = right;
    return total;
}

void cross_entropy_gradient(const float *probabilities, const int *labels,
                            size_t batch, int classes, float *gradient)
{
    cross_entropy_gradient_of_rows(probabilities, labels, batch, classes,
                                   batch, gradient);
}

void cross_entropy_gradient_of_rows(const float *probabilities,
                                    const int *labels, size_t rows,
                                    int classes, size_t batch,
                                    float *gradient)
{
    for (size_t b = 0; b < rows; b++)
        for (int c = 0; c < classes; c++) {
            size_t i = b * (size_t)classes + (size_t)c;
            float onehot = c == labels[b] ? 1.0f : 0.0f;
            gradient[i] = (probabilities[i] - onehot) / (float)batch;
        }
}
