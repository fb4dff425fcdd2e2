/* What every lesson's Check suite uses: registering tests, running the
 * lesson's programs as children with a time limit, and failing with a message
 * that teaches.
 *
 * A lesson's test file defines `Suite *lesson_suite(void)`; runner.c holds
 * main(). The same test file is linked once with the student's files and once
 * with the solution's, so it never knows which one it is testing. */
#ifndef ZZ_HARNESS_H
#define ZZ_HARNESS_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>

#include "compare.h"

/* Defined by each lesson's test file. */
Suite *lesson_suite(void);

/* An instructor's hidden tests for the lesson, when tests/hidden/ has a
 * file for it (see tests/hidden/README.md); otherwise this adds nothing. */
void hidden_tests(Suite *suite);

/* Adds one test, shown to the student as `name` (one Check test case per
 * test, so that every result carries its own name). `index` is passed to the
 * test as _i, so one function can serve a table of cases. */
void harness_add(Suite *suite, const char *name, const TTest *test, int index,
                 double timeout_s);

/* For the runner: each test that runs to its end writes its number (0, 1,
 * ... in the order harness_add registered them) and a newline to `fd`. A
 * test that Check reports as passed without that line ended its process
 * early, and the runner fails it. */
void harness_record_completions(int fd);
void harness_begin_test(int test);
int harness_test_count(void);
bool harness_expects_mark(int test);
const char *harness_test_name(int test);
double harness_test_timeout(int test);

/* Adds a test that passes when its process exits with `status` (a nonzero
 * status: exit(0) halfway must never pass). */
void harness_add_exit(Suite *suite, const char *name, const TTest *test,
                      int status, double timeout_s);

/* Fails the test unless `c` found every element right. The message names the
 * element, expected and got, the errors, and ends with `hint`, which should
 * name the lesson's TODO. */
#define EXPECT_COMPARISON(c, vector_name, hint)                               \
    do {                                                                      \
        const comparison_t *expect_c_ = (c);                                  \
        if (!comparison_ok(expect_c_)) {                                      \
            char expect_text_[512];                                           \
            comparison_describe(expect_c_, vector_name, expect_text_,         \
                                sizeof expect_text_);                         \
            ck_abort_msg("%s. Hint: %s", expect_text_, hint);                 \
        }                                                                     \
    } while (0)

/* Ends the test as skipped, with the reason (printf-style): for a test that
 * cannot run on this machine, such as a CUDA test without a GPU. The runner
 * and the grader report it as skipped, never as passed or failed. */
#define HARNESS_SKIP(...) \
    _ck_assert_failed(__FILE__, __LINE__, "skipped", "skipped: " __VA_ARGS__)

/* ---- Running programs ---------------------------------------------------- */

typedef struct {
    bool started;      /* false when the program could not be run at all */
    bool timed_out;    /* killed at the time limit */
    int exit_status;   /* when it exited by itself */
    int signal;        /* when a signal ended it, else 0 */
    double seconds;
    char *out;         /* everything it wrote, NUL-terminated */
    char *err;
    char *where;       /* MPI runs that timed out or failed: where each rank was, as
                          its steps file said ("rank 0: TODO 3 ..., in
                          MPI_Bcast; ..."); else NULL */
    int strays;        /* 1 if processes were still running when the
                          program ended (the harness killed them) */
    bool isolated;     /* it ran in a PID namespace of its own */
    bool supervisor_lost; /* the harness's keeper of the run was killed
                          from inside the run: nothing it said counts */
    int leftovers;     /* MPI runs: shared-memory files the ranks left
                          behind (the harness removed them) */
} run_result;

/* Runs argv (argv[0] searched in PATH) in a session of its own with `env`
 * (NAME=VALUE strings, NULL-terminated, may be NULL) added to the
 * environment. After timeout_s every process of the session is killed, and
 * so is any still running when the program ends: no child or grandchild
 * outlives the test. */
run_result harness_run(char *const argv[], char *const env[],
                       double timeout_s);
void run_result_free(run_result *result);

/* A running process, as /proc tells it (Linux; elsewhere there are none). */
typedef struct {
    int pid, parent, session;
    char state;           /* 'R', 'S', ... 'Z' for a zombie */
    char program[256];    /* argv[0] */
} process_info;

/* Fills `list` with up to `capacity` running processes; returns how many.
 * Every sweep of the harness and the runner looks at up to
 * HARNESS_MAX_PROCESSES at once, in a list that long. */
size_t harness_processes(process_info *list, size_t capacity);
enum { HARNESS_MAX_PROCESSES = 4096 };

/* Path of a program of this build, e.g. harness_program("00-setup",
 * "hello_mpi"); the build folder comes from ZZ_BUILD_DIR. Static storage:
 * valid until the next call. */
const char *harness_program(const char *lesson, const char *program);

