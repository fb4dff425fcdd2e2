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

void bench_record(FILE *csv, const bench_row *row)
{
    char ratio[32] = "";
    if (row->baseline != NULL && row->baseline_value > 0.0)
        snprintf(ratio, sizeof ratio, "%.3f", row->value / row->baseline_value);
    printf("  %-4s %-16s %-11s %3d %3d  %-10s %10.3f %-8s %-16s %s\n",
           row->lesson, row->variant, row->size, row->threads, row->ranks,
           row->metric, row->value, row->unit,
           row->baseline ? row->baseline : "-", ratio[0] ? ratio : "-");
    if (csv != NULL)
        fprintf(csv, "%s,%s,%s,%d,%d,%s,%.6g,%s,%s,%s\n", row->lesson,
                row->variant, row->size, row->threads, row->ranks, row->metric,
                row->value, row->unit, row->baseline ? row->baseline : "",
                ratio);
}
