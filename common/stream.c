/* STREAM's triad. */
#include "stream.h"

#include "matrix.h"
#include "timer.h"

#include <stdlib.h>

triad_arrays triad_alloc(size_t n)
{
    triad_arrays arrays = { n, vector_alloc(n, "triad array a"),
                            vector_alloc(n, "triad array b"),
                            vector_alloc(n, "triad array c") };
    for (size_t i = 0; i < n; i++) {
        arrays.b[i] = 1.0;
        arrays.c[i] = 2.0;
    }
    return arrays;
}

void triad_free(triad_arrays *arrays)
{
    matrix_free(arrays->a);
    matrix_free(arrays->b);
    matrix_free(arrays->c);
    arrays->a = arrays->b = arrays->c = NULL;
}

double triad_once(triad_arrays *arrays)
{
    const double scalar = 3.0;
    double *restrict a = arrays->a;
    const double *restrict b = arrays->b, *restrict c = arrays->c;
    double start = timer_now();
    for (size_t i = 0; i < arrays->n; i++)
        a[i] = b[i] + scalar * c[i];
    return timer_now() - start;
}

double triad_bytes(size_t n)
{
    return 3.0 * sizeof(double) * (double)n;
}

double stream_triad_gbs(size_t n, int reps)
{
    enum { max_reps = 64 };
    double seconds[max_reps];
    triad_arrays arrays = triad_alloc(n);
    if (reps > max_reps)
        reps = max_reps;
    if (reps < 1)
        reps = 1;
    triad_once(&arrays); /* warm up: TLB, frequency */
    for (int r = 0; r < reps; r++)
        seconds[r] = triad_once(&arrays);
    triad_free(&arrays);
    return triad_bytes(n) / timings_median(seconds, reps) / 1e9;
}
