/* The marker for code a student has not written yet.
 *
 * A skeleton function holds NOT_DONE() where the student's code goes. If it
 * runs, the program stops with "not started: FILE:LINE (FUNCTION)" instead
 * of going on to compute nonsense, so a student sees where to begin rather
 * than a wall of wrong numbers. A program stops with NOT_DONE_EXIT; under
 * the test harness the same marker fails the test with the same words. */
#ifndef ZZ_NOT_DONE_H
#define ZZ_NOT_DONE_H

/* Distinct from 0 (success), 1 (failure) and 2 (bad input). */
enum { NOT_DONE_EXIT = 3 };

#define NOT_DONE() not_done_at(__FILE__, __LINE__, __func__)

_Noreturn void not_done_at(const char *file, int line, const char *function);

#endif
