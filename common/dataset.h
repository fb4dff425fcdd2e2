/* Classification data: generated from a seed by default, or read from
 * MNIST's IDX files.
 *
 * Malformed files (a wrong magic number, truncated data, image and label
 * counts that disagree, declared sizes that would overflow or exhaust
 * memory) are refused with a one-line reason, never a crash. */
#ifndef ZZ_DATASET_H
#define ZZ_DATASET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t count;        /* samples */
    int features;        /* per sample */
    int classes;
    float *inputs;       /* (count, features) row-major */
    int *labels;         /* (count), 0 <= label < classes */
} dataset;

/* The default task: `count` samples of `features` features in `classes`
 * classes, from `seed`. Each class is a cluster around its own random
 * centre; the clusters overlap enough that a linear model does not solve it
 * and a small MLP does (the stated accuracy is in the .c file and checked
 * by the tests). Sample k depends only on (seed, k): any process can make
 * any slice. Returns 0, or -1 with the reason. */
int dataset_synthetic(dataset *data, size_t count, int features, int classes,
                      uint64_t seed, char *error, size_t error_len);

/* MNIST's images and labels (the IDX format: magic 0x00000803 for images,
 * 0x00000801 for labels, big-endian sizes). Pixels become floats in [0, 1];
 * 10 classes. Returns 0, or -1 with the reason in `error`. */
int dataset_load_mnist(dataset *data, const char *images_path,
                       const char *labels_path, char *error,
                       size_t error_len);

void dataset_free(dataset *data);

#endif
