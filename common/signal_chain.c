/* Passing a fault on: see signal_chain.h. */
#define _GNU_SOURCE
#include "signal_chain.h"

#include <string.h>

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

int signal_chain_install(void (*handler)(int, siginfo_t *, void *),
                         struct sigaction *before_segv,
                         struct sigaction *before_bus)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = handler;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, before_segv) != 0 ||
        sigaction(SIGBUS, &action, before_bus) != 0)
        return -1;
    return 0;
}
