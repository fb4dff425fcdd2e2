/* Lesson 03: the one call through which your threaded products compute
 * rows of y, and the row log, which notes who computed each row.
 *
 * A threaded product can give every y[i] its right value and still be
 * wrong: rows computed twice by threads whose blocks overlap, a schedule
 * other than the one asked for, one thread doing all the work while the
 * others wait. The numbers do not show any of that. So your code computes
 * rows only through compute_rows, which is given, and which notes in the
 * row log, for each row, how many times it was computed and by which
 * thread of which team. The tests and the drivers read the log; your code
 * never touches it. You do not need to change this file. */
#ifndef ZZ_LESSON03_COMPUTE_ROWS_H
#define ZZ_LESSON03_COMPUTE_ROWS_H

#include <stdbool.h>
#include <stddef.h>

/* For TODO 1, 2 and 6. Rows first .. first+rows-1 of y = A x, using the
 * first `cols` entries of each row: A is row-major with rows `lda` doubles
 * apart (so row r starts at &A[r*lda]), x is (cols), y is indexed like
 * A's rows. The same call as
 *     matvec_rows(rows, cols, &A[first*lda], lda, x, &y[first])
 * (common/kernels.h), so each y[r] has the same bits as in one serial
 * call; and, while the row log is on, noted there. Any thread may call it
 * at any time, as long as no two calls write the same y[r]. */
void compute_rows(size_t first, size_t rows, size_t cols, const double *A,
                  size_t lda, const double *x, double *y);

/* ---- The row log: for the given drivers and the tests' producer only ----
 * (the checks on your files refuse these calls in them). */

/* Starts noting rows 0 .. rows-1, every count zero. Call it outside any
 * parallel region. False when memory runs out. */
bool row_log_start(size_t rows);

/* Stops noting, and copies out what the log saw of each row r below the
 * `rows` it was started with: times[r], how many times compute_rows
 * computed it; thread[r] and team[r], omp_get_thread_num() and
 * omp_get_num_threads() in the call that computed it last (-1 when none
 * did). Any of the three may be NULL. Returns how many rows at or beyond
 * `rows` were computed: rows that do not exist. Call it outside any
 * parallel region. */
size_t row_log_stop(int *times, int *thread, int *team);

/* Side by side: threads that compute rows in turn (a critical section,
 * ordered, a lock around the work) give every row its bits, each thread
 * its share, and no time saved. While the log is on, after this call the
 * first call of compute_rows made in a team of two or more threads waits
 * inside, for at most `ms` milliseconds, until another thread's call
 * begins; a thread that is held keeps whatever lock it took. Call it
 * outside any parallel region, after row_log_start. */
void row_log_hold_first(int ms);

/* What the hold saw, once the region is over: ROW_LOG_HOLD_MET (another
 * thread's call began), ROW_LOG_HOLD_ALONE (none did in time: *held_ms
 * says how long it waited), ROW_LOG_HOLD_NO_TEAM (the first call came from
 * a team of one, and was not held), or ROW_LOG_HOLD_OFF (not armed, or no
 * call yet). Disarms it. */
enum {
    ROW_LOG_HOLD_OFF, ROW_LOG_HOLD_MET, ROW_LOG_HOLD_ALONE,
    ROW_LOG_HOLD_NO_TEAM
};
int row_log_hold_outcome(int *held_ms);

#endif
