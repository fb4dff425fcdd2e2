/* Making and removing a run's folders without following a link the run
 * planted (see remove_tree.h). */
#define _GNU_SOURCE
#include "remove_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A folder this many levels below the one being emptied is moved up into
 * it before it is emptied: removing a tree holds at most two descriptors a
 * level open, however deep a run nested its folders. */
enum { MOST_LEVELS = 16 };
/* Passes over one folder, at most: more, and something is still writing
 * into it as fast as it is emptied. */
enum { MOST_PASSES = 10000 };

int make_folder_at(int parent, const char *prefix,
                   char name[FOLDER_NAME_SIZE])
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyz"
                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static unsigned long long state;
    size_t length = strlen(prefix);
    if (length + 6 >= FOLDER_NAME_SIZE) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* The name need not be secret: mkdirat never follows a link, and a
     * name already taken (by anything) is drawn again. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    state ^= (unsigned long long)now.tv_nsec ^
             ((unsigned long long)now.tv_sec << 20) ^
             ((unsigned long long)getpid() << 40);
    for (int attempt = 0; attempt < 1000; attempt++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned long long bits = state >> 16;
        memcpy(name, prefix, length);
        for (int k = 0; k < 6; k++) {
            name[length + k] = letters[bits % (sizeof letters - 1)];
            bits /= sizeof letters - 1;
        }
        name[length + 6] = '\0';
        if (mkdirat(parent, name, 0700) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

/* The folder `name` of `parent`, opened without following a link. */
static int open_folder_at(int parent, const char *name)
{
    return openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                  O_CLOEXEC);
}

int open_folder_below(int parent, const char *path)
{
    char parts[PATH_MAX];
    if (snprintf(parts, sizeof parts, "%s", path) >= (int)sizeof parts) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int folder = openat(parent, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char *rest = NULL;
    for (char *part = strtok_r(parts, "/", &rest);
         part != NULL && folder >= 0; part = strtok_r(NULL, "/", &rest)) {
        if (strcmp(part, ".") == 0)
            continue;
        if (strcmp(part, "..") == 0) {
            close(folder);
            errno = EINVAL;
            return -1;
        }
        int below = open_folder_at(folder, part);
        int error = errno;
        close(folder);
        errno = error;
        folder = below;
    }
    return folder;
}

/* Unlinks `name` of `folder`, whatever it is but a folder. */
static int unlink_entry(int folder, const char *name)
{
    return unlinkat(folder, name, 0) == 0 || errno == ENOENT ? 0 : -1;
}

static int empty_below(int top, int folder, int level);

/* Removes one entry of `folder`, which is `level` levels below `top`
 * (-1: `name` is the top of the tree being removed). */
static int remove_entry(int top, int folder, const char *name, int level)
{
    struct stat info;
    if (fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(info.st_mode))
        return unlink_entry(folder, name);
    if (level + 1 >= MOST_LEVELS) {
        /* Moved up into `top` (over an empty folder made for the purpose,
         * which rename may replace), where a later pass removes it. */
        char moved[FOLDER_NAME_SIZE];
        if (make_folder_at(top, ".zz-deeper-", moved) != 0)
            return -1;
        if (renameat(folder, name, top, moved) == 0)
            return 0;
        int error = errno;
        unlinkat(top, moved, AT_REMOVEDIR);
        errno = error;
        return -1;
    }
    int below = open_folder_at(folder, name);
    if (below < 0 && errno == EACCES &&
        fchmodat(folder, name, S_IRWXU, AT_SYMLINK_NOFOLLOW) == 0)
        below = open_folder_at(folder, name); /* a folder made unreadable */
    if (below < 0)
        /* A link or a file put in its place since: unlinked, not followed. */
        return errno == ELOOP || errno == ENOTDIR ? unlink_entry(folder, name)
                                                  : -1;
    /* The top of a tree being removed is its own folder. */
    int status = top < 0 ? empty_below(below, below, 0)
                         : empty_below(top, below, level + 1);
    int error = errno;
    close(below);
    if (unlinkat(folder, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        if (errno != ENOTDIR || unlink_entry(folder, name) != 0)
            return -1;
    }
    errno = error;
    return status;
}

/* Removes everything in `folder`, `level` levels below `top`: pass after
 * pass, while a pass still removes something (entries moved up into `top`
 * come back in its next pass). */
static int empty_below(int top, int folder, int level)
{
    struct stat info;
    /* A folder the run made unwritable (its owner is the grader's user). */
    if (fstat(folder, &info) == 0 && (info.st_mode & S_IRWXU) != S_IRWXU)
        fchmod(folder, info.st_mode | S_IRWXU);
    for (int pass = 0; pass < MOST_PASSES; pass++) {
        int listing_fd = openat(folder, ".", O_RDONLY | O_DIRECTORY |
                                O_CLOEXEC);
        DIR *listing = listing_fd >= 0 ? fdopendir(listing_fd) : NULL;
        if (listing == NULL) {
            if (listing_fd >= 0)
                close(listing_fd);
            return -1;
        }
        int found = 0, removed = 0, first_error = 0;
        struct dirent *entry;
        while ((entry = readdir(listing)) != NULL) {
            if (strcmp(entry->d_name, ".") == 0 ||
                strcmp(entry->d_name, "..") == 0)
                continue;
            found++;
            if (remove_entry(top, folder, entry->d_name, level) == 0)
                removed++;
            else if (first_error == 0)
                first_error = errno;
        }
        closedir(listing);
        if (found == 0)
            return 0;
        if (removed == 0) {
            errno = first_error;
            return -1;
        }
    }
    errno = EAGAIN;
    return -1;
}

int empty_folder(int folder)
{
    return empty_below(folder, folder, 0);
}

int remove_tree_at(int parent, const char *name)
{
    return remove_entry(-1, parent, name, 0);
}
