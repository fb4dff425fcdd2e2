/* Runs one Check suite and tells a person what happened.
 *
 *   runner --title "01 serial matvec" --mode student   one mark per test
 *   runner ... --mode solution                         the same; all must pass
 *   runner ... --mode skeleton                         all must FAIL: a test
 *          that passes on the untouched skeleton cannot tell an unfinished
 *          submission from a finished one, and is itself a bug
 *   runner --list    prints every test's name, one a line, and runs none
 *   runner --limits  prints the sum of the tests' time limits in seconds
 *   --tally FILE     appends "passed failed skipped title" for the summary
 *   --results FILE   writes one line per test for the grader:
 *                    "OUTCOME<TAB>NAME<TAB>MESSAGE", OUTCOME one of pass,
 *                    fail, todo, skip
 *   --results-fd N   the same lines to descriptor N, which the grader
 *                    opened; no program the tests start inherits it
 *   --private-tmp MIB  the tests and all they run get a /tmp of their own,
 *                    a tmpfs of MIB MiB (scripts/grade.sh asks for it):
 *                    what fills it fills only this runner's, and it is
 *                    gone when the runner ends. Where it cannot be had
 *                    (no mount namespaces, or the checkout or build folder
 *                    lies in /tmp, which it would hide), TMPDIR as without
 *                    it, and one line on standard error says so
 * Where the system allows (Linux, with mount namespaces), the tests also
 * get a /dev/shm of their own, emptied after each test and gone at the end
 * (of MIB MiB, 1024 without --private-tmp).
 *
 * Every test runs in its own forked process with a time limit (Check's fork
 * mode), so a crash or an endless loop fails that test and the rest go on.
 * Verdicts come from Check's records and the harness's completion marks,
 * never from anything the code under test prints. Code under test never
 * runs in this process or its tests' processes: a lesson's tests run its
 * producer (linked with the student's files) as a separate program, each
 * run in a PID namespace of its own where the system allows (harness.c),
 * and judge what it wrote.
 *
 * Temporary files of every test go to one folder of this runner's own
 * (ZZ_SCRATCH), emptied after each test and removed at the end, whatever
 * the tests did, through a descriptor held since it was made: never
 * through a link that a program under test put in its place or in it
 * (remove_tree.h). */
#define _XOPEN_SOURCE 700
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "harness.h"
#include "remove_tree.h"

typedef enum { MODE_STUDENT, MODE_SOLUTION, MODE_SKELETON } run_mode;

typedef enum { OUTCOME_PASSED, OUTCOME_FAILED, OUTCOME_NOT_STARTED,
               OUTCOME_SKIPPED } outcome;

static const char *const outcome_words[] = { "pass", "fail", "todo", "skip" };

/* One test's result, as the runner judges it. */
typedef struct {
    const char *name;
    outcome what;
    char text[1024];    /* why it did not pass, for a person */
    const char *file;   /* where the failure was raised */
    int line;
} verdict;

/* Check's words for a test that died, in words that point at a cause. */
static void explain(TestResult *result, char *text, size_t len)
{
    const char *message = tr_msg(result);
    int signal_number;
    int status;
    if (message == NULL)
        message = "(no message)";
    if (strstr(message, "Test timeout expired") != NULL)
        snprintf(text, len, "no answer before the time limit: an endless "
                 "loop, or a deadlock?");
    else if (sscanf(message, "Received signal %d", &signal_number) == 1)
        snprintf(text, len, "crashed: %s (an index outside an array?)",
                 strsignal(signal_number));
    else if (sscanf(message, "Early exit with return value %d", &status) == 1)
        snprintf(text, len, "the code called exit(%d) in the middle of the "
                 "test", status);
    else
        snprintf(text, len, "%s", message);
}

/* Which tests ran to their end: the numbers the tests wrote (see
 * harness_record_completions). */
static bool *read_completions(FILE *file, int count)
{
    bool *completed = calloc((size_t)count + 1, sizeof *completed);
    int test;
    if (completed == NULL) {
        perror("runner");
        exit(2);
    }
    rewind(file);
    while (fscanf(file, "%d", &test) == 1)
        if (test >= 0 && test < count)
            completed[test] = true;
    return completed;
}

