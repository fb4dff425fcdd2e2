/* Lesson 03: compute_rows, and the row log it writes (see compute_rows.h).
 * Given: you do not need to change this file. */
#define _POSIX_C_SOURCE 200809L  /* nanosleep */
#include "compute_rows.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <omp.h>

#include "kernels.h"

/* What the log has seen; `times` is NULL while it is off. The drivers turn
 * it on and off outside parallel regions, so every thread of a region sees
 * the state it had when the region began. */
static struct {
    size_t rows;
    atomic_int *times, *thread, *team;
    atomic_size_t outside;
} row_log;

/* Notes that the calling thread computed rows first .. first+rows-1. Two
 * threads that compute the same row both note it, so every entry is
 * atomic: a count is how the tests find rows computed twice, and it must
 * not lose an increment to the very race it is there to reveal. Relaxed
 * order is enough: the log is read only after the parallel region, whose
 * end orders everything before it. */
static void note_rows(size_t first, size_t rows)
{
    int thread = omp_get_thread_num(), team = omp_get_num_threads();
    for (size_t r = first; r < first + rows; r++) {
        if (r >= row_log.rows) {
            atomic_fetch_add_explicit(&row_log.outside, 1,
                                      memory_order_relaxed);
            continue;
        }
        atomic_fetch_add_explicit(&row_log.times[r], 1,
                                  memory_order_relaxed);
        atomic_store_explicit(&row_log.thread[r], thread,
                              memory_order_relaxed);
        atomic_store_explicit(&row_log.team[r], team, memory_order_relaxed);
    }
}

/* The hold (row_log_hold_first). A thread is known by the address of a
 * thread-local variable: unique among the threads alive at once, in every
 * team, nested or not. */
static struct {
    atomic_int armed_ms;         /* 0: not armed */
    atomic_uintptr_t first;      /* the held thread; 0: none yet */
    atomic_bool second_came;
    atomic_int outcome, held_ms; /* written by the held thread */
} hold;
static _Thread_local char thread_mark;

static void hold_first_caller(void)
{
    uintptr_t me = (uintptr_t)&thread_mark, none = 0;
    if (!atomic_compare_exchange_strong(&hold.first, &none, me)) {
        if (none != me)
            atomic_store(&hold.second_came, true);
        return;
    }
    const int limit_ms = atomic_load(&hold.armed_ms);
    if (omp_get_num_threads() < 2) {
        atomic_store(&hold.outcome, ROW_LOG_HOLD_NO_TEAM);
        atomic_store(&hold.armed_ms, 0);
        return;
    }
    /* Looks again after 1 ms, then less and less often, up to every 64 ms:
     * a held thread that is not let go soon spends next to no CPU time. */
    int held = 0, tick_ms = 1;
    while (!atomic_load(&hold.second_came) && held < limit_ms) {
        const struct timespec tick = { 0, tick_ms * 1000000L };
        nanosleep(&tick, NULL);
        held += tick_ms;
        if (tick_ms < 64)
            tick_ms *= 2;
    }
    atomic_store(&hold.held_ms, held);
    atomic_store(&hold.outcome, atomic_load(&hold.second_came)
                                    ? ROW_LOG_HOLD_MET : ROW_LOG_HOLD_ALONE);
    atomic_store(&hold.armed_ms, 0);
}

void compute_rows(size_t first, size_t rows, size_t cols, const double *A,
                  size_t lda, const double *x, double *y)
{
    if (row_log.times != NULL && atomic_load(&hold.armed_ms) > 0)
        hold_first_caller();
    matvec_rows(rows, cols, &A[first * lda], lda, x, &y[first]);
    if (row_log.times != NULL)
        note_rows(first, rows);
}

bool row_log_start(size_t rows)
{
    size_t count = rows > 0 ? rows : 1;
    atomic_int *times = malloc(count * sizeof *times);
    atomic_int *thread = malloc(count * sizeof *thread);
    atomic_int *team = malloc(count * sizeof *team);
    if (times == NULL || thread == NULL || team == NULL) {
        free(times);
        free(thread);
        free(team);
        return false;
    }
    for (size_t r = 0; r < rows; r++) {
        atomic_init(&times[r], 0);
        atomic_init(&thread[r], -1);
        atomic_init(&team[r], -1);
    }
    row_log.rows = rows;
    row_log.thread = thread;
    row_log.team = team;
    atomic_init(&row_log.outside, 0);
    row_log.times = times;
    return true;
}

size_t row_log_stop(int *times, int *thread, int *team)
{
    for (size_t r = 0; r < row_log.rows && row_log.times != NULL; r++) {
        if (times != NULL)
            times[r] = atomic_load(&row_log.times[r]);
        if (thread != NULL)
            thread[r] = atomic_load(&row_log.thread[r]);
        if (team != NULL)
            team[r] = atomic_load(&row_log.team[r]);
    }
    size_t outside = atomic_load(&row_log.outside);
    free(row_log.times);
    free(row_log.thread);
    free(row_log.team);
    row_log.times = row_log.thread = row_log.team = NULL;
    row_log.rows = 0;
    atomic_init(&row_log.outside, 0);
    return outside;
}

void row_log_hold_first(int ms)
{
    atomic_store(&hold.first, 0);
    atomic_store(&hold.second_came, false);
    atomic_store(&hold.outcome, ROW_LOG_HOLD_OFF);
    atomic_store(&hold.held_ms, 0);
    atomic_store(&hold.armed_ms, ms > 0 ? ms : 0);
}

int row_log_hold_outcome(int *held_ms)
{
    atomic_store(&hold.armed_ms, 0);
    if (held_ms != NULL)
        *held_ms = atomic_load(&hold.held_ms);
    return atomic_load(&hold.outcome);
}
