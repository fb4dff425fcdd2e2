/* Softmax cross-entropy on rows of logits: the loss of every model in the
 * toolkit (common/mlp.h's, and lesson 08's tensor-parallel one, whose
 * logits the ranks hold whole or split by class). */
#ifndef ZZ_CROSS_ENTROPY_H
#define ZZ_CROSS_ENTROPY_H

#include <stddef.h>

/* Softmax of each row of logits (batch, classes) into probabilities
 * (batch, classes), and the cross-entropy summed over the rows, against
 * labels (batch), each in [0, classes). *correct, when not NULL, receives
 * how many rows have their largest logit at the label (the first largest,
 * on a tie). Sums in double. */
double cross_entropy_sum(const float *logits, float *probabilities,
                         const int *labels, size_t batch, int classes,
                         int *correct);

/* The gradient of the mean cross-entropy at the logits: (p - onehot(label))
 * / batch, from cross_entropy_sum's probabilities, into gradient (batch,
 * classes). */
void cross_entropy_gradient(const float *probabilities, const int *labels,
                            size_t batch, int classes, float *gradient);

/* The same for `rows` rows of a batch of `batch` samples (a micro-batch
 * of it): (p - onehot(label)) / batch, the gradient of the whole batch's
 * mean at these rows' logits, into gradient (rows, classes). */
void cross_entropy_gradient_of_rows(const float *probabilities,
                                    const int *labels, size_t rows,
                                    int classes, size_t batch,
                                    float *gradient);

#endif
