/* A progress line for long runs: step, loss and samples per second. */
#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include "timer.h"

#include <unistd.h>

progress_line progress_start(FILE *out, long steps)
{
    progress_line line;
    line.out = out;
    line.interactive = isatty(fileno(out));
    /* The clock starts here, so that the first report already has a rate:
     * call this just before the loop it reports on. */
    line.start = timer_now();
    line.steps = steps;
    return line;
}

void progress_report(progress_line *line, long step, double loss,
                     double samples)
{
    char text[160];
    int length;
    double elapsed = timer_now() - line->start;
    if (line->steps > 0)
        length = snprintf(text, sizeof text, "step %ld/%ld", step,
                          line->steps);
    else
        length = snprintf(text, sizeof text, "step %ld", step);
    if (length < 0 || (size_t)length >= sizeof text)
        length = 0;
    if (elapsed > 0.0)
        snprintf(text + length, sizeof text - (size_t)length,
                 "  loss %.4f  %.0f samples/s", loss, samples / elapsed);
    else
        snprintf(text + length, sizeof text - (size_t)length,
                 "  loss %.4f  - samples/s", loss);
    if (line->interactive)
        /* Back to the line's start, the new text, and erase whatever a
         * longer previous line left to the right of it. */
        fprintf(line->out, "\r%s\033[K", text);
    else
        fprintf(line->out, "%s\n", text);
    /* A log read with tail -f shows each step as it happens. */
    fflush(line->out);
}

void progress_finish(progress_line *line)
{
    if (line->interactive) {
        fputc('\n', line->out);
        fflush(line->out);
    }
}
