/* Monotonic wall-clock time. */
#define _POSIX_C_SOURCE 200809L
#include "timer.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double timer_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double timings_median(const double *values, int count)
{
    /* Benchmarks take a handful of repetitions: a copy on the stack is
     * enough, and keeps this free of allocation failures. */
    double sorted[TIMINGS_MAX];
    if (count < 1)
        return 0.0;
    if (count > TIMINGS_MAX)
        count = TIMINGS_MAX;
    memcpy(sorted, values, (size_t)count * sizeof *sorted);
    qsort(sorted, (size_t)count, sizeof *sorted, compare_doubles);
    if (count % 2 == 1)
        return sorted[count / 2];
    return 0.5 * (sorted[count / 2 - 1] + sorted[count / 2]);
}
