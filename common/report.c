/* A program's report to the test harness. */
#include "report.h"

FILE *report_open(const char *dir, int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.txt", dir, rank);
    FILE *file = fopen(path, "w");
    if (file == NULL)
        perror(path);
    return file;
}

int report_write_doubles(const char *dir, const char *name, int rank,
                         const double *values, size_t count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-rank-%d.bin", dir, name, rank);
    FILE *file = fopen(path, "wb");
    if (file == NULL) {
        perror(path);
        return -1;
    }
    size_t written = fwrite(values, sizeof *values, count, file);
    if (fclose(file) != 0 || written != count) {
        perror(path);
        return -1;
    }
    return 0;
}
