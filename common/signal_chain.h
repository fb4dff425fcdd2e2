/* Catching faults in memory of one's own, and passing the others on: a
 * handler for SIGSEGV or SIGBUS that finds the fault is not its own hands
 * it to the one that was there before.
 *
 * The cpu device (device.c) and lesson 07's watch of the delayed update
 * (offload_state.c) each catch faults in memory of their own; a fault
 * anywhere else is the program's, and must end it as it would have
 * without them (or reach MPI's handler, or another's). */
#ifndef ZZ_SIGNAL_CHAIN_H
#define ZZ_SIGNAL_CHAIN_H

#include <signal.h>

/* Calls `before` (what sigaction gave back when the caller's handler was
 * installed) for the signal, or, when that was the system's own action,
 * restores it: the faulting access then runs again and ends the process
 * as it would have. */
void signal_chain(const struct sigaction *before, int signal_number,
                  siginfo_t *info, void *context);

/* Installs `handler` (SA_SIGINFO) for SIGSEGV and SIGBUS, both: Linux
 * says SIGSEGV for a page without access, macOS SIGBUS. What was there
 * before goes to *before_segv and *before_bus, for signal_chain. 0, or -1
 * when sigaction fails. */
int signal_chain_install(void (*handler)(int, siginfo_t *, void *),
                         struct sigaction *before_segv,
                         struct sigaction *before_bus);

#endif
