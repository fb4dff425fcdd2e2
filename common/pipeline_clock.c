/* The virtual clock of a pipeline schedule: see pipeline_clock.h. */
#include "pipeline_clock.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long cost_of(pipeline_kind kind)
{
    return kind == PIPELINE_FORWARD ? PIPELINE_FORWARD_COST
                                    : PIPELINE_BACKWARD_COST;
}

/* The end of each (kind, stage, micro-batch), -1 until it has run. */
typedef struct {
    int stages, micro_batches;
    long *end;
} ends;

static long *end_of(const ends *e, pipeline_kind kind, int stage, int micro)
{
    return &e->end[((size_t)kind * (size_t)e->stages + (size_t)stage) *
                       (size_t)e->micro_batches + (size_t)micro];
}

/* When operation `op` of rank r may start as far as its input goes: -1
 * while what it waits for has not run. */
static long input_ready(const ends *e, const pipeline_schedule *s, int r,
                        const pipeline_op *op)
{
    const int stage = op->chunk * s->ranks + r;
    if (op->kind == PIPELINE_FORWARD)
        return stage == 0 ? 0
                          : *end_of(e, PIPELINE_FORWARD, stage - 1,
                                    op->micro);
    if (stage == e->stages - 1)
        return *end_of(e, PIPELINE_FORWARD, stage, op->micro);
    /* Its own forward has ended too: a stage's backward follows it. */
    long own = *end_of(e, PIPELINE_FORWARD, stage, op->micro);
    long above = *end_of(e, PIPELINE_BACKWARD, stage + 1, op->micro);
    return own < 0 || above < 0 ? -1 : own > above ? own : above;
}

static const char *kind_name(pipeline_kind kind)
{
    return kind == PIPELINE_FORWARD ? "forward" : "backward";
}

int pipeline_replay(const pipeline_schedule *s, long *const *starts,
                    long *makespan, char *error, size_t error_len)
{
    const int p = s->ranks;
    ends e = { s->chunks * p, s->micro_batches, NULL };
    const size_t slots = 2 * (size_t)e.stages * (size_t)e.micro_batches;
    e.end = malloc(slots * sizeof *e.end);
    size_t *next = calloc((size_t)p, sizeof *next);
    long *free_at = calloc((size_t)p, sizeof *free_at);
    int status = -1;
    if (e.end == NULL || next == NULL || free_at == NULL) {
        snprintf(error, error_len, "out of memory for the replay");
        goto done;
    }
    for (size_t k = 0; k < slots; k++)
        e.end[k] = -1;
    /* Every operation in range, and none twice. */
    for (int r = 0; r < p; r++)
        for (size_t k = 0; k < s->counts[r]; k++) {
            const pipeline_op *op = &s->ops[r][k];
            if (op->micro < 0 || op->micro >= s->micro_batches ||
                op->chunk < 0 || op->chunk >= s->chunks ||
                (op->kind != PIPELINE_FORWARD &&
                 op->kind != PIPELINE_BACKWARD)) {
                snprintf(error, error_len, "rank %d's operation %zu (%s of "
                         "micro-batch %d, chunk %d) is out of range: %d "
                         "micro-batches, %d chunk%s", r, k,
                         kind_name(op->kind), op->micro, op->chunk,
                         s->micro_batches, s->chunks,
                         s->chunks == 1 ? "" : "s");
                goto done;
            }
            long *seen = end_of(&e, op->kind, op->chunk * p + r, op->micro);
            if (*seen == -2) {
                snprintf(error, error_len, "rank %d runs the %s of "
                         "micro-batch %d%s twice", r, kind_name(op->kind),
                         op->micro, s->chunks > 1 ? " on one chunk" : "");
                goto done;
            }
            *seen = -2;
        }
    for (size_t k = 0; k < slots; k++)
        e.end[k] = -1;
    /* Each pass starts every operation whose input is there; an acyclic
     * schedule moves at least one on each pass. */
    long last_end = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int r = 0; r < p; r++)
            while (next[r] < s->counts[r]) {
                const pipeline_op *op = &s->ops[r][next[r]];
                long ready = input_ready(&e, s, r, op);
                if (ready < 0)
                    break;
                long start = ready > free_at[r] ? ready : free_at[r];
                starts[r][next[r]] = start;
                free_at[r] = start + cost_of(op->kind);
                *end_of(&e, op->kind, op->chunk * p + r, op->micro) =
                    free_at[r];
                if (free_at[r] > last_end)
                    last_end = free_at[r];
                next[r]++;
                moved = true;
            }
    }
    /* Every rank left waiting, each at the operation it waits at. */
    size_t used = 0;
    for (int r = 0; r < p; r++) {
        if (next[r] == s->counts[r])
            continue;
        const pipeline_op *op = &s->ops[r][next[r]];
        char chunk[32] = "";
        if (s->chunks > 1)
            snprintf(chunk, sizeof chunk, " on chunk %c", 'a' + op->chunk % 26);
        int n = snprintf(error + used, error_len - used, "%s rank %d at its "
                         "operation %zu, the %s of micro-batch %d%s",
                         used == 0 ? "the schedule cannot finish:" : ";", r,
                         next[r], kind_name(op->kind), op->micro, chunk);
        if (n < 0 || (size_t)n >= error_len - used)
            break;
        used += (size_t)n;
    }
    if (used > 0) {
        snprintf(error + used, error_len - used, ": each waits for an input "
                 "that no rank can produce first (a missing operation, or "
                 "ranks waiting on each other)");
        goto done;
    }
    *makespan = last_end;
    status = 0;
done:
    free(e.end);
    free(next);
    free(free_at);
    return status;
}

double pipeline_bubble(const pipeline_schedule *s, long makespan)
{
    long busy = 0;
    for (int r = 0; r < s->ranks; r++)
        for (size_t k = 0; k < s->counts[r]; k++)
            busy += cost_of(s->ops[r][k].kind);
    return makespan > 0 ? 1.0 - (double)busy /
                                    ((double)s->ranks * (double)makespan)
                        : 0.0;
}

/* "F3", "B12a": the operation's label. */
static void label_of(const pipeline_schedule *s, const pipeline_op *op,
                     char *label, size_t len)
{
    if (s->chunks > 1)
        snprintf(label, len, "%c%d%c", op->kind == PIPELINE_FORWARD ? 'F'
                                                                    : 'B',
                 op->micro, 'a' + op->chunk % 26);
    else
        snprintf(label, len, "%c%d", op->kind == PIPELINE_FORWARD ? 'F'
                                                                  : 'B',
                 op->micro);
}

void pipeline_print_timeline(FILE *out, const pipeline_schedule *s,
                             long *const *starts, long makespan)
{
    char widest[32];
    const pipeline_op last = { PIPELINE_BACKWARD, s->micro_batches - 1,
                               s->chunks - 1 };
    label_of(s, &last, widest, sizeof widest);
    const int width = (int)strlen(widest);
    for (int r = 0; r < s->ranks; r++) {
        fprintf(out, "rank %d |", r);
        long t = 0;
        for (size_t k = 0; k < s->counts[r]; k++) {
            for (; t < starts[r][k]; t++)
                fprintf(out, " %-*s", width, ".");
            char label[32];
            label_of(s, &s->ops[r][k], label, sizeof label);
            for (long c = 0; c < cost_of(s->ops[r][k].kind); c++, t++)
                fprintf(out, " %-*s", width, label);
        }
        for (; t < makespan; t++)
            fprintf(out, " %-*s", width, ".");
        fprintf(out, "\n");
    }
}
