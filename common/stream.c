/* STREAM's triad. */
#include "stream.h"

#include "matrix.h"
#include "timer.h"

#include <stdio.h>
#include <stdlib.h>

int triad_try_alloc(size_t n, triad_arrays *arrays, char *error,
                    size_t error_len)
{
    *arrays = (triad_arrays){ n, NULL, NULL, NULL };
    arrays->a = vector_try_alloc(n, "triad array a", error, error_len);
    if (arrays->a != NULL)
        arrays->b = vector_try_alloc(n, "triad array b", error, error_len);
    if (arrays->b != NULL)
        arrays->c = vector_try_alloc(n, "triad array c", error, error_len);
    if (arrays->c == NULL) {
        triad_free(arrays);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        arrays->b[i] = 1.0;
        arrays->c[i] = 2.0;
    }
    return 0;
}

triad_arrays triad_alloc_or_exit(size_t n)
{
    triad_arrays arrays;
    char error[256];
    if (triad_try_alloc(n, &arrays, error, sizeof error) != 0) {
        fprintf(stderr, "error: %s\n", error);
        exit(2);
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

int stream_triad_gbs(size_t n, int reps, double *gbs, char *error,
                     size_t error_len)
{
    double seconds[TRIAD_MAX_REPS];
    triad_arrays arrays;
    if (triad_try_alloc(n, &arrays, error, error_len) != 0)
        return -1;
    if (reps > TRIAD_MAX_REPS)
        reps = TRIAD_MAX_REPS;
    if (reps < 1)
        reps = 1;
    triad_once(&arrays); /* warm up: TLB, frequency */
    for (int r = 0; r < reps; r++)
        seconds[r] = triad_once(&arrays);
    triad_free(&arrays);
    *gbs = triad_bytes(n) / timings_median(seconds, reps) / 1e9;
    return 0;
}