static verdict judge(TestResult *result, int index, const bool *completed)
{
    verdict v = { .name = tr_tcname(result), .file = tr_lfile(result),
                  .line = tr_lno(result) };
    const char *message = tr_msg(result) ? tr_msg(result) : "";
    explain(result, v.text, sizeof v.text);
    /* A hidden test's failure says what its author wrote in the message,
     * never its source: Check's "Assertion '...' failed" quotes the code. */
    if (v.file != NULL && strstr(v.file, "tests/hidden/") != NULL &&
        strncmp(message, "Assertion '", 11) == 0)
        snprintf(v.text, sizeof v.text, "a check of this hidden test failed "
                 "(its line %d)", v.line);
    if (tr_rtype(result) != CK_PASS)
        v.what = strncmp(message, "not started", 11) == 0 ? OUTCOME_NOT_STARTED
                 : strncmp(message, "skipped", 7) == 0    ? OUTCOME_SKIPPED
                                                          : OUTCOME_FAILED;
    else if (harness_expects_mark(index) && !completed[index]) {
        /* Check counts a process that exited with 0 as a pass. */
        v.what = OUTCOME_FAILED;
        snprintf(v.text, sizeof v.text, "the test's process ended before the "
                 "test did (exit() in the middle of it?): a test passes only "
                 "when it runs to its end");
    } else {
        v.what = OUTCOME_PASSED;
        v.text[0] = '\0';
    }
    return v;
}

/* Kills every process that the tests left running, before any verdict is
 * written: nothing of the code under test may outlive its tests and touch
 * the results. On Linux the runner is a "subreaper", so a process that a
 * test started and abandoned (even one that made itself a daemon) becomes
 * the runner's child, and is found here. Returns how many there were. */
static int kill_leftovers(void)
{
    int killed = 0;
#ifdef __linux__
    /* Reap what has ended; when no child is left, there is nothing to look
     * for, and the machine's other processes are never read. */
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    if (waitpid(-1, NULL, WNOHANG) < 0)
        return 0;
    static process_info list[HARNESS_MAX_PROCESSES];
    for (int round = 0; round < 50; round++) {
        int found = 0;
        size_t count = harness_processes(list, HARNESS_MAX_PROCESSES);
        for (size_t k = 0; k < count; k++)
            if (list[k].parent == (int)getpid() && list[k].state != 'Z') {
                kill((pid_t)list[k].pid, SIGKILL);
                found++;
            }
        /* Reap them (and any zombie): their own children come to us next. */
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        if (found == 0)
            break;
        killed += found;
        nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
    }
#endif
    return killed;
}

/* One line for a test; tabs and newlines in messages become spaces. */
static int write_result(FILE *file, const verdict *v)
{
    fprintf(file, "%s\t%s\t", outcome_words[v->what], v->name);
    for (const char *c = v->text; *c; c++)
        fputc(*c == '\t' || *c == '\n' || *c == '\r' ? ' ' : *c, file);
    return fputc('\n', file) == EOF ? -1 : 0;
}

static int write_results(FILE *file, const verdict *verdicts, int count)
{
    int status = 0;
    for (int k = 0; k < count; k++)
        status |= write_result(file, &verdicts[k]);
    return fclose(file) == 0 ? status : -1;
}

/* The scratch folder: made before the tests, emptied after each, removed
 * after them all; its parent (TMPDIR) and it, held open throughout. */
static char scratch[PATH_MAX];
static char scratch_name[FOLDER_NAME_SIZE];
static int scratch_parent = -1, scratch_fd = -1;

static void make_scratch(void)
{
    const char *tmp = getenv("TMPDIR");
    tmp = tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp";
    scratch_parent = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (scratch_parent < 0 ||
        make_folder_at(scratch_parent, "zz-run-", scratch_name) != 0 ||
        (scratch_fd = open_folder_below(scratch_parent, scratch_name)) < 0) {
        fprintf(stderr, "runner: cannot make a scratch folder in %s: %s\n",
                tmp, strerror(errno));
        exit(2);
    }
    int length = snprintf(scratch, sizeof scratch, "%s/%s", tmp,
                          scratch_name);
    if (length < 0 || length >= (int)sizeof scratch) {
        fprintf(stderr, "runner: TMPDIR is longer than %d characters: %s\n",
                (int)(PATH_MAX - sizeof "/zz-run-XXXXXX"), tmp);
        exit(2);
    }
    harness_use_scratch(scratch, scratch_fd);
}

