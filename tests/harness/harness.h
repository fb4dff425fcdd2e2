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

/* Set in a build under AddressSanitizer or ThreadSanitizer: the kernel's
 * count of a process's memory then holds their shadow memory too, so the
 * tests measure no memory there (the other builds do). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HARNESS_SHADOW_MEMORY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HARNESS_SHADOW_MEMORY 1 /* clang's way of saying so */
#endif
#endif

/* Ends the test as skipped, with the reason (printf-style): for a test that
 * cannot run on this machine, such as a CUDA test without a GPU. The runner
 * and the grader report it as skipped, never as passed or failed. */
#define HARNESS_SKIP(...) \
    _ck_assert_failed(__FILE__, __LINE__, "skipped", "skipped: " __VA_ARGS__)

/* ---- Running programs ---------------------------------------------------- */

typedef struct {
    bool started;      /* false when the program could not be run at all */
    bool timed_out;    /* killed at the time limit, or (MPI runs) stopped
                          early as a deadlock: see stalled_s */
    double stalled_s;  /* MPI runs stopped early: every rank sat inside an
                          MPI call, none moving on, for this long
                          (HARNESS_STALL_S); else 0 */
    double looping_s;  /* MPI runs that timed out, or were stopped early
                          (HARNESS_LOOP_S): for how long every rank had
                          been making MPI calls with none entering a step,
                          as in an endless loop of calls (not a deadlock);
                          else 0 */
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
    char *watch_dir;   /* MPI runs under the watch (harness_outside_measures):
                          the folder of its reports, removed by
                          run_result_free; else NULL */
    int ranks;         /* MPI runs under the watch: how many ranks */
    char lesson[64];   /* the lesson of the program that ran (the last
                          harness_program's when it started): a sanitizer
                          names a program by its file's name alone, and a
                          test may run another lesson's program before it
                          reads this run's report */
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
 * says where every rank was. A run whose every rank sits inside an MPI call
 * with none moving on (no step entered, no call entered or left) for
 * HARNESS_STALL_S is stopped then, as a deadlock, not at the time limit:
 * nothing but the MPI library runs in such a run, and the longest single
 * call of these lessons' tests takes well under a second even with four
 * ranks on two busy cores, so six seconds of no move is no slow program.
 * So is one whose ranks all go on making MPI calls without entering a step
 * for HARNESS_LOOP_S (result.looping_s), and a run that meets its time limit
 * with every rank still calling MPI says so too. Open MPI's shared-memory files go to the same
 * folder; any that the ranks leave behind are counted in result.leftovers
 * and removed. */
#define HARNESS_STALL_S 6.0
/* A run whose every rank made MPI calls in each 0.2 s look for this long,
 * while no rank entered a new step, is stopped as an endless loop of calls
 * (a ring whose step counter never moves): the drivers enter a step at
 * each phase of their work, and no phase of these lessons' tests makes
 * calls for more than a second or two. */
#define HARNESS_LOOP_S 15.0
run_result harness_run_mpi(const char *lesson, const char *program, int ranks,
                           char *const args[], char *const env[],
                           double timeout_s);

/* ---- Measured from outside the run (tests/harness/rank_watch.c) ---------- */

/* Whether MPI runs are measured from outside their processes here: on
 * Linux every rank of harness_run_mpi runs under the watch, on TCP,
 * behind the boundary (common/boundary.h). Elsewhere (macOS) what a run
 * reports about itself is all the tests have, and they say so. */
bool harness_outside_measures(void);

/* Whether the bytes between ranks are measured outside them too: with
 * Open MPI on TCP (the grader's setting), not with MPICH, whose ranks
 * keep UCX's shared memory (UCX on TCP alone hangs here), so that what
 * they send is the ledgers' count only. */
bool harness_outside_traffic(void);

/* One mark the driver made, with what the watch read at it: memory in
 * KiB (the peak since the "boundary" mark), bytes of the rank's TCP
 * sockets to other ranks and to the process manager, since the start. */
typedef struct {
    char name[32];
    unsigned long long anon, file, shmem, peak;
    unsigned long long sent, received, launcher_sent, launcher_received;
} watch_event;

enum { WATCH_MOST_EVENTS = 8, WATCH_MOST_SOCKETS = 64 };

/* A socket of the rank at its last mark: ports, bytes sent and received. */
typedef struct {
    unsigned local_port, remote_port;
    unsigned long long sent, received;
    bool launcher;
} watch_socket;

/* What the watch wrote for one rank. */
typedef struct {
    bool found;            /* it wrote a report for this rank */
    bool boundary_seen;    /* the state at "boundary", from /proc: */
    int seccomp;           /* 2: a filter is installed */
    int no_new_privs;
    unsigned long long capabilities;   /* effective, as a mask */
    int event_count;       /* marks, in order (more than fit: counted) */
    watch_event events[WATCH_MOST_EVENTS];
    int socket_count;      /* sockets at the last mark */
    watch_socket sockets[WATCH_MOST_SOCKETS];
    bool exited;           /* the driver ended (an "exit" line) */
    int exit_status, exit_signal;
    unsigned long long maxrss;         /* KiB, wait4's */
} watch_report;

/* The watch's report on rank `rank` of an MPI run; .found false when the
 * run was not watched or the watch wrote nothing for the rank. */
watch_report harness_read_watch(const run_result *result, int rank);

/* Fails the test, naming `what` and the rank, unless the watch saw the
 * rank behind its boundary (a seccomp filter, no_new_privs, no
 * capabilities) make exactly the marks "boundary" then "done" and end. */
void harness_expect_watched(const watch_report *w, int rank,
                            const char *what);

/* Between "boundary" and "done": the bytes the rank sent to and received
 * from other ranks (its TCP sockets but the process manager's), and a
 * lower bound on how far its anonymous memory rose above what it held at
 * "boundary", in bytes: the peak of its resident set less what the
 * file-backed and shared pages held at "done" (they only grow in a run:
 * nothing evicts them here), less the anonymous memory at "boundary". */
unsigned long long watch_bytes_sent(const watch_report *w);
unsigned long long watch_bytes_received(const watch_report *w);
unsigned long long watch_memory_growth(const watch_report *w);

/* What a rank's own ledger counted (its report's "comm CALL CALLS SENT
 * RECEIVED" lines, common/comm_ledger.h): bytes, and the messages they
 * took, a point-to-point call one, a collective one to each other rank. */
typedef struct {
    unsigned long long sent, received, messages;
} ledger_traffic;
ledger_traffic harness_ledger_traffic(const char *report, int ranks);

/* The bytes the wire may carry beyond the payload: each message's
 * headers and, for one over the eager limit (4 KiB here), its handshake:
 * the sender's rendezvous header and the receiver's acknowledgement,
 * which the receiver sends (Open MPI's ob1 over TCP: some 30 bytes a
 * header, about 130 bytes for a message of 16 KiB sent in pieces, the
 * acknowledgement included, in a walkthrough's pipelined ring; 160
 * allowed a message); each further fragment's header (some 30 bytes per
 * 32 KiB; 1/512 of the bytes allowed); and 1 KiB for the marks' own
 * messages. */
unsigned long long harness_wire_overhead(unsigned long long bytes,
                                         unsigned long long messages);

/* Fails the test unless the watch saw rank `rank`, behind its boundary,
 * receive what its ledger says it received (`counted`), no less and no
 * more than the wire's overhead allows, and exchange next to nothing with
 * the process manager. `what` names the run, `hint` the TODO. */
void harness_expect_received(const watch_report *w, int rank,
                             const ledger_traffic *counted, const char *what,
                             const char *hint);

/* The same for the bytes a rank sent (where the run's MPI calls are
 * point-to-point, or collectives whose every rank sends its own part: the
 * toolkit's collectives; a library's tree broadcast forwards for others,
 * and is checked by what each rank received). */
void harness_expect_sent(const watch_report *w, int rank,
                         const ledger_traffic *counted, const char *what,
                         const char *hint);

/* The same over all `ranks` ranks of a run together (`counted` holds each
 * rank's), for runs whose calls include MPI's own collectives: how a
 * library spreads their bytes over the ranks is its algorithm's choice
 * (a tree broadcast forwards through some; MPICH's allreduce on 3 ranks
 * sends one rank's data to another first), but every byte one rank sends
 * another receives, and the ledger counts what must cross. */
void harness_expect_traffic_totals(const run_result *result, int ranks,
                                   const ledger_traffic *counted,
                                   const char *what, const char *hint);

/* Fails the test unless rank `rank`'s memory, as the watch measured it
 * from outside (watch_memory_growth), rose by no more than `allowed`
 * bytes (what the formulas let the rank hold after its boundary) and
 * HARNESS_MEMORY_SLACK. */
void harness_expect_memory(const watch_report *w, int rank,
                           unsigned long long allowed, const char *what,
                           const char *hint);

/* The rank's anonymous memory in KiB at its "done" mark, the kernel's
 * count; fails the test, naming `what` and the rank, when the watch saw
 * no such mark. Two runs that differ only in their steps compare it: a
 * step that keeps what it allocates holds more at the end of the longer
 * one. */
unsigned long long harness_watch_anon_at_done(const watch_report *w,
                                              int rank, const char *what);

/* Bytes each rank's sockets sent to each other rank over the whole run,
 * as the watch read them at the ranks' last marks: bytes[from * ranks +
 * to] (`bytes` holds ranks * ranks). A rank's socket is matched to the
 * rank at its other end by their ports (every rank is on this host). */
void harness_watch_peer_bytes(const run_result *result, int ranks,
                              unsigned long long *bytes);

/* What a rank's resident memory grows by beyond its own data in a run of
 * the lessons' programs on TCP, measured here (make test, 1-4 ranks):
 * Open MPI's TCP transport and protocol layer (fragments, requests and
 * per-peer buffers, grown on first use: up to 470 KiB seen on 4 ranks),
 * the OpenMP runtime's threads (stacks, arenas: some 130 KiB), and page
 * rounding (4 KiB a block, a few dozen blocks). 1 MiB covers them twice. */
enum { HARNESS_MEMORY_SLACK = 1 << 20 };

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

/* For the runner: a /dev/shm of its own, the same way. Whatever a run's
 * runtimes put there (LLVM's OpenMP registers each process in a file
 * there, which a process that does not exit cleanly leaves behind; an
 * MPI's shared memory) is the runner's to clear, and gone when it ends.
 * False where it cannot be had. */
bool harness_private_shm(unsigned long mib);

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

/* The first number after "KEY" in rank `rank`'s report; the test fails,
 * naming the rank and the key, when there is none. */
unsigned long long harness_report_value(const char *report, int rank,
                                        const char *key);

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

/* What harness_expect_success would stop the test with, into `why`, and
 * true; false when the run succeeded. *not_started: it stopped at
 * NOT_DONE(). For a test that looks for the cause elsewhere first. */
bool harness_run_failure(const run_result *result, const char *what,
                         char *why, size_t size, bool *not_started);

#endif
