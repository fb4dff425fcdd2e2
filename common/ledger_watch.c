/* What a training run holds, watched by the driver. */
#include "ledger_watch.h"

#include "matmul.h"

void ledger_watch_start_threads(void)
{
    static float a[32 * 33], b[33 * 32], c[32 * 32];
    matmul_ab(32, 32, 33, a, b, c, 0);
}

/* What the ledger holds now, on the sides the watch counts. */
static size_t ledger_held(const ledger_watch *w)
{
    return memory_ledger_current_total() +
           (w->host ? memory_ledger_host_current_total() : 0);
}

void ledger_watch_start(ledger_watch *w, bool host)
{
    *w = (ledger_watch){ .host = host };
    w->heap_baseline = memory_ledger_heap_in_use();
    w->ledger_baseline = ledger_held(w);
}

void ledger_watch_sample(ledger_watch *w)
{
    size_t heap = memory_ledger_heap_in_use();
    if (heap > w->heap_baseline && heap - w->heap_baseline > w->heap_growth)
        w->heap_growth = heap - w->heap_baseline;
    /* The ledger at the same moments: what the heap's growth is compared
     * with (its own peak also counts buffers that come and go inside a
     * hook, such as the collectives'). */
    size_t held = ledger_held(w);
    if (held > w->ledger_baseline &&
        held - w->ledger_baseline > w->ledger_growth)
        w->ledger_growth = held - w->ledger_baseline;
}

void ledger_watch_keep_peaks(ledger_watch *w)
{
    for (int c = 0; c < MEMORY_CATEGORIES; c++)
        w->peaks[c] = memory_ledger_peak((memory_category)c);
    w->peak_total = memory_ledger_peak_total();
    w->host_peak_total = memory_ledger_host_peak_total();
}

void ledger_watch_write_peaks(const ledger_watch *w, FILE *report)
{
    for (int c = 0; c < MEMORY_CATEGORIES; c++)
        fprintf(report, "peak %s %zu\n",
                memory_category_name((memory_category)c), w->peaks[c]);
}

void ledger_watch_step_done(ledger_watch *w, long step, bool last)
{
    const size_t heap = memory_ledger_heap_in_use();
    if (step == 0)
        w->heap_after_first_step = heap;
    if (last)
        w->heap_after_last_step = heap;
}

void ledger_watch_write_growth(const ledger_watch *w, FILE *report)
{
    fprintf(report, "ledger_growth %zu\nheap_growth %zu\n"
            "heap_after_first_step %zu\nheap_after_last_step %zu\n",
            w->ledger_growth, w->heap_growth, w->heap_after_first_step,
            w->heap_after_last_step);
}
