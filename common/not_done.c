/* The marker for unwritten code, as programs see it: print and stop. */
#include "not_done.h"

#include <stdio.h>
#include <stdlib.h>

_Noreturn void not_done_at(const char *file, int line, const char *function)
{
    fprintf(stderr, "not started: %s:%d (%s): replace NOT_DONE() with your "
            "code\n", file, line, function);
    exit(NOT_DONE_EXIT);
}