/* Runs a build's MPI program on `ranks` ranks through the launcher in
 * ZZ_MPIRUN (set by the Makefile from its MPIRUN variable), with mpirun's own
 * time limit a little below the harness's, so that mpirun cleans up its ranks
 * itself. `args` is NULL-terminated, may be NULL. Each rank reports its steps
 * (common/steps.h) into a fresh folder; if the run times out, result.where
 * says where every rank was. Open MPI's shared-memory files go to the same
 * folder; any that the ranks leave behind are counted in result.leftovers
 * and removed. */
run_result harness_run_mpi(const char *lesson, const char *program, int ranks,
                           char *const args[], char *const env[],
                           double timeout_s);

/* ---- Reading a program's report (common/report.h) ------------------------ */

/* The size of the paths below. */
enum { HARNESS_PATH = 512 };

/* The folder for this run's temporary files: the runner's own (ZZ_SCRATCH,
 * emptied after each test and removed when the runner ends, however its
 * tests ended), else TMPDIR, else /tmp. */
const char *harness_scratch(void);

/* For the runner: the scratch folder is `path`, open as `fd` (held until
 * the runner ends). The harness reaches every file of a run there through
 * it, never through a link a run planted (remove_tree.h). */
void harness_use_scratch(const char *path, int fd);

/* For the runner: a /tmp of its own for the calling process and all it
 * starts, a tmpfs of `mib` MiB in a mount namespace of its own (Linux, as
 * root or where user namespaces are allowed), gone when they have all
 * ended. False where it cannot be had. */
bool harness_private_tmp(unsigned long mib);

/* A fresh folder of the scratch folder for a program's --out
 * (SCRATCH/zz-out-XXXXXX), and its removal with everything in it; neither
 * follows a link a run left there. */
void harness_out_dir(char path[HARNESS_PATH]);
void harness_remove_out_dir(const char *path);

/* The whole of DIR/rank-RANK.txt (malloc'd); fails the test, naming the
 * rank, when the file is missing. */
char *harness_read_report(const char *dir, int rank);

/* The numbers after "KEY" on the first line of `report` that starts with
 * KEY followed by a space: up to `count` of them into `values`; returns how
 * many were read (0 when there is no such line). */
int harness_report_values(const char *report, const char *key,
                          unsigned long long *values, int count);

/* DIR/NAME-rank-RANK.bin, which must hold exactly `count` doubles, into
 * `values`; fails the test otherwise. */
void harness_read_doubles(const char *dir, const char *name, int rank,
                          double *values, size_t count);

/* Open MPI's shared-memory files now in /dev/shm (names malloc'd; free
 * with harness_free_names). Runs through harness_run_mpi put theirs in a
 * folder of their own instead; a test uses this to prove that. */
size_t harness_mpi_segments(char ***names);
void harness_free_names(char **names, size_t count);
/* Whether /dev/shm/NAME is another user's, or still mapped by a process:
 * a file of a job still running, not a leftover. */
bool harness_segment_in_use(const char *name);

/* ---- Producers: the student's code, run apart (producer.h) ---------------- */

/* A case's input for the producer: `count` elements of `size` bytes into
 * DIR/NAME.bin (DIR from harness_out_dir). */
void harness_write_input(const char *dir, const char *name,
                         const void *values, size_t size, size_t count);

/* Runs the lesson's producer (build/.../LESSON/producer) on case
 * `case_name` with the inputs in `dir` and the numbers in `args` (words
 * separated by spaces, may be NULL), with `env` added (may be NULL). Its
 * outputs go to `dir`, which the test removes with harness_remove_out_dir
 * (the runner removes it in any case). */
run_result harness_produce(const char *lesson, const char *case_name,
                           const char *dir, const char *args,
                           char *const env[], double timeout_s);

/* harness_produce with a time limit a couple of seconds below the test's
 * own (`test_timeout_s`, as given to harness_add), so that code that never
 * ends is reported as such, not as a test killed by Check; fails the test,
 * saying `what` ran, unless the producer ran to its end. */
void harness_produce_case(const char *lesson, const char *case_name,
                          const char *dir, const char *args,
                          char *const env[], double test_timeout_s,
                          const char *what);

/* OUT/NAME.bin, which must hold exactly `count` elements of `size` bytes,
 * into `values`; fails the test otherwise. */
void harness_read_output(const char *dir, const char *name, void *values,
                         size_t size, size_t count);

/* How many times `part` occurs in `text` (a message that must be said
 * once, by one rank, is counted with this). */
int harness_occurrences(const char *text, const char *part);

/* Fails the test, with a message for a student, unless the program ran and
 * exited with status 0. `what` says what was run ("hello_mpi on 3 ranks").
 * A program that stopped at NOT_DONE() fails as "not started" with the
 * file:line it printed. */
void harness_expect_success(const run_result *result, const char *what);

#endif
