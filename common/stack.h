/* Whether memory lies on the calling thread's stack.
 *
 * Given code asks it to tell a student's local variable from memory that
 * outlives a function: a buffer that MPI may still read or write after the
 * call that started it returned (common/comm_ledger.c), a device_copy that
 * stays pending until its device_wait (common/device.c). A local variable
 * of a function that returns before then is a bug that one library lets
 * pass and another does not; naming it is the point.
 *
 * glibc finds the main thread's stack through /proc, which a graded
 * program's run-time boundary hides (common/boundary.h): stack_find_main
 * notes it before then (MPI_Init and device_open call it). Other threads'
 * stacks are found when asked. Where the system cannot say (not glibc nor
 * macOS), nothing lies on a stack. */
#ifndef ZZ_STACK_H
#define ZZ_STACK_H

#include <stdbool.h>

/* Notes the calling thread, the main one, and its stack. Call early, before
 * a boundary; calling it again changes nothing. */
void stack_find_main(void);

/* Whether `address` lies on the calling thread's stack. */
bool stack_holds(const void *address);

#endif