/* The runner's own /dev/shm (harness_private_shm), where it has one. */
static int shm_fd = -1;

/* Everything in the scratch folder, in the runner's own /dev/shm, and, with
 * a /tmp of the runner's own, everything a program left in that /tmp: one
 * test's files never fill the room of the next, and none outlives it. */
static void clear_scratch(bool private_tmp)
{
    empty_folder(scratch_fd);
    if (shm_fd >= 0)
        empty_folder(shm_fd);
    if (!private_tmp)
        return;
    DIR *listing = fdopendir(dup(scratch_parent));
    struct dirent *entry;
    while (listing != NULL && (entry = readdir(listing)) != NULL)
        if (strcmp(entry->d_name, ".") != 0 &&
            strcmp(entry->d_name, "..") != 0 &&
            strcmp(entry->d_name, scratch_name) != 0)
            remove_tree_at(scratch_parent, entry->d_name);
    if (listing != NULL)
        closedir(listing);
}

/* The scratch folder's own entry in TMPDIR goes last: the folder held, if
 * it is still there; a link put in its place (by a program that could
 * write TMPDIR) is unlinked, not followed. */
static void remove_scratch(void)
{
    struct stat held, named;
    empty_folder(scratch_fd);
    if (fstat(scratch_fd, &held) == 0 &&
        fstatat(scratch_parent, scratch_name, &named,
                AT_SYMLINK_NOFOLLOW) == 0) {
        if (named.st_dev == held.st_dev && named.st_ino == held.st_ino)
            unlinkat(scratch_parent, scratch_name, AT_REMOVEDIR);
        else if (S_ISLNK(named.st_mode))
            unlinkat(scratch_parent, scratch_name, 0);
    }
}

/* What the tests need from below /tmp, where a /tmp of the runner's own
 * would hide it: the checkout they run in, or the grading's build folder
 * (a clone made in /tmp). NULL when neither lies there. */
