/* Lesson 03's test cases, in one place for both sides: the judge
 * (tests/test_03-openmp.c), which writes or generates the inputs and
 * decides, and the producer (tests/producer/03-openmp.c), which runs the
 * student's code on them. Both must agree on every shape, order, seed and
 * count, or the producer would read the wrong number of elements. */
#ifndef ZZ_TEST03_CASES_H
#define ZZ_TEST03_CASES_H

#include <stddef.h>

/* The most threads a product is tested with. */
enum { MAX_TEST_THREADS = 4 };

/* The seed of every generated A and x. */
enum { CASE_SEED = 2025 };

typedef struct {
    size_t m, n;
    const char *why;  /* what the shape catches */
} shape;

/* The hold (compute_rows.h's row_log_hold_first): armed for the largest
 * row shape and the largest triangular order, where every thread of any
 * schedule has rows, on 2 or more threads. 2.5 s: a held thread sleeps,
 * so another one has a core even on a busy machine, and needs well under
 * a millisecond to reach its first row; the cases' limits leave room for
 * a serialised product held that long. */
enum { HOLD_MS = 2500, HOLD_MIN_ROWS = 257 };

/* Shapes for the row split: `rows THREADS SHAPE` is one of these. */
static const shape shapes[] = {
    { 1, 1, "one row for many threads" },
    { 7, 13, "fewer rows than blocks of 4 per thread" },
    { 100, 37, "rows not a multiple of the threads" },
    { 257, 300, "a larger, ragged product" },
};
enum { shape_count = sizeof shapes / sizeof shapes[0] };

/* The schedules the triangular product runs under (`triangular THREADS
 * SCHEDULE` takes the index), as OMP_SCHEDULE spells them: the tests set
 * that variable, as a user would, and schedule(runtime) reads it. `kind` is
 * the schedule's omp_sched_t value as the OpenMP standard fixes it
 * (static 1, dynamic 2, guided 3). `dealt_in_chunks`, when not 0, is the
 * chunk of a schedule whose hand-out the standard fixes: static with a
 * chunk deals chunks of that many iterations to the threads in turn,
 * thread 0 first, so row i goes to thread (i / chunk) % T, on every run.
 * No other schedule fixes which thread gets a row. */
typedef struct {
    const char *omp_schedule;
    int kind;
    int dealt_in_chunks;
} schedule_case;
static const schedule_case schedules[] = {
    { "static", 1, 0 },
    { "static,3", 1, 3 },
    { "dynamic", 2, 0 },
    { "guided", 3, 0 },
};
enum { schedule_count = sizeof schedules / sizeof schedules[0] };

/* Orders of L, from one row to more rows than any chunk size; one run of
 * the producer computes all of them, in this order. */
static const size_t triangular_orders[] = { 1, 2, 5, 64, 301 };
enum { order_count = sizeof triangular_orders / sizeof triangular_orders[0] };

/* The row split's shapes, two with fewer rows than threads or fewer
 * columns than threads, and one where every thread's partial results land
 * on the same few elements of y: that is where threads that add into
 * shared memory collide most. One run of the producer computes all of
 * them, generating A and x from CASE_SEED itself: the widest A is 25 MB,
 * too much to pass through a file for every test. */
static const shape column_shapes[] = {
    { 1, 1, "one element" },
    { 7, 13, "small" },
    { 100, 37, "rows not a multiple of the threads" },
    { 257, 300, "larger, ragged" },
    { 3, 1000, "fewer rows than threads" },
    { 300, 2, "fewer columns than threads" },
    { 16, 200000, "every thread on the same 16 elements of y" },
};
enum { column_shape_count = sizeof column_shapes / sizeof column_shapes[0] };

/* Calls of the column split on each input (the judge says why three). */
enum { COLUMN_CALLS = 3 };

/* The padded counters are tested for 1 .. MAX_COUNTER_THREADS threads;
 * each thread counts COUNTER_EVENTS events. */
enum { MAX_COUNTER_THREADS = 8, COUNTER_EVENTS = 100000 };

#endif
