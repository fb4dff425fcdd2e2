/* Writing benchmark results. */
#include "bench.h"

#include <stdlib.h>

FILE *bench_csv_open(void)
{
    const char *path = getenv("ZZ_BENCH_CSV");
    if (path == NULL)
        path = "build/bench/results.csv";
    FILE *csv = fopen(path, "a+");
    if (csv == NULL) {
        perror(path);
        return NULL;
    }
    fseek(csv, 0, SEEK_END);
    if (ftell(csv) == 0)
        fprintf(csv, "lesson,variant,size,threads,ranks,metric,value,unit,"
                "baseline,ratio\n");
    return csv;
}

static void ratio_text(const bench_row *row, char *ratio, size_t len)
{
    ratio[0] = '\0';
    if (row->baseline != NULL && row->baseline_value > 0.0)
        snprintf(ratio, len, "%.3f", row->value / row->baseline_value);
}

void bench_csv_row(FILE *csv, const bench_row *row)
{
    char ratio[32];
    ratio_text(row, ratio, sizeof ratio);
    if (csv != NULL)
        fprintf(csv, "%s,%s,%s,%d,%d,%s,%.6g,%s,%s,%s\n", row->lesson,
                row->variant, row->size, row->threads, row->ranks, row->metric,
                row->value, row->unit, row->baseline ? row->baseline : "",
                ratio);
}

void bench_record(FILE *csv, const bench_row *row)
{
    char ratio[32];
    ratio_text(row, ratio, sizeof ratio);
    printf("  %-4s %-16s %-11s %3d %3d  %-10s %10.3f %-8s %-16s %s\n",
           row->lesson, row->variant, row->size, row->threads, row->ranks,
           row->metric, row->value, row->unit,
           row->baseline ? row->baseline : "-", ratio[0] ? ratio : "-");
    bench_csv_row(csv, row);
}
