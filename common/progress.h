/* A progress line for long runs: step, loss and samples per second.
 *
 * On a terminal the line is redrawn in place; when output goes to a file
 * or a pipe, each report is a plain line, so logs stay readable. */
#ifndef ZZ_PROGRESS_H
#define ZZ_PROGRESS_H

#include <stdio.h>

typedef struct {
    FILE *out;
    int interactive;      /* out is a terminal: redraw in place */
    double start;         /* timer_now() when progress_start was called:
                             call it just before the loop it reports on */
    long steps;           /* total, for "step 12/300"; 0 if unknown */
} progress_line;

progress_line progress_start(FILE *out, long steps);

/* Reports step `step` (counting from 1), its loss, and the samples done so
 * far, from which it computes samples per second since progress_start:
 * "step 12/300  loss 0.4321  52000 samples/s". */
void progress_report(progress_line *line, long step, double loss,
                     double samples);

/* Ends the line (a newline after the last in-place redraw). */
void progress_finish(progress_line *line);

#endif
