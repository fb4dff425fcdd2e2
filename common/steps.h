/* Where each rank has got to, so that a run that hangs can say where.
 *
 * A driver marks the steps of a lesson as it enters them
 * (steps_enter("TODO 3: broadcast x")), and the communication ledger marks
 * the MPI call a rank is inside. Both go to a small file per rank that the
 * test harness reads when it has to stop a run: "rank 0 is in TODO 4 (in
 * MPI_Allgatherv); rank 1 is in TODO 3 (in MPI_Bcast)" names a deadlock far
 * better than "timed out".
 *
 * The files live in the folder named by ZZ_STEPS_DIR; without it every call
 * here does nothing. Writes go to a memory-mapped page, so marking a step
 * costs a memcpy, and the file keeps the last mark even when the process is
 * killed. */
#ifndef ZZ_STEPS_H
#define ZZ_STEPS_H

/* The file is two fixed fields of STEPS_FIELD bytes, the step and then the
 * MPI call, each a NUL-padded line, so a reader never sees a half-written
 * record longer than a field; then two counts (uint64_t): at STEPS_MOVES
 * the marks made, steps entered and MPI calls entered and left, which
 * moves on as long as the rank does; at STEPS_ENTERED the steps entered.
 * The harness calls a run whose every rank sits inside an MPI call while
 * no count moves a deadlock, and one whose every rank goes on making MPI
 * calls while none enters a step an endless loop of calls. */
enum { STEPS_FIELD = 96, STEPS_MOVES = 2 * STEPS_FIELD,
       STEPS_ENTERED = STEPS_MOVES + 8, STEPS_PAGE = STEPS_ENTERED + 8 };

/* Opens this rank's file (ZZ_STEPS_DIR/rank-RANK). Call once, early. */
void steps_open(int rank);

/* This rank now works on `step` (at most STEPS_FIELD - 1 characters are
 * kept). */
void steps_enter(const char *step);

/* The step last entered ("" before the first), for given code's messages:
 * the communication ledger names the TODO a rank was in when it stops it. */
const char *steps_current(void);

/* This rank is inside MPI call `call`; NULL when it has returned. */
void steps_in_call(const char *call);

#endif
