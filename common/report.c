/* A program's report to the test harness. */
/* realpath is an X/Open function, beyond POSIX base. */
#define _XOPEN_SOURCE 700
#include "report.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* True when `path` (resolved, absolute) is `top` or inside it. */
static bool is_under(const char *path, const char *top)
{
    size_t len = strlen(top);
    return strncmp(path, top, len) == 0 &&
           (path[len] == '\0' || path[len] == '/');
}

/* "--out: cannot write to 'DIR': WHY", with DIR cut short ("...") where
 * the whole line would not fit: the reason is the part that must survive. */
static int refuse(char *error, size_t error_len, const char *dir,
                  const char *why)
{
    static const char prefix[] = "--out: cannot write to '";
    size_t fixed = sizeof prefix - 1 + strlen("...': ") + strlen(why) + 1;
    size_t room = error_len > fixed ? error_len - fixed : 0;
    if (strlen(dir) <= room + strlen("..."))
        snprintf(error, error_len, "%s%s': %s", prefix, dir, why);
    else
        snprintf(error, error_len, "%s%.*s...': %s", prefix, (int)room, dir,
                 why);
    return -1;
}

int report_check_dir(const char *dir, char *error, size_t error_len)
{
    if (strlen(dir) > REPORT_PATH - REPORT_NAME_ROOM) {
        char why[64];
        snprintf(why, sizeof why, "the name is too long (over %d characters)",
                 REPORT_PATH - REPORT_NAME_ROOM);
        return refuse(error, error_len, dir, why);
    }
    struct stat info;
    if (stat(dir, &info) != 0)
        return refuse(error, error_len, dir, errno == ENOENT
                      ? "no such folder" : strerror(errno));
    if (!S_ISDIR(info.st_mode))
        return refuse(error, error_len, dir, S_ISREG(info.st_mode)
                      ? "it is a file, not a folder" : "it is not a folder");
    /* /proc/self and the like resolve to /proc/PID: judge where the folder
     * really is, not how it was named. */
    char *real = realpath(dir, NULL);
    if (real == NULL)
        return refuse(error, error_len, dir, strerror(errno));
    const char *kernel = is_under(real, "/proc") ? "/proc"
                         : is_under(real, "/sys") ? "/sys" : NULL;
    free(real);
    if (kernel != NULL) {
        char why[96];
        snprintf(why, sizeof why, "it is inside %s, the kernel's view of "
                 "the system, not a place for files", kernel);
        return refuse(error, error_len, dir, why);
    }
    char probe[REPORT_PATH];
    snprintf(probe, sizeof probe, "%s/.zz-out-check-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return refuse(error, error_len, dir, strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

/* DIR/NAME into path; false (after saying why) when it does not fit. */
static bool report_path(char path[REPORT_PATH], const char *dir,
                        const char *name)
{
    int len = snprintf(path, REPORT_PATH, "%s/%s", dir, name);
    if (len < 0 || len >= REPORT_PATH) {
        fprintf(stderr, "%s/%s: path too long\n", dir, name);
        return false;
    }
    return true;
}

FILE *report_open(const char *dir, int rank)
{
    char name[sizeof "rank--2147483648.txt"], path[REPORT_PATH]; /* any int */
    snprintf(name, sizeof name, "rank-%d.txt", rank);
    if (!report_path(path, dir, name))
        return NULL;
    FILE *file = fopen(path, "w");
    if (file == NULL)
        perror(path);
    return file;
}

/* Writes DIR/NAME-rank-RANK.bin: `count` doubles, from `doubles`, or
 * else from `floats`, each widened (through a small buffer: no copy of
 * the whole vector). 0, or -1 after saying why. */
static int write_vector(const char *dir, const char *name, int rank,
                        const double *doubles, const float *floats,
                        size_t count)
{
    /* The file name and its NUL: the room report_check_dir leaves, less
     * the slash. */
    char file_name[REPORT_NAME_ROOM - 1], path[REPORT_PATH];
    int len = snprintf(file_name, sizeof file_name, "%s-rank-%d.bin", name,
                       rank);
    if (len < 0 || (size_t)len >= sizeof file_name) {
        fprintf(stderr, "%s: report name too long\n", name);
        return -1;
    }
    if (!report_path(path, dir, file_name))
        return -1;
    FILE *file = fopen(path, "wb");
    if (file == NULL) {
        perror(path);
        return -1;
    }
    bool written = true;
    if (doubles != NULL)
        written = fwrite(doubles, sizeof *doubles, count, file) == count;
    enum { PIECE = 512 };
    double widened[PIECE];
    for (size_t first = 0; doubles == NULL && written && first < count;
         first += PIECE) {
        size_t piece = count - first < PIECE ? count - first : PIECE;
        for (size_t k = 0; k < piece; k++)
            widened[k] = floats[first + k];
        written = fwrite(widened, sizeof *widened, piece, file) == piece;
    }
    if (fclose(file) != 0 || !written) {
        perror(path);
        return -1;
    }
    return 0;
}

int report_write_doubles(const char *dir, const char *name, int rank,
                         const double *values, size_t count)
{
    return write_vector(dir, name, rank, values, NULL, count);
}

int report_write_floats(const char *dir, const char *name, int rank,
                        const float *values, size_t count)
{
    return write_vector(dir, name, rank, NULL, values, count);
}
