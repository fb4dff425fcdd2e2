/* Writing benchmark results: one table for people, one CSV for tools.
 *
 * Every row of build/bench/results.csv is one measurement with the columns
 *   lesson,variant,size,threads,ranks,metric,value,unit,baseline,ratio
 * where `ratio` is value over the value of the variant named in `baseline`,
 * measured in the same run (empty when there is no baseline). Ratios taken
 * side by side survive a noisy, shared machine; absolute figures do not. */
#ifndef ZZ_BENCH_H
#define ZZ_BENCH_H

#include <stdio.h>

typedef struct {
    const char *lesson;   /* "01" */
    const char *variant;  /* "fast" */
    const char *size;     /* "8192x8192" */
    int threads, ranks;
    const char *metric;   /* "bandwidth" */
    double value;
    const char *unit;     /* "GB/s" */
    const char *baseline; /* variant compared against, or NULL */
    double baseline_value;
} bench_row;

/* Opens the CSV for appending (path from ZZ_BENCH_CSV, else
 * build/bench/results.csv), writing the header if the file is new.
 * Returns NULL, after saying why, if it cannot. */
FILE *bench_csv_open(void);

/* Appends one row; also prints it as a line of the table on stdout. */
void bench_record(FILE *csv, const bench_row *row);

/* Appends one row to the CSV only (for benchmarks with tables of their
 * own). */
void bench_csv_row(FILE *csv, const bench_row *row);

#endif
