/* Making and removing a run's folders without following a link the run
 * planted.
 *
 * A program under test can write its scratch folder: it may replace any
 * folder there with a symbolic link, or fill it with links, so that whoever
 * cleans up after it removes (or writes) something else, anywhere the
 * grader may write. Everything here starts from a folder descriptor held
 * since before the program ran: no path is resolved through anything the
 * program could have written, every folder below is opened with
 * O_NOFOLLOW | O_DIRECTORY, and a link is removed, never followed.
 *
 * Used by the harness (each test's folders), the runner (its scratch
 * folder) and the grade tool (grade --remove, for scripts/grade.sh). */
#ifndef ZZ_REMOVE_TREE_H
#define ZZ_REMOVE_TREE_H

#include <stddef.h>

/* The longest name make_folder_at makes, with its NUL. */
enum { FOLDER_NAME_SIZE = 64 };

/* Makes a new folder (mode 0700) in the folder open as `parent`, named
 * `prefix` and six random letters, into name[FOLDER_NAME_SIZE]. Returns 0,
 * or -1 with errno (a prefix too long: ENAMETOOLONG). */
int make_folder_at(int parent, const char *prefix,
                   char name[FOLDER_NAME_SIZE]);

/* Opens the folder at `path` (relative, parts separated by '/', no "..")
 * below the folder open as `parent`, following no link on the way: a part
 * that is a link fails with ELOOP or ENOTDIR. "" or "." is `parent` itself
 * (a new descriptor). Returns the descriptor (close-on-exec), or -1 with
 * errno. */
int open_folder_below(int parent, const char *path);

/* Removes `name`, an entry of the folder open as `parent`, with everything
 * below it. A link, or anything else that is not a folder, is unlinked
 * (what it points to is never touched). Returns 0 when it is gone (or was
 * never there), else -1 with errno of the first thing that could not be
 * removed (everything else was). */
int remove_tree_at(int parent, const char *name);

/* Removes everything in the folder open as `folder`, and leaves the folder
 * (and the descriptor) in place. Returns 0 or -1 with errno, as above. */
int empty_folder(int folder);

#endif
