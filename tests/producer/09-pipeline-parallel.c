/* Lesson 09's producer (tests/harness/producer.h): runs your pp_layers_of
 * (TODO 1) on the tests' models and writes what it gave.
 *   layers_of HIDDEN INPUTS WIDTH CLASSES STAGES
 *       pp_layers_of for every stage of STAGES on the model of HIDDEN
 *       hidden layers of WIDTH, INPUTS features and CLASSES classes
 * Writes stages.bin: 2 * STAGES int64, each stage's first layer and end.
 *
 * pipeline.c is an MPI source, so this is linked with mpicc;
 * pp_layers_of calls no MPI function, so this never calls MPI_Init and
 * runs without mpirun. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipeline.h"
#include "producer.h"

static void layers_of(void)
{
    const size_t hidden = producer_arg(0), inputs = producer_arg(1);
    const size_t width = producer_arg(2), classes = producer_arg(3);
    const size_t stages = producer_arg(4);
    /* A model or a pipeline out of range is a mistake in the test. */
    if (hidden >= MLP_MAX_LAYERS || inputs == 0 || inputs > 1 << 16 ||
        width == 0 || width > 1 << 16 || classes == 0 ||
        classes > 1 << 16 || stages == 0 || stages > hidden + 1) {
        fprintf(stderr, "producer: layers_of: a number out of range\n");
        exit(2);
    }
    const int layer_count = (int)hidden + 1;
    size_t parameters[MLP_MAX_LAYERS];
    for (int l = 0; l < layer_count; l++)
        parameters[l] = (l == layer_count - 1 ? classes : width) *
                        ((l == 0 ? inputs : width) + 1);
    int64_t *bounds = producer_alloc(2 * stages, sizeof *bounds, "stages");
    for (size_t s = 0; s < stages; s++) {
        int first = -1, end = -1;
        pp_layers_of(layer_count, parameters, (int)stages, (int)s, &first,
                     &end);
        bounds[2 * s] = first;
        bounds[2 * s + 1] = end;
    }
    produce("stages", bounds, sizeof *bounds, 2 * stages);
    free(bounds);
}

int main(int argc, char **argv)
{
    static const producer_case cases[] = { { "layers_of", 5, layers_of,
                                             false } };
    return producer_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
