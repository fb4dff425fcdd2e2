/* What a training run holds, watched by the driver around the student's
 * code (lessons 06 and 07): the memory ledger's peaks at the end of
 * training, and how far the process's allocator grew beside the ledger.
 *
 * The ledger sees what goes through ledger_alloc; the allocator sees
 * everything (memory_ledger_heap_in_use). A driver samples both after
 * every hook of the student's code: memory that the allocator's growth
 * shows and the ledger's does not was allocated behind the ledger's back.
 * The report writes both growths; the tests compare them.
 *
 * Only given code calls these (the lessons' symbol rules deny ledger_* to
 * a student's file). */
#ifndef ZZ_LEDGER_WATCH_H
#define ZZ_LEDGER_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "memory_ledger.h"

typedef struct {
    bool host;                   /* the host categories count too */
    size_t heap_baseline, heap_growth;     /* the allocator's bytes */
    size_t ledger_baseline, ledger_growth; /* the ledger's, at the same
                                              moments */
    /* At the end of the last training step (ledger_watch_keep_peaks): */
    size_t peaks[MEMORY_CATEGORIES];
    size_t peak_total;           /* memory_ledger_peak_total: the device's
                                    side, all but the host's */
    size_t host_peak_total;      /* memory_ledger_host_peak_total */
    /* The allocator's bytes in use at the end of the first and of the
     * last training step (ledger_watch_step_done): a step that keeps
     * what it allocates makes the second larger, step after step. */
    size_t heap_after_first_step, heap_after_last_step;
} ledger_watch;

/* Starts the OpenMP runtime's threads, with a product just large enough
 * to be shared among them (common/matmul.c). The runtime allocates its own
 * bookkeeping when it first starts them (LLVM's, under clang, some 70 KiB
 * a process): call this before ledger_watch_start, so that this is in the
 * baseline and not taken for memory behind the ledger's back. */
void ledger_watch_start_threads(void);

/* The baselines: what the allocator and the ledger hold now (the ledger's
 * device side, and with `host` its host side too), before the state the
 * growths are measured from is allocated. */
void ledger_watch_start(ledger_watch *w, bool host);

/* One sample: the largest growth of each beyond its baseline so far. */
void ledger_watch_sample(ledger_watch *w);

/* Keeps the ledger's peaks, by category and in total, as they are now:
 * at the end of the last step, before the held-out accuracy and the
 * report add anything. */
void ledger_watch_keep_peaks(ledger_watch *w);

/* The report's lines "peak NAME BYTES", one per category
 * (memory_category_name), of the kept peaks. */
void ledger_watch_write_peaks(const ledger_watch *w, FILE *report);

/* At the end of training step `step` (from 0), after its update: the
 * allocator's bytes in use, kept for the first step and for the last
 * (`last`). */
void ledger_watch_step_done(ledger_watch *w, long step, bool last);

/* The report's lines "ledger_growth BYTES" and "heap_growth BYTES", and
 * "heap_after_first_step BYTES" and "heap_after_last_step BYTES". */
void ledger_watch_write_growth(const ledger_watch *w, FILE *report);

#endif
