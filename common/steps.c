/* Where each rank has got to. */
#define _POSIX_C_SOURCE 200809L
#include "steps.h"

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The file: the step's field, the MPI call's, the count of marks
 * (steps.h). */
enum { FIELD = STEPS_FIELD, PAGE = STEPS_PAGE };

static char *page;

void steps_open(int rank)
{
    const char *dir = getenv("ZZ_STEPS_DIR");
    char path[PATH_MAX];
    if (dir == NULL || page != NULL)
        return;
    /* Reporting is a help, never a reason to fail the run: a folder whose
     * name leaves no room, or one that takes no file, means no steps. */
    int length = snprintf(path, sizeof path, "%s/rank-%d", dir, rank);
    if (length < 0 || length >= (int)sizeof path)
        return;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return;
    if (ftruncate(fd, PAGE) == 0) {
        void *mapped = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
                            fd, 0);
        if (mapped != MAP_FAILED)
            page = mapped;
    }
    close(fd);
}

static uint64_t moves, entered;

/* A mark: its field, then the count, which a reader compares only with
 * what it read before (a torn read of it is a move, at worst). */
static void write_field(char *field, const char *text)
{
    char line[FIELD] = { 0 };
    if (text != NULL)
        snprintf(line, sizeof line, "%s\n", text);
    memcpy(field, line, FIELD);
    moves++;
    memcpy(page + STEPS_MOVES, &moves, sizeof moves);
}

/* The step last entered, for messages of given code (steps_current). */
static char current_step[STEPS_FIELD];

void steps_enter(const char *step)
{
    snprintf(current_step, sizeof current_step, "%s", step ? step : "");
    if (page != NULL) {
        write_field(page, step);
        entered++;
        memcpy(page + STEPS_ENTERED, &entered, sizeof entered);
    }
}

const char *steps_current(void)
{
    return current_step;
}

void steps_in_call(const char *call)
{
    if (page != NULL)
        write_field(page + FIELD, call);
}
