/* Given; for main.c and ring_check.c. Before each start_layer_average:
 * an overlap_state that already holds MLP_MAX_LAYERS started averages has
 * no room for another, and the start would write past its arrays (a crash
 * later, in a place that says nothing). Most often finish_averages never
 * set state->started back to 0, so the starts of every step pile up. */
#ifndef ZZ_LESSON05_OVERLAP_GUARD_H
#define ZZ_LESSON05_OVERLAP_GUARD_H

#include <stdio.h>

#include <mpi.h>

#include "data_parallel.h"

static inline void overlap_guard(const overlap_state *state,
                                 const char *program)
{
    if (state->started >= 0 && state->started < MLP_MAX_LAYERS)
        return;
    int rank = -1;
    (void)MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "%s: rank %d: state->started is %d before a call of "
            "start_layer_average, whose arrays hold %d (MLP_MAX_LAYERS): "
            "the starts of earlier steps were never forgotten. Hint: TODO 4: "
            "finish_averages completes the step's averages and sets "
            "state->started back to 0, ready for the next step\n", program,
            rank, state->started, MLP_MAX_LAYERS);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#endif
