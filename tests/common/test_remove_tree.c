/* Unit tests of tests/harness/remove_tree.h and of the harness's files in
 * the scratch folder: what a run leaves there (links to folders and files
 * outside, a link in place of its own folder, folders nested hundreds
 * deep or made unreadable) is removed without anything outside it being
 * touched, and the harness never writes an input through a link. Each
 * test keeps a bait outside the tree it removes, and checks it after. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "remove_tree.h"

/* PATH holds exactly TEXT. */
static bool holds(const char *path, const char *text)
{
    char got[256] = { 0 };
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return false;
    size_t length = fread(got, 1, sizeof got - 1, file);
    fclose(file);
    return length == strlen(text) && memcmp(got, text, length) == 0;
}

static void write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    ck_assert_msg(file != NULL && fputs(text, file) >= 0 && fclose(file) == 0,
                  "cannot write %s: %s", path, strerror(errno));
}

/* A bait folder, FOLDER/bait with keep and inner/keep, outside any tree
 * the test removes; its path into `bait`. */
static void make_bait(const char *folder, char bait[HARNESS_PATH + 64])
{
    char path[HARNESS_PATH + 128];
    snprintf(bait, HARNESS_PATH + 64, "%s/bait", folder);
    ck_assert(mkdir(bait, 0700) == 0);
    snprintf(path, sizeof path, "%s/keep", bait);
    write_text(path, "bait\n");
    snprintf(path, sizeof path, "%s/inner", bait);
    ck_assert(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/inner/keep", bait);
    write_text(path, "inner bait\n");
}

static void expect_bait_intact(const char *bait)
{
    char path[HARNESS_PATH + 128];
    snprintf(path, sizeof path, "%s/keep", bait);
    ck_assert_msg(holds(path, "bait\n"), "%s was removed or changed", path);
    snprintf(path, sizeof path, "%s/inner/keep", bait);
    ck_assert_msg(holds(path, "inner bait\n"), "%s was removed or changed",
                  path);
}

START_TEST(links_are_removed_never_followed)
{
    char folder[HARNESS_PATH], bait[HARNESS_PATH + 64];
    char path[HARNESS_PATH + 128], target[HARNESS_PATH + 128];
    harness_out_dir(folder);
    make_bait(folder, bait);
    /* The tree: a file, links to the bait folder, to its file and to its
     * inner folder, a folder whose link leads back up, a hard link. */
    snprintf(path, sizeof path, "%s/tree", folder);
    ck_assert(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/tree/file", folder);
    write_text(path, "x");
    snprintf(path, sizeof path, "%s/tree/to-folder", folder);
    ck_assert(symlink(bait, path) == 0);
    snprintf(path, sizeof path, "%s/tree/to-file", folder);
    snprintf(target, sizeof target, "%s/keep", bait);
    ck_assert(symlink(target, path) == 0);
    snprintf(path, sizeof path, "%s/tree/hard", folder);
    ck_assert(link(target, path) == 0);
    snprintf(path, sizeof path, "%s/tree/sub", folder);
    ck_assert(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/tree/sub/up", folder);
    ck_assert(symlink("../..", path) == 0);
    snprintf(path, sizeof path, "%s/tree/sub/inner", folder);
    snprintf(target, sizeof target, "%s/inner", bait);
    ck_assert(symlink(target, path) == 0);

    int parent = open(folder, O_RDONLY | O_DIRECTORY);
    ck_assert(parent >= 0);
    ck_assert_msg(remove_tree_at(parent, "tree") == 0, "remove_tree_at: %s",
                  strerror(errno));
    struct stat info;
    ck_assert_msg(fstatat(parent, "tree", &info, AT_SYMLINK_NOFOLLOW) != 0,
                  "the tree is still there");
    close(parent);
    expect_bait_intact(bait);
    harness_remove_out_dir(folder);
}
END_TEST

START_TEST(a_folder_replaced_by_a_link)
{
    char folder[HARNESS_PATH], bait[HARNESS_PATH + 64];
    char out[HARNESS_PATH], moved[HARNESS_PATH + 16];
    harness_out_dir(folder);
    make_bait(folder, bait);
    /* What a run can do to its own --out folder: move it away and leave a
     * link to the bait in its place, with a link to the bait in it too. */
    harness_out_dir(out);
    snprintf(moved, sizeof moved, "%s-moved", out);
    ck_assert(rename(out, moved) == 0);
    ck_assert(symlink(bait, out) == 0);
    char inside[HARNESS_PATH + 32];
    snprintf(inside, sizeof inside, "%s/y.bin", moved);
    ck_assert(symlink(bait, inside) == 0);
    harness_remove_out_dir(out);
    harness_remove_out_dir(moved);
    struct stat info;
    ck_assert_msg(lstat(out, &info) != 0, "the link in place of %s is still "
                  "there", out);
    ck_assert_msg(lstat(moved, &info) != 0, "%s is still there", moved);
    expect_bait_intact(bait);
    harness_remove_out_dir(folder);
}
END_TEST

START_TEST(deep_and_unreadable_folders)
{
    enum { LEVELS = 300 };
    char folder[HARNESS_PATH];
    harness_out_dir(folder);
    int parent = open(folder, O_RDONLY | O_DIRECTORY);
    ck_assert(parent >= 0);
    /* LEVELS folders, one in the next, each with a file; every tenth
     * unreadable and unwritable. */
    int at = dup(parent);
    for (int level = 0; level < LEVELS; level++) {
        ck_assert(mkdirat(at, "d", 0700) == 0);
        int file = openat(at, "f", O_WRONLY | O_CREAT, 0600);
        ck_assert(file >= 0);
        close(file);
        int below = openat(at, "d", O_RDONLY | O_DIRECTORY);
        ck_assert(below >= 0);
        if (level % 10 == 9)
            fchmod(at, 0);
        close(at);
        at = below;
    }
    close(at);
    int before = dup(0);
    close(before);
    ck_assert_msg(remove_tree_at(parent, "d") == 0, "remove_tree_at: %s",
                  strerror(errno));
    int after = dup(0);
    close(after);
    ck_assert_msg(after == before, "remove_tree_at left %d descriptors open",
                  after - before);
    ck_assert_msg(empty_folder(parent) == 0, "empty_folder: %s",
                  strerror(errno));
    struct stat info;
    ck_assert_msg(fstatat(parent, "d", &info, AT_SYMLINK_NOFOLLOW) != 0 &&
                  fstatat(parent, "f", &info, AT_SYMLINK_NOFOLLOW) != 0,
                  "the nested folders are still there");
    close(parent);
    harness_remove_out_dir(folder);
}
END_TEST

START_TEST(open_folder_below_follows_no_link)
{
    char folder[HARNESS_PATH], path[HARNESS_PATH + 32];
    harness_out_dir(folder);
    snprintf(path, sizeof path, "%s/a", folder);
    ck_assert(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/a/b", folder);
    ck_assert(mkdir(path, 0700) == 0);
    snprintf(path, sizeof path, "%s/link", folder);
    ck_assert(symlink("a", path) == 0);
    int parent = open(folder, O_RDONLY | O_DIRECTORY);
    ck_assert(parent >= 0);
    int found = open_folder_below(parent, "a/b");
    ck_assert_msg(found >= 0, "open_folder_below(a/b): %s", strerror(errno));
    close(found);
    errno = 0;
    ck_assert_msg(open_folder_below(parent, "link/b") < 0 &&
                  (errno == ELOOP || errno == ENOTDIR), "open_folder_below "
                  "went through a link (link/b)");
    ck_assert_msg(open_folder_below(parent, "a/../a") < 0 && errno == EINVAL,
                  "open_folder_below took \"..\"");
    /* make_folder_at never takes a name that is there, a link above all. */
    char name[FOLDER_NAME_SIZE];
    for (int k = 0; k < 50; k++)
        ck_assert_msg(make_folder_at(parent, "m-", name) == 0,
                      "make_folder_at: %s", strerror(errno));
    close(parent);
    harness_remove_out_dir(folder);
}
END_TEST

START_TEST(inputs_are_never_written_through_a_link)
{
    char folder[HARNESS_PATH], bait[HARNESS_PATH + 64], out[HARNESS_PATH];
    char path[HARNESS_PATH + 128], target[HARNESS_PATH + 128];
    harness_out_dir(folder);
    make_bait(folder, bait);
    /* A run left x.bin as a link to the bait's file, and z.bin as a hard
     * link to it: the next input is written afresh under each name. */
    harness_out_dir(out);
    snprintf(target, sizeof target, "%s/keep", bait);
    snprintf(path, sizeof path, "%s/x.bin", out);
    ck_assert(symlink(target, path) == 0);
    snprintf(path, sizeof path, "%s/z.bin", out);
    ck_assert(link(target, path) == 0);
    const double values[2] = { 1.0, 2.0 };
    harness_write_input(out, "x", values, sizeof values[0], 2);
    harness_write_input(out, "z", values, sizeof values[0], 2);
    double got[2];
    harness_read_output(out, "x", got, sizeof got[0], 2);
    ck_assert(got[0] == 1.0 && got[1] == 2.0);
    expect_bait_intact(bait);
    harness_remove_out_dir(out);
    harness_remove_out_dir(folder);
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("remove_tree");
    harness_add(suite, "remove tree: links inside are removed, never "
                "followed", links_are_removed_never_followed, 0, 10);
    harness_add(suite, "remove tree: an out folder replaced by a link",
                a_folder_replaced_by_a_link, 0, 10);
    harness_add(suite, "remove tree: 300 folders deep, some unreadable",
                deep_and_unreadable_folders, 0, 10);
    harness_add(suite, "remove tree: open_folder_below follows no link",
                open_folder_below_follows_no_link, 0, 10);
    harness_add(suite, "remove tree: inputs never written through a link",
                inputs_are_never_written_through_a_link, 0, 10);
    return suite;
}
