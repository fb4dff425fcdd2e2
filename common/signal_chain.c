/* Passing a fault on: see signal_chain.h. */
#define _GNU_SOURCE
#include "signal_chain.h"

void signal_chain(const struct sigaction *before, int signal_number,
                  siginfo_t *info, void *context)
{
    if (before->sa_flags & SA_SIGINFO) {
        if (before->sa_sigaction != NULL) {
            before->sa_sigaction(signal_number, info, context);
            return;
        }
    } else if (before->sa_handler != SIG_DFL &&
               before->sa_handler != SIG_IGN) {
        before->sa_handler(signal_number);
        return;
    }
    signal(signal_number, SIG_DFL);
}