static const char *checkout_in_tmp(void)
{
    static char path[PATH_MAX];
    const char *build = getenv("ZZ_BUILD_DIR");
    const char *places[] = { ".", build };
    for (size_t k = 0; k < sizeof places / sizeof places[0]; k++)
        if (places[k] != NULL && realpath(places[k], path) != NULL &&
            (strcmp(path, "/tmp") == 0 || strncmp(path, "/tmp/", 5) == 0))
            return path;
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: runner --title TEXT [--mode student|solution|"
            "skeleton] [--tally FILE] [--results FILE] [--results-fd N] "
            "[--private-tmp MIB] [--list] [--limits]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *title = "tests", *tally_path = NULL;
    const char *results_path = NULL;
    int results_fd = -1;
    unsigned long private_tmp_mib = 0;
    bool list_only = false, limits_only = false;
    run_mode mode = MODE_STUDENT;

    /* A judge that computes its reference with the shared library runs
     * OpenMP regions, and then forks to run each program. LLVM's OpenMP
     * runtime (clang's) re-registers itself in a forked child through a
     * file it opens in /dev/shm or /tmp, which the child's namespaces may
     * not show it, and aborts; the child only ever execs, so it needs no
     * OpenMP. Before the runtime starts: no fork handler. (GCC's runtime
     * has none to turn off.) */
    setenv("KMP_INIT_AT_FORK", "false", 0);

    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--title") == 0 && k + 1 < argc)
            title = argv[++k];
        else if (strcmp(argv[k], "--tally") == 0 && k + 1 < argc)
            tally_path = argv[++k];
        else if (strcmp(argv[k], "--results") == 0 && k + 1 < argc)
            results_path = argv[++k];
        else if (strcmp(argv[k], "--results-fd") == 0 && k + 1 < argc)
            results_fd = atoi(argv[++k]);
        else if (strcmp(argv[k], "--private-tmp") == 0 && k + 1 < argc) {
            char *end;
            private_tmp_mib = strtoul(argv[++k], &end, 10);
            if (*end != '\0' || private_tmp_mib == 0)
                usage();
        } else if (strcmp(argv[k], "--list") == 0)
            list_only = true;
        else if (strcmp(argv[k], "--limits") == 0)
            limits_only = true;
        else if (strcmp(argv[k], "--mode") == 0 && k + 1 < argc) {
            const char *name = argv[++k];
            if (strcmp(name, "student") == 0)
                mode = MODE_STUDENT;
            else if (strcmp(name, "solution") == 0)
                mode = MODE_SOLUTION;
            else if (strcmp(name, "skeleton") == 0)
                mode = MODE_SKELETON;
            else
                usage();
        } else
            usage();
    }

    Suite *suite = lesson_suite();
    hidden_tests(suite);
    if (list_only || limits_only) {
        double total = 0;
        for (int k = 0; k < harness_test_count(); k++) {
            if (list_only)
                printf("%s\n", harness_test_name(k));
            total += harness_test_timeout(k);
        }
        if (limits_only)
            printf("%.0f\n", total);
        (void)suite; /* Check frees a suite only with its runner */
        return 0;
    }
    /* The grader's descriptor, and every file of ours, stay ours: nothing
     * the tests run inherits them (harness_run closes what is left). */
    FILE *results_stream = NULL;
    if (results_fd >= 0) {
        fcntl(results_fd, F_SETFD, FD_CLOEXEC);
        results_stream = fdopen(results_fd, "w");
        if (results_stream == NULL) {
            perror("runner: --results-fd");
            return 2;
        }
    }
    /* Before PR_SET_DUMPABLE: a user namespace's maps are written through
     * /proc/self, which that makes root's. */
    bool private_tmp = false;
    const char *in_tmp = checkout_in_tmp();
    if (private_tmp_mib > 0 && in_tmp != NULL) {
        fprintf(stderr, "runner: no /tmp of its own for the tests: %s lies "
                "in /tmp, which that would hide; their files go to %s\n",
                in_tmp, getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    } else if (private_tmp_mib > 0) {
        private_tmp = harness_private_tmp(private_tmp_mib);
        if (private_tmp)
            setenv("TMPDIR", "/tmp", 1);
        else
            fprintf(stderr, "runner: no /tmp of its own here (no mount "
                    "namespace): the tests' files go to %s\n",
                    getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    }
#ifdef __linux__
    /* A /dev/shm of the tests' own, whatever else they share: what a run's
     * runtimes put there goes after each test (clear_scratch), even where
     * a program did not exit cleanly to remove it, and the room is only
     * theirs. The harness gives MPI's shared memory a folder of each run's
     * own, so this holds only what no setting moves. Where it cannot be
     * had, the system's, as without it (make test checks it after). */
    if (harness_private_shm(private_tmp_mib > 0 ? private_tmp_mib : 1024))
        shm_fd = open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* Processes of the same user cannot read this one's memory or open
     * its descriptors through /proc. */
    prctl(PR_SET_DUMPABLE, 0);
#endif
    make_scratch();
    FILE *completions = tmpfile();
    if (completions == NULL) {
        perror("runner: tmpfile");
        return 2;
    }
    harness_record_completions(fileno(completions));
#ifdef __linux__
    prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
    /* One test at a time, in the order they were registered (the order of
     * their completion marks), each verdict sent to the grader as soon as
     * it is known: if this program is killed later, the tests it finished
     * keep their points. */
    /* The title first, and out before any test forks: what a test prints
     * of its own (a compiler's findings, the threads' work) comes under
     * it, and no child inherits it unwritten, to write it again. */
    printf("%s%s\n", title, mode == MODE_SKELETON
           ? " (untouched skeleton: every test must fail)" : "");
    /* Where a run is not measured from outside, say so: what decides is
     * then what the processes count themselves. */
    if (!harness_outside_measures())
        printf("  (this system has no outside measurement of a run: the "
               "ledgers' counts decide; see docs/instructors.md)\n");
    else if (!harness_outside_traffic())
        printf("  (MPICH: the bytes between ranks are the ledgers' count; "
               "memory is measured outside the ranks)\n");
    fflush(stdout);
    SRunner *runner = srunner_create(suite);
    srunner_set_fork_status(runner, CK_FORK);
    int count = harness_test_count();
    verdict *verdicts = calloc((size_t)count + 1, sizeof *verdicts);
    if (verdicts == NULL) {
        perror("runner");
        return 2;
    }
    int leftovers = 0;
    /* CK_RUN_CASE=NAME runs that test alone, as in Check itself. */
    const char *only = getenv("CK_RUN_CASE");
    int ran_so_far = 0;
    for (int k = 0; k < count; k++) {
        if (only != NULL && strcmp(only, harness_test_name(k)) != 0) {
            verdicts[k] = (verdict){ .name = harness_test_name(k),
                                     .what = OUTCOME_SKIPPED, .file = "",
                                     .text = "not run: CK_RUN_CASE names "
                                             "another test" };
            continue;
        }
        harness_begin_test(k);
        srunner_run(runner, NULL, harness_test_name(k), CK_SILENT);
        leftovers += kill_leftovers();
        clear_scratch(private_tmp);
        int ran = srunner_ntests_run(runner);
        TestResult **results = srunner_results(runner);
        bool *completed = read_completions(completions, count);
        if (ran != ++ran_so_far) {
            fprintf(stderr, "runner: test '%s' did not run once (its name "
                    "must be unique)\n", harness_test_name(k));
            return 2;
        }
        verdicts[k] = judge(results[ran - 1], k, completed);
        free(results);
        free(completed);
        if (results_stream != NULL &&
            (write_result(results_stream, &verdicts[k]) != 0 ||
             fflush(results_stream) != 0))
            return 2;
    }
    remove_scratch();

    int passed = 0, failed = 0, skipped = 0, not_started = 0;
    if (mode == MODE_SKELETON) {
        /* Here a failure is the expected outcome. */
        for (int k = 0; k < count; k++) {
            if (verdicts[k].what == OUTCOME_PASSED) {
                failed++;
                printf("  [PASSES ON SKELETON] %s: this test cannot tell an "
                       "unfinished submission from a finished one\n",
                       verdicts[k].name);
            } else if (verdicts[k].what == OUTCOME_SKIPPED) {
                skipped++;
            } else {
                passed++;
            }
        }
        printf("  %d of %d tests fail on the untouched skeleton%s\n", passed,
               count, failed ? "; the tests above do not" : ", as they must");
    } else {
        for (int k = 0; k < count; k++) {
            const verdict *v = &verdicts[k];
            switch (v->what) {
            case OUTCOME_PASSED:
                passed++;
                printf("  [pass] %s\n", v->name);
                break;
            case OUTCOME_NOT_STARTED:
                not_started++;
                printf("  [todo] %s: %s\n", v->name, v->text);
                break;
            case OUTCOME_SKIPPED:
                skipped++;
                printf("  [skip] %s: %s\n", v->name, v->text);
                break;
            case OUTCOME_FAILED:
                failed++;
                printf("  [FAIL] %s: %s\n", v->name, v->text);
                /* Where the failure was raised matters only when it is the
                 * student's code, not the test's own assertion. */
                if (v->file != NULL && strncmp(v->file, "tests/", 6) != 0)
                    printf("         at %s:%d\n", v->file, v->line);
                break;
            }
        }
        failed += not_started;
        printf("  %d passed, %d failed (%d of them not started)%s\n", passed,
               failed, not_started, skipped ? ", some skipped" : "");
        /* Check's own closing line, except where tests were skipped: Check
         * knows no skips and would count them as failures. */
        if (skipped == 0)
            srunner_print(runner, CK_MINIMAL);
        else
            printf("%d%%: Checks: %d, Failures: %d, Errors: 0 (and %d "
                   "skipped)\n", count - skipped > 0
                   ? 100 * passed / (count - skipped) : 100,
                   count - skipped, failed, skipped);
    }

    if (leftovers > 0)
        printf("  (%d process%s that the tests left running %s killed)\n",
               leftovers, leftovers == 1 ? "" : "es",
               leftovers == 1 ? "was" : "were");
    int status = failed == 0 ? 0 : 1;
    if (results_path != NULL) {
        FILE *file = fopen(results_path, "w");
        if (file == NULL || write_results(file, verdicts, count) != 0) {
            perror(results_path);
            status = 2;
        }
    }
    if (results_stream != NULL && fclose(results_stream) != 0)
        status = 2;
    if (tally_path != NULL) {
        FILE *tally = fopen(tally_path, "a");
        if (tally == NULL) {
            perror(tally_path);
            return 2;
        }
        fprintf(tally, "%d %d %d %s\n", passed, failed, skipped, title);
        fclose(tally);
    }
    free(verdicts);
    fclose(completions);
    srunner_free(runner);
    return status;
}
