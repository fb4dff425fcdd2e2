/* What every lesson's Check suite uses. */
#define _GNU_SOURCE
#include "harness.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

#include "producer.h"
#include "remove_tree.h"
#include "steps.h"
#include "timer.h"

/* Weak: a file in tests/hidden/ that defines hidden_tests replaces it. */
__attribute__((weak)) void hidden_tests(Suite *suite)
{
    (void)suite;
}

/* A test passes only if it runs to its end. Check's fork mode counts a
 * child that calls exit(0) halfway as passed, so each test also leaves a
 * mark when it finishes: the checked teardown (run in the test's process,
 * after the test body) writes the test's number to a file that the runner
 * opened before the run. The runner runs one test at a time and says which
 * (harness_begin_test) before Check forks it. */
static int completion_fd = -1;
static int current_test = -1;
static int registered_tests;
/* The most tests one suite registers: more is a mistake in the tests,
 * refused when the suite is made (register_test). */
enum { MAX_TESTS = 1024 };
static bool marks_expected[MAX_TESTS];
static const char *test_names[MAX_TESTS];
static double test_timeouts[MAX_TESTS];

void harness_begin_test(int test)
{
    current_test = test;
}

static void mark_test_completed(void)
{
    char line[32];
    int length = snprintf(line, sizeof line, "%d\n", current_test);
    if (completion_fd >= 0 && write(completion_fd, line, (size_t)length) < 0)
        _exit(1);
}

void harness_record_completions(int fd)
{
    completion_fd = fd;
}

int harness_test_count(void)
{
    return registered_tests;
}

bool harness_expects_mark(int test)
{
    return test >= 0 && test < MAX_TESTS && marks_expected[test];
}

double harness_test_timeout(int test)
{
    return test >= 0 && test < MAX_TESTS ? test_timeouts[test] : 0;
}

const char *harness_test_name(int test)
{
    return test >= 0 && test < MAX_TESTS ? test_names[test] : NULL;
}

/* Records the next test's number, name and limit. */
static void register_test(const char *name, double timeout_s,
                          bool expects_mark)
{
    if (registered_tests == MAX_TESTS) {
        fprintf(stderr, "harness: more than %d tests in one suite "
                "(MAX_TESTS, tests/harness/harness.c)\n", MAX_TESTS);
        exit(2);
    }
    marks_expected[registered_tests] = expects_mark;
    test_names[registered_tests] = name;
    test_timeouts[registered_tests] = timeout_s;
    registered_tests++;
}

/* Check keeps the names it is given; these live as long as the suite. */
void harness_add(Suite *suite, const char *name, const TTest *test, int index,
                 double timeout_s)
{
    TCase *tcase = tcase_create(name);
    tcase_add_checked_fixture(tcase, NULL, mark_test_completed);
    tcase_add_loop_test(tcase, test, index, index + 1);
    tcase_set_timeout(tcase, timeout_s);
    suite_add_tcase(suite, tcase);
    register_test(name, timeout_s, true);
}

void harness_add_exit(Suite *suite, const char *name, const TTest *test,
                      int status, double timeout_s)
{
    TCase *tcase = tcase_create(name);
    tcase_add_exit_test(tcase, test, status);
    tcase_set_timeout(tcase, timeout_s);
    suite_add_tcase(suite, tcase);
    register_test(name, timeout_s, false); /* it ends by exiting: no mark */
}

static void sleep_seconds(double seconds)
{
    struct timespec pause = { (time_t)seconds,
                              (long)((seconds - (double)(time_t)seconds) * 1e9) };
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
}

/* Reads a whole file written by the child; "" when there is none. */
static char *slurp(FILE *file)
{
    long size;
    char *text;
    if (file == NULL || fseek(file, 0, SEEK_END) != 0 ||
        (size = ftell(file)) < 0 || fseek(file, 0, SEEK_SET) != 0)
        size = 0;
    text = malloc((size_t)size + 1);
    ck_assert_msg(text != NULL, "harness: out of memory reading output");
    size = file ? (long)fread(text, 1, (size_t)size, file) : 0;
    text[size] = '\0';
    return text;
}

/* A path from `format` into path[PATH_MAX]; one too long for it fails the
 * test (in a test's own process) rather than name another file. */
__attribute__((format(printf, 2, 3)))
static void path_of(char path[PATH_MAX], const char *format, ...)
{
    va_list args;
    va_start(args, format);
    int length = vsnprintf(path, PATH_MAX, format, args);
    va_end(args);
    ck_assert_msg(length >= 0 && length < PATH_MAX, "harness: a path longer "
                  "than %d characters: %s...", PATH_MAX - 1, path);
}

/* ---- The scratch folder -------------------------------------------------
 * Every run's files live in folders of the scratch folder, which the code
 * under test can write (under the sandbox, it is all it can write): it may
 * replace a folder there with a link, or fill one with links, to make the
 * harness write, read or remove something else. So the harness reaches
 * them only through a descriptor of the scratch folder that it has held
 * since before any run (the runner's, harness_use_scratch), opening each
 * folder below it and each file in them without following a link
 * (remove_tree.h). */
static const char *scratch_path;
static int scratch_fd = -1;

void harness_use_scratch(const char *path, int fd)
{
    scratch_path = path;
    scratch_fd = fd;
    setenv("ZZ_SCRATCH", path, 1);
}

const char *harness_scratch(void)
{
    if (scratch_path != NULL)
        return scratch_path;
    const char *scratch = getenv("ZZ_SCRATCH");
    if (scratch == NULL || scratch[0] == '\0')
        scratch = getenv("TMPDIR");
    return scratch != NULL && scratch[0] != '\0' ? scratch : "/tmp";
}

/* The scratch folder's descriptor: the runner's, or (a suite run without
 * it) the folder harness_scratch names, opened once, before any run. */
static int scratch_folder(void)
{
    if (scratch_fd < 0) {
        scratch_fd = open(harness_scratch(), O_RDONLY | O_DIRECTORY |
                          O_CLOEXEC);
        ck_assert_msg(scratch_fd >= 0, "harness: cannot open the scratch "
                      "folder %s: %s", harness_scratch(), strerror(errno));
    }
    return scratch_fd;
}

/* A new folder of the scratch folder, named PREFIX and six letters, into
 * path[HARNESS_PATH]. */
static void make_run_folder(char path[HARNESS_PATH], const char *prefix)
{
    char name[FOLDER_NAME_SIZE];
    ck_assert_msg(make_folder_at(scratch_folder(), prefix, name) == 0,
                  "harness: cannot make a folder in the scratch folder %s: "
                  "%s", harness_scratch(), strerror(errno));
    int length = snprintf(path, HARNESS_PATH, "%s/%s", harness_scratch(),
                          name);
    ck_assert_msg(length > 0 && length < HARNESS_PATH, "harness: the "
                  "scratch folder's path is too long: %s", harness_scratch());
}

void harness_out_dir(char path[HARNESS_PATH])
{
    make_run_folder(path, "zz-out-");
}

/* The folder `dir` opened: one inside the scratch folder through the held
 * descriptor, following no link; any other (a test's own choice, out of
 * the runs' reach) as it is named. -1 with errno when it cannot be. */
static int open_run_folder(const char *dir)
{
    const char *scratch = harness_scratch();
    size_t length = strlen(scratch);
    if (strncmp(dir, scratch, length) == 0 &&
        (dir[length] == '\0' || dir[length] == '/'))
        return open_folder_below(scratch_folder(), dir + length);
    return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* DIR/NAME, which a run wrote, opened for reading: a plain file, never
 * reached through a link, never a pipe or a device that could block the
 * test. NULL with errno otherwise. */
static FILE *open_run_output(const char *dir, const char *name)
{
    int folder = open_run_folder(dir);
    if (folder < 0)
        return NULL;
    int fd = openat(folder, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
                    O_CLOEXEC);
    int error = errno;
    close(folder);
    struct stat info;
    if (fd >= 0 && (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))) {
        close(fd);
        fd = -1;
        error = EINVAL;
    }
    FILE *file = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (file == NULL && fd >= 0) {
        error = errno;
        close(fd);
    }
    errno = error;
    return file;
}

/* DIR/NAME made afresh for writing: whatever a run left under that name (a
 * link, a file linked to another elsewhere) is removed first, never written
 * through. NULL with errno. */
static FILE *create_run_input(const char *dir, const char *name)
{
    int folder = open_run_folder(dir);
    if (folder < 0)
        return NULL;
    if (unlinkat(folder, name, 0) != 0 && errno != ENOENT) {
        int error = errno;
        close(folder);
        errno = error;
        return NULL;
    }
    int fd = openat(folder, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                    O_CLOEXEC, 0666);
    int error = errno;
    close(folder);
    FILE *file = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (file == NULL && fd >= 0) {
        error = errno;
        close(fd);
    }
    errno = error;
    return file;
}

size_t harness_processes(process_info *list, size_t capacity)
{
    size_t count = 0;
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    while (proc != NULL && (entry = readdir(proc)) != NULL &&
           count < capacity) {
        char path[sizeof "/proc//cmdline" + sizeof entry->d_name];
        /* Only its first fields are read: a longer line may be cut short. */
        char stat_line[1024];
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        FILE *file = fopen(path, "r");
        if (file == NULL)
            continue;
        size_t length = fread(stat_line, 1, sizeof stat_line - 1, file);
        fclose(file);
        stat_line[length] = '\0';
        /* "pid (name) state ppid pgrp session ...": the name may hold
         * spaces and parentheses, so read from the last ')'. */
        const char *after_name = strrchr(stat_line, ')');
        process_info *p = &list[count];
        int group;
        if (after_name == NULL ||
            sscanf(after_name + 1, " %c %d %d %d", &p->state, &p->parent,
                   &group, &p->session) != 4)
            continue;
        p->pid = atoi(entry->d_name);
        snprintf(path, sizeof path, "/proc/%s/cmdline", entry->d_name);
        file = fopen(path, "r");
        length = file ? fread(p->program, 1, sizeof p->program - 1, file) : 0;
        if (file != NULL)
            fclose(file);
        p->program[length] = '\0'; /* argv[0]: up to the first NUL */
        count++;
    }
    if (proc != NULL)
        closedir(proc);
    return count;
}

/* Sends `signal` to every process in session `session`: the program and
 * all it started. Open MPI puts each rank in a process group of its own,
 * so killing mpirun's group is not enough; the session holds them all.
 * Used only where a run could not get a PID namespace of its own (see
 * harness_run); it reads every process of the machine. */
static int signal_session(pid_t session, int signal)
{
    static process_info list[HARNESS_MAX_PROCESSES];
    int signalled = 0;
    kill(-session, signal);
    size_t count = harness_processes(list, HARNESS_MAX_PROCESSES);
    for (size_t k = 0; k < count; k++)
        if (list[k].session == (int)session && list[k].state != 'Z') {
            kill((pid_t)list[k].pid, signal);
            signalled++;
        }
    return signalled;
}

/* ---- Containment ------------------------------------------------------------
 * Each program runs three levels below the test:
 *
 *   test ── waiter ── keeper ── program (and all it starts)
 *
 * The waiter moves into a new PID namespace (as root, or in a user namespace
 * of its own where the kernel allows one) and forks the keeper, which is
 * process 1 there. The keeper starts the program, reaps whatever ends in the
 * namespace, and when the program ends it tells the test how (through a
 * pipe the program does not hold) and exits: the kernel then kills every
 * process left in the namespace, however it forked or hid, and nothing in
 * it can see or signal a process outside. The cost does not depend on what
 * else the machine runs. Where no namespace can be had (macOS, a kernel
 * that forbids them), the keeper is a subreaper instead and sweeps its
 * orphans by reading /proc; a program there could still outrun the sweep,
 * which is why untrusted code is graded with the sandbox. */

typedef struct {
    int status;   /* the program's wait status */
    int strays;   /* 1 if processes were left running when it ended */
} keeper_report;

static pid_t program_pid; /* in the keeper: the program */

static void keeper_forward(int signal)
{
    /* In its own namespace the keeper is process 1, and kill(-1) reaches
     * every other process there; elsewhere only the program's session. */
    if (getpid() == 1)
        kill(-1, signal);
    else if (program_pid > 0)
        kill(-program_pid, signal);
}

static bool write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    if (file == NULL)
        return false;
    bool ok = fputs(text, file) >= 0;
    return fclose(file) == 0 && ok;
}

/* Moves the calling process into new namespaces of the kinds in `kinds`
 * (CLONE_NEW...): directly where it may (as root), else inside a user
 * namespace of its own that maps only its own ids. False where neither is
 * allowed. */
static bool unshare_as_ourselves(int kinds)
{
#ifdef __linux__
    if (unshare(kinds) == 0)
        return true;
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | kinds) != 0)
        return false;
    char map[64];
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
    bool ok = write_file("/proc/self/uid_map", map);
    write_file("/proc/self/setgroups", "deny\n");
    snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
    return write_file("/proc/self/gid_map", map) && ok;
#else
    (void)kinds;
    return false;
#endif
}

/* Moves the calling process's future children into a new PID namespace;
 * false where that is not allowed. */
static bool enter_pid_namespace(void)
{
#ifdef __linux__
    return unshare_as_ourselves(CLONE_NEWPID);
#else
    return false;
#endif
}

/* A tmpfs of `mib` MiB named `name` over `folder`, in the calling
 * process's own mount namespace (made at the first call). */
static bool private_folder(const char *name, const char *folder,
                           unsigned long mib)
{
#ifdef __linux__
    static int own_namespace; /* 0: not tried yet, 1: made, -1: refused */
    if (own_namespace == 0)
        own_namespace = unshare_as_ourselves(CLONE_NEWNS) &&
                        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE,
                              NULL) == 0 ? 1 : -1;
    char options[64];
    snprintf(options, sizeof options, "mode=1777,size=%lum", mib);
    struct stat st;
    return own_namespace == 1 && stat(folder, &st) == 0 &&
           S_ISDIR(st.st_mode) &&
           mount(name, folder, "tmpfs", MS_NOSUID | MS_NODEV, options) == 0;
#else
    (void)name, (void)folder, (void)mib;
    return false;
#endif
}

bool harness_private_tmp(unsigned long mib)
{
    return private_folder("zz-tmp", "/tmp", mib);
}

bool harness_private_shm(unsigned long mib)
{
    return private_folder("zz-shm", "/dev/shm", mib);
}

/* Closes every descriptor above standard error: the program must hold
 * nothing of the test's (its results, its reports, this pipe). */
static void close_inherited(void)
{
#if defined(__linux__) && defined(SYS_close_range)
    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
        return;
#endif
    long most = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (most > 0 && most < 65536 ? most : 65536); fd++)
        close(fd);
}

/* Kills the keeper's orphans where it is not process 1: they come to it
 * because it is a subreaper. Killing one orphans its children, which come
 * next; repeated until none is left. */
static void keeper_sweep(void)
{
#ifdef __linux__
    static process_info list[HARNESS_MAX_PROCESSES];
    for (int round = 0; round < 200; round++) {
        int found = 0;
        size_t count = harness_processes(list, HARNESS_MAX_PROCESSES);
        for (size_t k = 0; k < count; k++)
            if (list[k].parent == (int)getpid()) {
                kill((pid_t)list[k].pid, SIGKILL);
                found++;
            }
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        if (found == 0)
            return;
    }
#endif
}

/* What a sandboxed program sees of the system, read-only: the system's
 * programs and libraries, and of /etc what the loader and the MPI libraries
 * read (the loader's cache, the alternatives that name mpirun, Open MPI's
 * settings, how to look up localhost and the user), never /etc whole (it
 * holds the machine's secrets, which a program could print into a failure
 * message). /sys: hwloc, which both MPIs use to learn the machine, reads
 * it. Each is bound only where it exists; one that is a link (/bin ->
 * usr/bin on a merged /usr) is made the same link. Not /home, /root, /opt,
 * /srv, /var, /mnt, /media, /tmp or the checkout: there lie the other
 * checkouts and their solutions/, and the folders of other gradings. */
static const char *const sandbox_system[] = {
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
    "/etc/alternatives", "/etc/openmpi", "/etc/mpich", "/etc/hwloc",
    "/etc/OpenCL", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf",
    "/etc/gai.conf", "/etc/resolv.conf", "/etc/passwd", "/etc/group",
    "/etc/localtime", NULL
};

/* The sizes of a sandboxed program's own /tmp and /dev/shm, and of the
 * /dev/shm every run gets (run_keeper): a program that fills them fills
 * only them, and they go with it. Honest runs use far less. Open MPI keeps
 * its session and shared-memory files in the run's folder of the scratch
 * folder (harness_run_mpi), and its /tmp and /dev/shm stay empty. MPICH
 * maps its shared memory from /dev/shm, some 4.2 MiB a rank (measured: 8.2
 * MiB on 2 ranks, 16.5 on 4, the lessons' most, 32.9 on 8): 128 MiB is
 * room for 30 ranks. Nothing else writes to /tmp (the checks on the
 * student's files refuse fopen). */
enum { RUN_SHM_MIB = 128, SANDBOX_TMP_MIB = 64 };

/* Appends `word` to bubblewrap's command in `words` (MAX_SANDBOX_WORDS
 * long, its last entry kept for the NULL); more words than that are
 * refused: the program would run without some of them. */
enum { MAX_SANDBOX_WORDS = 384 };
static void add_word(char **words, int *count, const char *word,
                     const char *program)
{
    if (*count == MAX_SANDBOX_WORDS - 1) {
        fprintf(stderr, "harness: %s's command is too long for the sandbox "
                "(MAX_SANDBOX_WORDS, tests/harness/harness.c)\n", program);
        _exit(127);
    }
    words[(*count)++] = (char *)word;
}

/* Whether `word` names a program in a lesson's folder of the build,
 * BUILD/NN-name/program. Other words of a command name paths in the build
 * too: the scratch folder, where MPI keeps its session files, lies there
 * in make grade. */
static bool lesson_program(const char *word, const char *build)
{
    const size_t length = strlen(build);
    if (strncmp(word, build, length) != 0 || word[length] != '/')
        return false;
    const char *lesson = word + length + 1, *slash = strchr(lesson, '/');
    return isdigit((unsigned char)lesson[0]) &&
           isdigit((unsigned char)lesson[1]) && lesson[2] == '-' &&
           slash != NULL && strchr(slash + 1, '/') == NULL &&
           access(word, X_OK) == 0;
}

/* With ZZ_SANDBOX set (make grade's sandbox), the program runs under
 * bubblewrap: as an unprivileged user without capabilities (so it cannot
 * remount anything), in PID, network and IPC namespaces of its own, seeing
 * the system's files above (sandbox_system), read-only; of the checkout
 * only this grading's programs of the lesson (ZZ_SANDBOX_SHOW), read-only
 * (the checkout, ZZ_SANDBOX_HIDE, stays hidden even where it lies under
 * /usr); a /tmp and a /dev/shm of its own, of fixed sizes; and nothing
 * writable but the runner's scratch folder. bubblewrap's own root and
 * /dev are made read-only: they are memory without a size. GPU device
 * nodes are passed through, so CUDA lessons still run. Returns argv itself
 * when there is no sandbox to use. */
static char *const *sandboxed(char *const argv[], bool isolated)
{
    enum { MAX_DEVICES = 16, MAX_LINKS = 16 };
    static char *words[MAX_SANDBOX_WORDS];
    static char devices[MAX_DEVICES]
                       [sizeof "/dev/" + sizeof ((struct dirent *)0)->d_name];
    static char links[MAX_LINKS][PATH_MAX];
    static char tmp_size[32], shm_size[32];
    const char *hide = getenv("ZZ_SANDBOX_HIDE");
    const char *show = getenv("ZZ_SANDBOX_SHOW");
    const char *program = argv[0];
    if (getenv("ZZ_SANDBOX") == NULL)
        return argv;
    int n = 0;
    const char *fixed[] = { "bwrap", "--unshare-user", "--uid", "65534",
                            "--gid", "65534", "--unshare-net",
                            "--unshare-ipc", "--cap-drop", "ALL",
                            "--die-with-parent", "--new-session", NULL };
    for (int k = 0; fixed[k] != NULL; k++)
        add_word(words, &n, fixed[k], program);
    int link_count = 0;
    for (int k = 0; sandbox_system[k] != NULL; k++) {
        const char *path = sandbox_system[k];
        struct stat info;
        if (lstat(path, &info) != 0)
            continue;
        if (S_ISLNK(info.st_mode) && link_count < MAX_LINKS) {
            ssize_t length = readlink(path, links[link_count],
                                      sizeof links[0] - 1);
            if (length > 0) {
                links[link_count][length] = '\0';
                add_word(words, &n, "--symlink", program);
                add_word(words, &n, links[link_count++], program);
                add_word(words, &n, path, program);
                continue;
            }
        }
        add_word(words, &n, "--ro-bind", program);
        add_word(words, &n, path, program);
        add_word(words, &n, path, program);
    }
    /* In the keeper's PID namespace already, the program stays in it: the
     * keeper then sees what it leaves running, as without the sandbox; its
     * /proc is the keeper's own (run_keeper), bound read-only. */
    if (isolated) {
        add_word(words, &n, "--ro-bind", program);
        add_word(words, &n, "/proc", program);
        add_word(words, &n, "/proc", program);
    } else {
        add_word(words, &n, "--unshare-pid", program);
        add_word(words, &n, "--proc", program);
        add_word(words, &n, "/proc", program);
    }
    add_word(words, &n, "--dev", program);
    add_word(words, &n, "/dev", program);
    snprintf(tmp_size, sizeof tmp_size, "%lu",
             (unsigned long)SANDBOX_TMP_MIB << 20);
    snprintf(shm_size, sizeof shm_size, "%lu",
             (unsigned long)RUN_SHM_MIB << 20);
    const char *sized[] = { "--size", tmp_size, "--tmpfs", "/tmp",
                            "--size", shm_size, "--tmpfs", "/dev/shm",
                            NULL };
    for (int k = 0; sized[k] != NULL; k++)
        add_word(words, &n, sized[k], program);
    /* The checkout needs hiding only where it lies in a folder bound
     * above (/usr/local/src, say): then an empty folder covers it, made
     * read-only at the end, like bubblewrap's own root. */
    bool cover = false;
    for (int k = 0; hide != NULL && sandbox_system[k] != NULL; k++) {
        size_t length = strlen(sandbox_system[k]);
        cover = cover || (strncmp(hide, sandbox_system[k], length) == 0 &&
                          (hide[length] == '/' || hide[length] == '\0'));
    }
    if (cover) {
        add_word(words, &n, "--tmpfs", program);
        add_word(words, &n, hide, program);
    }
    if (show != NULL) {
        add_word(words, &n, "--ro-bind", program);
        add_word(words, &n, show, program);
        add_word(words, &n, show, program);
    }
    /* A program of an earlier lesson of this grading's build, named on
     * the command line (lesson 07's tests run lesson 06's driver, on the
     * student's lesson 06): that lesson's folder too, read-only. */
    static char watch[PATH_MAX], folder[PATH_MAX];
    const char *build = getenv("ZZ_BUILD_DIR");
    bool folder_bound = false;
    for (int k = 0; build != NULL && argv[k] != NULL && !folder_bound;
         k++) {
        const char *word = argv[k], *slash = strrchr(word, '/');
        if (!lesson_program(word, build) ||
            (size_t)(slash - word) >= sizeof folder)
            continue;
        memcpy(folder, word, (size_t)(slash - word));
        folder[slash - word] = '\0';
        if (show != NULL && strcmp(folder, show) == 0)
            continue;
        add_word(words, &n, "--ro-bind", program);
        add_word(words, &n, folder, program);
        add_word(words, &n, folder, program);
        folder_bound = true;
    }
    /* And the watch every MPI rank starts under (rank_watch.c), given code
     * of this grading's build. */
    if (build != NULL && snprintf(watch, sizeof watch, "%s/tests/rank_watch",
                                  build) < (int)sizeof watch &&
        access(watch, X_OK) == 0) {
        add_word(words, &n, "--ro-bind", program);
        add_word(words, &n, watch, program);
        add_word(words, &n, watch, program);
    }
    DIR *dev = opendir("/dev");
    struct dirent *entry;
    int device_count = 0;
    while (dev != NULL && (entry = readdir(dev)) != NULL)
        if (strncmp(entry->d_name, "nvidia", 6) == 0) {
            if (device_count == MAX_DEVICES) {
                fprintf(stderr, "harness: more than %d GPU device nodes in "
                        "/dev for the sandbox (MAX_DEVICES, "
                        "tests/harness/harness.c)\n", MAX_DEVICES);
                _exit(127);
            }
            snprintf(devices[device_count], sizeof devices[0], "/dev/%s",
                     entry->d_name);
            add_word(words, &n, "--dev-bind", program);
            add_word(words, &n, devices[device_count], program);
            add_word(words, &n, devices[device_count], program);
            device_count++;
        }
    if (dev != NULL)
        closedir(dev);
    const char *last[] = { "--bind", harness_scratch(), harness_scratch(),
                           "--remount-ro", "/dev", "--remount-ro", "/",
                           "--chdir", harness_scratch(), NULL };
    for (int k = 0; last[k] != NULL; k++)
        add_word(words, &n, last[k], program);
    if (cover) {
        add_word(words, &n, "--remount-ro", program);
        add_word(words, &n, hide, program);
    }
    add_word(words, &n, "--", program);
    for (int k = 0; argv[k] != NULL; k++)
        add_word(words, &n, argv[k], program);
    words[n] = NULL;
    return words;
}

static _Noreturn void run_keeper(char *const argv[], int report_fd,
                                 bool isolated)
{
#ifdef __linux__
    if (!isolated)
        prctl(PR_SET_CHILD_SUBREAPER, 1);
    /* Its own view of /proc, in a mount namespace of its own: the program
     * sees the processes of its run and no other (under the sandbox too,
     * which binds this /proc). And its own /dev/shm, of RUN_SHM_MIB, gone
     * with the namespace: what a killed program leaves there (LLVM's
     * OpenMP runtime registers each process in a file there, and only a
     * normal exit removes it) is never left on the machine, and what fills
     * it fills only its own. */
    if (isolated && unshare(CLONE_NEWNS) == 0 &&
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) {
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              NULL);
        char shm_options[64];
        snprintf(shm_options, sizeof shm_options, "mode=1777,size=%dm",
                 (int)RUN_SHM_MIB);
        if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV,
                  shm_options) == 0)
            setenv("ZZ_PRIVATE_SHM", "1", 1);
    }
    /* If the test dies, the keeper goes too (and with it the namespace). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    program_pid = fork();
    if (program_pid < 0)
        _exit(126);
    if (program_pid == 0) {
        close_inherited();
        signal(SIGTERM, SIG_DFL);
        char *const *command = sandboxed(argv, isolated);
        execvp(command[0], command);
        fprintf(stderr, "harness: cannot run %s: %s\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    struct sigaction forward = { .sa_handler = keeper_forward };
    sigaction(SIGTERM, &forward, NULL);
    keeper_report report = { 0 };
    for (;;) {
        int status;
        pid_t done = waitpid(-1, &status, 0);
        if (done == program_pid) {
            report.status = status;
            break;
        }
        if (done < 0 && errno != EINTR)
            _exit(126);
    }
    /* Anything else still running was left behind by the program; a
     * process already on its way out (a launcher's helper) gets 0.2 s. The
     * limit is on time, not on quiet rounds: what the program left may fork
     * and exit for ever, each exit another child to reap. */
    double deadline = timer_now() + 0.2;
    for (;;) {
        pid_t done = waitpid(-1, NULL, WNOHANG);
        if (done < 0) {
            report.strays = 0;
            break;
        }
        if (timer_now() > deadline) {
            report.strays = 1;
            break;
        }
        if (done == 0)
            nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
    }
    if (report.strays && !isolated)
        keeper_sweep();
    if (write(report_fd, &report, sizeof report) != (ssize_t)sizeof report)
        _exit(126);
    _exit(0); /* process 1 ends: the kernel kills what is left */
}

/* In the waiter: the keeper, and what the test's SIGUSR1 asks of it at
 * the time limit, to kill the keeper and then wait for it. Killing the
 * keeper (process 1 of its namespace) makes the kernel kill everything in
 * the namespace, and the keeper is reaped only once all of it is gone: a
 * test that waits for the waiter then knows nothing of the run is left. */
static pid_t waiter_keeper;

static void waiter_kill_keeper(int signal)
{
    (void)signal;
    if (waiter_keeper > 0)
        kill(waiter_keeper, SIGKILL);
}

/* An MPI run's steps files, watched for a deadlock (harness_run_mpi). */
typedef struct {
    const char *dir;
    int ranks;
    uint64_t *moves;    /* each rank's counts when last read (steps.h) */
    uint64_t *entered;
    double *moved_at;   /* when each rank's count last moved */
    double since;       /* when a count last moved, or a rank was outside
                           MPI */
    double loop_since;  /* when a rank last entered a step or made no MPI
                           call between two looks */
    double calling_at;  /* the last look that found every rank calling
                           MPI, none entering a step */
    double calling_s;   /* and since when they had been, then */
    double ended_at;    /* when the run ended */
} stall_watch;

static void read_steps(const char *path, char *step, char *call, size_t len,
                       uint64_t *moves, uint64_t *entered);

/* Looks at the ranks' steps files (steps.h): whether every rank has sat
 * inside an MPI call, none moving on, for HARNESS_STALL_S (a deadlock), or
 * has gone on making MPI calls without entering a step for HARNESS_LOOP_S
 * (an endless loop of calls, *looping). */
/* A rank whose count has not moved for this long waits (a deadlock, or
 * work outside MPI); less is a rank that the scheduler left out of a look
 * or two, on a machine busier than it has cores. */
#define HARNESS_LOOP_PAUSE_S 1.0

static bool stalled(stall_watch *watch, bool *looping)
{
    bool still = true, calling = true, stepped = false;
    double now = timer_now();
    for (int r = 0; r < watch->ranks; r++) {
        char path[PATH_MAX], step[STEPS_FIELD], call[STEPS_FIELD];
        uint64_t moves = 0, entered = 0;
        path_of(path, "%s/rank-%d", watch->dir, r);
        read_steps(path, step, call, sizeof step, &moves, &entered);
        if (call[0] == '\0' || moves != watch->moves[r])
            still = false;
        if (moves != watch->moves[r])
            watch->moved_at[r] = now;
        if (now - watch->moved_at[r] >= HARNESS_LOOP_PAUSE_S ||
            step[0] == '\0')
            calling = false;
        if (entered != watch->entered[r])
            stepped = true;
        watch->moves[r] = moves;
        watch->entered[r] = entered;
    }
    if (!still)
        watch->since = now;
    if (!calling || stepped)
        watch->loop_since = now;
    else {
        watch->calling_at = now;
        watch->calling_s = now - watch->loop_since;
    }
    *looping = now - watch->loop_since >= HARNESS_LOOP_S;
    return *looping || now - watch->since >= HARNESS_STALL_S;
}

/* harness_run, and for an MPI run with `watch`, stopped early when it
 * stalls. */
/* ---- ThreadSanitizer's reports of the OpenMP runtime's own memory ----
 *
 * LLVM's OpenMP runtime hands a task's private data (its firstprivate
 * copies) out of memory it allocated itself and reuses it for the next
 * task, through lists ThreadSanitizer cannot see: a correct program of
 * `#pragma omp task firstprivate(...)` gets a race reported between the
 * write of a new task's copy and the read of an older task's, in the same
 * reused bytes (clang 14, Archer; every run of a small loop of tasks).
 * Such memory is never the program's own: a report whose location is a
 * heap block the runtime allocated (the first frame after the allocation
 * call in libomp's or libgomp's module) is the runtime's, and is not the
 * student's race. */

/* The report that starts at `warning` ("WARNING: ThreadSanitizer: ..."):
 * whether its location is memory the OpenMP runtime allocated. */
static bool runtime_race(const char *warning)
{
    const char *end = strstr(warning, "SUMMARY: ThreadSanitizer");
    const char *location = strstr(warning, "Location is heap block");
    if (end == NULL || location == NULL || location > end)
        return false;
    const char *frame = strstr(location, "#1 ");
    if (frame == NULL || frame > end)
        return false;
    size_t n = strcspn(frame, "\n");
    return memmem(frame, n, "(libomp.so", 10) != NULL ||
           memmem(frame, n, "(libgomp.so", 11) != NULL;
}

/* The first ThreadSanitizer report in `err` from `from` on that is not the
 * runtime's own, or NULL. */
static const char *first_own_race(const char *from)
{
    static const char mark[] = "WARNING: ThreadSanitizer: ";
    for (const char *at = strstr(from, mark); at != NULL;
         at = strstr(at + 1, mark))
        if (!runtime_race(at))
            return at;
    return NULL;
}

/* A run that ThreadSanitizer made fail (its exitcode, 66, given by
 * scripts/tsan-options.sh: the program itself had ended well) for the
 * runtime's reports alone. */
static bool failed_for_runtime_races_only(const run_result *result)
{
    return result->exit_status == 66 && !result->timed_out &&
           result->signal == 0 && result->err != NULL &&
           strstr(result->err, "WARNING: ThreadSanitizer: ") != NULL &&
           first_own_race(result->err) == NULL;
}

/* The lesson whose program the test ran last (harness_program): each run
 * keeps it (run_result's lesson), for the sanitizer's report. */
static char lesson_of_programs[64];

static run_result run_watched(char *const argv[], char *const env[],
                              double timeout_s, stall_watch *watch)
{
    run_result result = { 0 };
    snprintf(result.lesson, sizeof result.lesson, "%s", lesson_of_programs);
    /* Output goes to unnamed temporary files, not pipes: a child that writes
     * a lot can never block on a full pipe while we wait for it. */
    FILE *out = tmpfile(), *err = tmpfile();
    double start = timer_now();
    int status = 0, report_pipe[2];
    pid_t waiter;

    ck_assert_msg(out != NULL && err != NULL, "harness: tmpfile: %s",
                  strerror(errno));
    ck_assert_msg(pipe(report_pipe) == 0, "harness: pipe: %s",
                  strerror(errno));
    fflush(NULL);
    waiter = fork();
    ck_assert_msg(waiter >= 0, "harness: fork: %s", strerror(errno));
    if (waiter == 0) {
        /* A session of its own: without a namespace, everything the
         * program starts stays in it, whatever process groups they make. */
        setsid();
#ifdef __linux__
        /* If the test dies (its own time limit), so does the run. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        /* The keeper, not the waiter, answers the first signal at the time
         * limit (it passes it on to the program). */
        signal(SIGTERM, SIG_IGN);
        close(report_pipe[0]);
        /* Nothing to read, and no end to it: a pipe that nobody writes
         * to, its write end held here (and by the keeper) until the run
         * ends, closed in the program. Given /dev/null, MPICH's mpiexec
         * tells rank 0's proxy at once that stdin has ended, and dies of
         * SIGPIPE, silently (status 141), when a rank there that ends at
         * once (a program that cannot start) has already finished. */
        int typed[2];
        if (pipe(typed) == 0) {
            fcntl(typed[1], F_SETFD, FD_CLOEXEC);
            if (typed[0] != STDIN_FILENO) {
                dup2(typed[0], STDIN_FILENO);
                close(typed[0]);
            }
        }
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(err), STDERR_FILENO);
        for (size_t k = 0; env != NULL && env[k] != NULL; k++)
            putenv(env[k]);
        bool isolated = enter_pid_namespace();
        char isolation = isolated ? 'N' : 'S';
        if (write(report_pipe[1], &isolation, 1) != 1)
            _exit(126);
        pid_t keeper = fork();
        if (keeper < 0)
            _exit(126);
        if (keeper == 0)
            run_keeper(argv, report_pipe[1], isolated);
        waiter_keeper = keeper;
        struct sigaction kill_keeper = { .sa_handler = waiter_kill_keeper };
        sigaction(SIGUSR1, &kill_keeper, NULL);
        close(report_pipe[1]);
        /* The test reaches the keeper through the waiter: signals sent
         * here go on to it. */
        int keeper_status;
        while (waitpid(keeper, &keeper_status, 0) < 0 && errno == EINTR) {
        }
        _exit(0);
    }
    close(report_pipe[1]);
    char isolation = 0;
    double looked = start;
    if (watch != NULL) {
        watch->since = watch->loop_since = start;
        for (int r = 0; r < watch->ranks; r++)
            watch->moved_at[r] = start;
    }
    for (;;) {
        bool done = waitpid(waiter, &status, WNOHANG) == waiter;
        if (done)
            break;
        bool stall = false, looping = false;
        if (watch != NULL && timer_now() - looked >= 0.2) {
            looked = timer_now();
            stall = stalled(watch, &looping);
        }
        if (stall || timer_now() - start > timeout_s) {
            result.timed_out = true;
            if (looping)
                result.looping_s = watch->calling_s;
            if (stall && !looping)
                result.stalled_s = HARNESS_STALL_S;
            /* The waiter's process group holds the keeper, which passes
             * the first signal on; killing the keeper ends its namespace.
             * Without a namespace the program's session is swept too. */
            if (isolation == 0 && read(report_pipe[0], &isolation, 1) != 1)
                isolation = 'S';
            kill(-waiter, SIGTERM);
            if (isolation != 'N')
                signal_session(waiter, SIGTERM);
            sleep_seconds(1.0);
            if (isolation == 'N') {
                /* The waiter kills the keeper and waits until its
                 * namespace is empty (waiter_kill_keeper); 5 s, and then
                 * everything in the waiter's group goes as below. */
                kill(waiter, SIGUSR1);
                double asked = timer_now();
                while (!(done = waitpid(waiter, &status, WNOHANG) == waiter)
                       && timer_now() - asked < 5.0)
                    sleep_seconds(0.005);
                if (done)
                    break;
            }
            kill(-waiter, SIGKILL);
            if (isolation != 'N')
                signal_session(waiter, SIGKILL);
            waitpid(waiter, &status, 0);
            break;
        }
        sleep_seconds(0.005);
    }
    keeper_report report;
    if (isolation == 0 && read(report_pipe[0], &isolation, 1) != 1)
        isolation = 'S';
    ssize_t got = read(report_pipe[0], &report, sizeof report);
    close(report_pipe[0]);
    if (got == (ssize_t)sizeof report) {
        status = report.status;
        result.strays = report.strays;
    } else {
        /* No report: the keeper was killed at the time limit, or by
         * something inside the run. */
        if (!result.timed_out)
            result.supervisor_lost = true;
        status = 0;
        result.signal = SIGKILL;
    }
    result.isolated = isolation == 'N';

    result.seconds = timer_now() - start;
    if (watch != NULL)
        watch->ended_at = timer_now();
    if (got == (ssize_t)sizeof report) {
        result.started = !(WIFEXITED(status) && WEXITSTATUS(status) == 127);
        if (WIFEXITED(status))
            result.exit_status = WEXITSTATUS(status);
        else if (WIFSIGNALED(status))
            result.signal = WTERMSIG(status);
    } else {
        result.started = true;
    }
    result.out = slurp(out);
    result.err = slurp(err);
    fclose(out);
    fclose(err);
    if (failed_for_runtime_races_only(&result))
        result.exit_status = 0;
    return result;
}

run_result harness_run(char *const argv[], char *const env[],
                       double timeout_s)
{
    return run_watched(argv, env, timeout_s, NULL);
}

void run_result_free(run_result *result)
{
    free(result->out);
    free(result->err);
    free(result->where);
    if (result->watch_dir != NULL)
        harness_remove_out_dir(result->watch_dir);
    free(result->watch_dir);
    result->out = result->err = result->where = result->watch_dir = NULL;
}

const char *harness_program(const char *lesson, const char *program)
{
    static char path[PATH_MAX];
    snprintf(lesson_of_programs, sizeof lesson_of_programs, "%s", lesson);
    const char *build = getenv("ZZ_BUILD_DIR");
    ck_assert_msg(build != NULL, "harness: ZZ_BUILD_DIR is not set: run the "
                  "tests through make (make check L=NN)");
    path_of(path, "%s/%s/%s", build, lesson, program);
    return path;
}

/* Reads a steps file (two NUL-padded lines: step, MPI call; then the count
 * of marks, into *moves, and of steps entered, into *entered); see
 * common/steps.h. */
static void read_steps(const char *path, char *step, char *call, size_t len,
                       uint64_t *moves, uint64_t *entered)
{
    enum { FIELD = STEPS_FIELD };
    char page[STEPS_PAGE] = { 0 };
    FILE *file = fopen(path, "r");
    step[0] = call[0] = '\0';
    if (file == NULL)
        return;
    size_t got = fread(page, 1, sizeof page, file);
    fclose(file);
    (void)got;
    snprintf(step, len, "%.*s", (int)strcspn(page, "\n"), page);
    snprintf(call, len, "%.*s", (int)strcspn(page + FIELD, "\n"),
             page + FIELD);
    memcpy(moves, page + STEPS_MOVES, sizeof *moves);
    memcpy(entered, page + STEPS_ENTERED, sizeof *entered);
}

/* "rank 0: TODO 4: assemble y, inside MPI_Allgatherv; rank 1: ...", from
 * the steps files in `dir`. */
static char *describe_steps(const char *dir, int ranks)
{
    size_t cap = 256 + (size_t)ranks * 256, used = 0;
    char *text = malloc(cap);
    ck_assert_msg(text != NULL, "harness: out of memory");
    text[0] = '\0';
    for (int r = 0; r < ranks; r++) {
        char path[PATH_MAX], step[STEPS_FIELD], call[STEPS_FIELD];
        uint64_t moves, entered;
        path_of(path, "%s/rank-%d", dir, r);
        read_steps(path, step, call, sizeof step, &moves, &entered);
        used += (size_t)snprintf(text + used, cap - used, "%srank %d: %s%s%s",
                                 r ? "; " : "", r,
                                 step[0] ? step : "(no step reported)",
                                 call[0] ? ", inside " : "", call);
        if (used >= cap)
            break;
    }
    return text;
}

/* Removes the run's folder (a folder of the scratch folder's) with
 * everything in it, through the harness's own descriptor of the scratch
 * folder (see scratch_folder): the steps files, and anything else, which
 * can only be shared-memory files that the run's ranks failed to remove.
 * Returns how many of those there were (files other than the ranks' steps
 * files, in the folder itself). */
static int remove_folder(const char *dir, int ranks)
{
    const char *name = strrchr(dir, '/') + 1;
    int leftovers = 0;
    int folder = open_folder_below(scratch_folder(), name);
    DIR *listing = folder >= 0 ? fdopendir(folder) : NULL;
    struct dirent *entry;
    while (listing != NULL && (entry = readdir(listing)) != NULL) {
        struct stat info;
        int rank;
        char end;
        if (strcmp(entry->d_name, ".") == 0 ||
            strcmp(entry->d_name, "..") == 0 ||
            (sscanf(entry->d_name, "rank-%d%c", &rank, &end) == 1 &&
             rank >= 0 && rank < ranks) ||
            fstatat(dirfd(listing), entry->d_name, &info,
                    AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(info.st_mode))
            continue;
        leftovers++;
    }
    if (listing != NULL)
        closedir(listing);
    else if (folder >= 0)
        close(folder);
    remove_tree_at(scratch_folder(), name);
    return leftovers;
}

/* Open MPI's shared-memory segments in /dev/shm, where they go unless a
 * run says otherwise. */
static bool is_mpi_segment(const char *name)
{
    return strncmp(name, "vader_segment.", 14) == 0 ||
           strncmp(name, "sm_segment.", 11) == 0;
}

size_t harness_mpi_segments(char ***names)
{
    DIR *shm = opendir("/dev/shm");
    struct dirent *entry;
    size_t count = 0, cap = 16;
    *names = malloc(cap * sizeof **names);
    ck_assert_msg(*names != NULL, "harness: out of memory");
    if (shm == NULL)
        return 0;
    while ((entry = readdir(shm)) != NULL) {
        if (!is_mpi_segment(entry->d_name))
            continue;
        if (count == cap) {
            cap *= 2;
            *names = realloc(*names, cap * sizeof **names);
            ck_assert_msg(*names != NULL, "harness: out of memory");
        }
        (*names)[count++] = strdup(entry->d_name);
    }
    closedir(shm);
    return count;
}

/* Whether /dev/shm/NAME belongs to a job still running: a file of another
 * user, or one that some process still maps. A run's leftover is neither:
 * its owner's processes are gone. Another job on the same machine (a
 * second make test, a student's mpirun) makes and removes such files all
 * the time, and must not be taken for ours. */
bool harness_segment_in_use(const char *name)
{
    char path[HARNESS_PATH];
    snprintf(path, sizeof path, "/dev/shm/%s", name);
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    if (st.st_uid != geteuid())
        return true;
    DIR *proc = opendir("/proc");
    if (proc == NULL)
        return false;
    bool mapped = false;
    struct dirent *entry;
    while (!mapped && (entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        char maps[HARNESS_PATH], line[HARNESS_PATH + 256];
        snprintf(maps, sizeof maps, "/proc/%s/maps", entry->d_name);
        FILE *in = fopen(maps, "r");
        if (in == NULL)
            continue;
        while (!mapped && fgets(line, sizeof line, in) != NULL)
            mapped = strstr(line, path) != NULL;
        fclose(in);
    }
    closedir(proc);
    return mapped;
}

void harness_free_names(char **names, size_t count)
{
    for (size_t k = 0; k < count; k++)
        free(names[k]);
    free(names);
}

/* Appends `word` to `list`, an array of `size` entries that ends with a
 * NULL: more words than it has room for fail the test (`what` says whose),
 * never go missing. */
static void append_word(char **list, size_t *count, size_t size, char *word,
                        const char *what)
{
    ck_assert_msg(*count + 1 < size, "harness: %s has more than %zu words",
                  what, size - 1);
    list[(*count)++] = word;
}

run_result harness_run_mpi(const char *lesson, const char *program, int ranks,
                           char *const args[], char *const env[],
                           double timeout_s)
{
    enum { MAX_WORDS = 64, MAX_ENV = 32 };
    char *argv[MAX_WORDS];
    char ranks_text[16], mpirun_timeout[16];
    size_t count = 0;
    const char *mpirun = getenv("ZZ_MPIRUN");
    const char *command = "the mpirun command (ZZ_MPIRUN and the test's)";

    ck_assert_msg(mpirun != NULL, "harness: ZZ_MPIRUN is not set: run the "
                  "tests through make (make check L=NN)");
    char *launcher = strdup(mpirun);
    ck_assert_msg(launcher != NULL, "harness: out of memory");
    /* ZZ_MPIRUN is a command line such as "env A=1 mpirun --oversubscribe";
     * split it on spaces. */
    for (char *word = strtok(launcher, " "); word; word = strtok(NULL, " "))
        append_word(argv, &count, MAX_WORDS, word, command);
    snprintf(ranks_text, sizeof ranks_text, "%d", ranks);
    append_word(argv, &count, MAX_WORDS, "-np", command);
    append_word(argv, &count, MAX_WORDS, ranks_text, command);
    /* mpirun's own limit comes first, so that it kills its ranks and removes
     * its shared-memory files itself; ours is the backstop. */
    const char *timeout_flag = getenv("ZZ_MPIRUN_TIMEOUT_FLAG");
    if (timeout_flag != NULL && timeout_flag[0] != '\0' && timeout_s > 4) {
        snprintf(mpirun_timeout, sizeof mpirun_timeout, "%d",
                 (int)(timeout_s - 3));
        append_word(argv, &count, MAX_WORDS, (char *)timeout_flag, command);
        append_word(argv, &count, MAX_WORDS, mpirun_timeout, command);
    }
    /* Every rank under the watch (rank_watch.c), which measures it from
     * outside its process into a folder of this run's own. */
    char watch_dir[HARNESS_PATH];
    char watch_program[PATH_MAX];
    bool watched = harness_outside_measures();
    if (watched) {
        make_run_folder(watch_dir, "zz-watch-");
        path_of(watch_program, "%s/tests/rank_watch", getenv("ZZ_BUILD_DIR"));
        append_word(argv, &count, MAX_WORDS, watch_program, command);
        append_word(argv, &count, MAX_WORDS, watch_dir, command);
        append_word(argv, &count, MAX_WORDS, "--", command);
    }
    append_word(argv, &count, MAX_WORDS,
                (char *)harness_program(lesson, program), command);
    for (size_t k = 0; args != NULL && args[k] != NULL; k++)
        append_word(argv, &count, MAX_WORDS, args[k], command);
    argv[count] = NULL;

    char steps_dir[HARNESS_PATH];
    make_run_folder(steps_dir, "zz-steps-");
    char steps_setting[HARNESS_PATH + 32], segments_setting[HARNESS_PATH + 64];
    char session_setting[HARNESS_PATH + 32];
    snprintf(steps_setting, sizeof steps_setting, "ZZ_STEPS_DIR=%s",
             steps_dir);
    /* Open MPI's shared-memory files go into this run's own folder, so
     * that what a killed run leaves behind can be found and removed
     * without touching any other job's. */
    snprintf(segments_setting, sizeof segments_setting,
             "OMPI_MCA_btl_vader_backing_directory=%s", steps_dir);
    /* So does its session folder (it goes under TMPDIR, named by the
     * launcher's process id, which a PID namespace makes the same for
     * every run). */
    snprintf(session_setting, sizeof session_setting, "TMPDIR=%s", steps_dir);

    /* MPI libraries allocate in plugins they unload at exit, which a leak
     * checker cannot tell from a leak; under AddressSanitizer, MPI programs
     * are checked for memory errors but not for leaks. */
    char *mpi_env[MAX_ENV];
    size_t env_count = 0;
    const char *settings = "an MPI run's environment";
    append_word(mpi_env, &env_count, MAX_ENV, "ASAN_OPTIONS=detect_leaks=0:"
                "allocator_may_return_null=1", settings);
    append_word(mpi_env, &env_count, MAX_ENV, steps_setting, settings);
    append_word(mpi_env, &env_count, MAX_ENV, segments_setting, settings);
    append_word(mpi_env, &env_count, MAX_ENV, session_setting, settings);
    /* Under the watch, the ranks talk only through TCP sockets, whose
     * bytes the kernel counts, and enter the run-time boundary
     * (common/boundary.h) before the student's code runs. Open MPI: the
     * TCP transport on the loopback interface (its default leaves the
     * loopback out), and its own protocol layer (ob1), not UCX's; MPICH
     * with UCX: TCP, and no shared memory between ranks of one host. */
    /* MPI's collectives by algorithms that move what the ledger counts,
     * what must cross and no more: allreduce by the ring (Open MPI's
     * algorithm 4) or a reduce-scatter and an allgather (MPICH's), 2(P-1)/P
     * of the data a rank (MPICH's on a power of two ranks; on others in
     * all), where a recursive doubling sends log2(P) times the data;
     * allgatherv by the ring, reduce-scatter by the ring or pairwise (Open
     * MPI's default for small ones reduces to one rank and scatters, MPICH's
     * halving on 3 ranks sends one rank's whole buffer first).
     * The memory a rank holds is measured too, so MPI's own must stay
     * small: Open MPI's TCP transport in fragments of 32 KiB (its 128 KiB
     * ones, a few dozen in flight, held 7-22 MiB more than the ledgers on
     * 4 ranks moving 3.5 million parameters; 32 KiB ones, under 0.3 MiB),
     * and glibc's allocator returning every block of 64 KiB or more when
     * it is freed (its default threshold rises with the blocks freed, and
     * then keeps them). Messages over 4 KiB wait for their receive, as
     * Open MPI's shared memory transport makes them: a blocking send
     * before its receive deadlocks here as it does on a cluster with
     * larger messages (lessons 02 and 05 test that it is not done). */
    static char *const measured_env[] = {
        "ZZ_BOUNDARY=1", "OMPI_MCA_btl=tcp,self",
        "OMPI_MCA_btl_tcp_if_include=lo", "OMPI_MCA_pml=ob1",
        "OMPI_MCA_btl_tcp_max_send_size=32768",
        "OMPI_MCA_btl_tcp_eager_limit=4096",
        "OMPI_MCA_btl_tcp_rndv_eager_limit=4096",
        "MALLOC_MMAP_THRESHOLD_=65536",
        "OMPI_MCA_coll_tuned_use_dynamic_rules=1",
        "OMPI_MCA_coll_tuned_allreduce_algorithm=4",
        "OMPI_MCA_coll_tuned_allgatherv_algorithm=3",
        "OMPI_MCA_coll_tuned_reduce_scatter_algorithm=3",
        "UCX_TLS=tcp,self", "UCX_NET_DEVICES=lo", "MPIR_CVAR_NOLOCAL=1",
        "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=reduce_scatter_allgather",
        "MPIR_CVAR_ALLGATHERV_INTRA_ALGORITHM=ring",
        "MPIR_CVAR_REDUCE_SCATTER_INTRA_ALGORITHM=pairwise",
        NULL,
    };
    /* MPICH's UCX on TCP alone hangs here on 3 ranks and more (hello_mpi
     * on 4, every time): under MPICH the ranks keep UCX's shared memory
     * (no cross-memory attach, which the boundary refuses), the boundary
     * leaves those mappings alone, and what the ranks send is the
     * ledgers' count only (harness_outside_traffic). */
    static char *const mpich_env[] = {
        "ZZ_BOUNDARY=1", "ZZ_BOUNDARY_SHARED=keep",
        "UCX_TLS=sysv,posix,self", "MALLOC_MMAP_THRESHOLD_=65536", NULL,
    };
    char *const *chosen = harness_outside_traffic() ? measured_env
                                                    : mpich_env;
    for (size_t k = 0; watched && chosen[k] != NULL; k++)
        append_word(mpi_env, &env_count, MAX_ENV, chosen[k], settings);
    for (size_t k = 0; env != NULL && env[k] != NULL; k++)
        append_word(mpi_env, &env_count, MAX_ENV, env[k], settings);
    mpi_env[env_count] = NULL;

    enum { MOST_WATCHED = 64 };
    uint64_t moves[MOST_WATCHED] = { 0 }, entered[MOST_WATCHED] = { 0 };
    double moved_at[MOST_WATCHED] = { 0 };
    stall_watch watch = { steps_dir, ranks, moves, entered, moved_at, 0, 0,
                          0, 0, 0 };
    run_result result = run_watched(argv, mpi_env, timeout_s,
                                    ranks <= MOST_WATCHED ? &watch
                                                                : NULL);
    free(launcher);
    /* Open MPI's mpirun ends a run at its --timeout with a non-zero exit
     * and this message. */
    if (strstr(result.err, "time limit for job execution has been reached")
        != NULL)
        result.timed_out = true;
    /* Stopped at a time limit (the harness's or mpirun's) while every
     * rank had been calling MPI without entering a step, for 2 s or more,
     * up to the last look or two: an endless loop of calls. */
    if (result.timed_out && result.stalled_s == 0 &&
        result.looping_s == 0 && watch.calling_s >= 2.0 &&
        watch.ended_at - watch.calling_at <= 1.0)
        result.looping_s = watch.calling_s;
    if (result.timed_out || result.signal != 0 || result.exit_status != 0)
        result.where = describe_steps(steps_dir, ranks);
    /* Status 127 says "could not run" for a command, but a launcher may
     * end with it after a rank crashed (mpirun under the sandbox does): a
     * rank whose steps file exists ran. */
    for (int r = 0; !result.started && r < ranks; r++) {
        char path[PATH_MAX];
        path_of(path, "%s/rank-%d", steps_dir, r);
        result.started = access(path, F_OK) == 0;
    }
    result.leftovers = remove_folder(steps_dir, ranks);
    if (watched) {
        result.watch_dir = strdup(watch_dir);
        ck_assert_msg(result.watch_dir != NULL, "harness: out of memory");
        result.ranks = ranks;
    }
    return result;
}

void harness_remove_out_dir(const char *path)
{
    const char *scratch = harness_scratch();
    size_t length = strlen(scratch);
    const char *name = strrchr(path, '/');
    ck_assert_msg(strncmp(path, scratch, length) == 0 && name != NULL &&
                  name == path + length, "harness: %s is not a folder of the "
                  "scratch folder %s: only those are removed", path, scratch);
    remove_tree_at(scratch_folder(), name + 1);
}

char *harness_read_report(const char *dir, int rank)
{
    char path[PATH_MAX], name[32];
    path_of(path, "%s/rank-%d.txt", dir, rank);
    snprintf(name, sizeof name, "rank-%d.txt", rank);
    FILE *file = open_run_output(dir, name);
    ck_assert_msg(file != NULL, "rank %d wrote no report (%s): did it reach "
                  "the end of the program?", rank, path);
    char *text = slurp(file);
    fclose(file);
    return text;
}

int harness_report_values(const char *report, const char *key,
                          unsigned long long *values, int count)
{
    size_t key_len = strlen(key);
    for (const char *line = report; line != NULL && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, key_len) != 0 || line[key_len] != ' ')
            continue;
        const char *at = line + key_len;
        int got = 0;
        while (got < count) {
            char *end;
            unsigned long long value = strtoull(at, &end, 10);
            if (end == at)
                break;
            values[got++] = value;
            at = end;
        }
        return got;
    }
    return 0;
}

unsigned long long harness_report_value(const char *report, int rank,
                                        const char *key)
{
    unsigned long long value = 0;
    ck_assert_msg(harness_report_values(report, key, &value, 1) == 1,
                  "rank %d's report has no \"%s\" line", rank, key);
    return value;
}

void harness_read_doubles(const char *dir, const char *name, int rank,
                          double *values, size_t count)
{
    char path[PATH_MAX], file_name[PATH_MAX];
    path_of(path, "%s/%s-rank-%d.bin", dir, name, rank);
    path_of(file_name, "%s-rank-%d.bin", name, rank);
    FILE *file = open_run_output(dir, file_name);
    ck_assert_msg(file != NULL, "rank %d wrote no %s (%s)", rank, name, path);
    size_t got = fread(values, sizeof *values, count, file);
    int extra = fgetc(file);
    fclose(file);
    ck_assert_msg(got == count && extra == EOF, "rank %d's %s holds %s %zu "
                  "numbers, expected %zu", rank, name,
                  extra == EOF ? "" : "more than", got, count);
}

/* The "not started: FILE:LINE ..." line a NOT_DONE() printed, if any. */
static const char *not_started_line(const char *err, char *line, size_t len)
{
    const char *at = strstr(err, "not started: ");
    if (at == NULL)
        return NULL;
    size_t n = strcspn(at, "\n");
    snprintf(line, len, "%.*s", (int)(n < len ? n : len - 1), at);
    return line;
}

/* Whether every rank of `where` ("rank 0: STEP, inside MPI_X; rank 1:
 * ...") was inside the same collective call that takes a count: its name
 * into `call`. Ranks that all entered one collective and none left have
 * most often given it a count or datatype that does not match their data
 * (which can also break the heap), not waited for each other. */
static bool all_in_one_collective(const char *where, char *call, size_t len)
{
    static const char *const collectives[] = {
        "Allreduce", "Reduce", "Bcast", "Allgather", "Gather", "Scatter",
        "Alltoall", "Scan", "Exscan",
    };
    int ranks = 0;
    call[0] = '\0';
    for (const char *at = strstr(where, "rank "); at != NULL;
         at = strstr(at + 1, "; rank ")) {
        const char *end = strstr(at + 1, "; rank ");
        const char *inside = strstr(at, "inside MPI_");
        if (inside == NULL || (end != NULL && inside > end))
            return false;
        inside += strlen("inside MPI_");
        size_t n = strspn(inside, "abcdefghijklmnopqrstuvwxyz"
                                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
        if (ranks++ == 0)
            snprintf(call, len, "%.*s", (int)n, inside);
        else if (strlen(call) != n || strncmp(call, inside, n) != 0)
            return false;
    }
    if (ranks < 2)
        return false;
    const char *name = call[0] == 'I' ? call + 1 : call;
    for (size_t k = 0; k < sizeof collectives / sizeof *collectives; k++)
        if (strncmp(name, collectives[k], strlen(collectives[k])) == 0)
            return true;
    return false;
}

/* The program's own first line of error output, for the failure message:
 * not a line of the banners that mpirun draws between dashes, nor a
 * sanitizer's "==PID==" line. */
static void first_own_line(const char *text, char *line, size_t len)
{
    bool in_banner = false;
    line[0] = '\0';
    for (const char *at = text; *at;) {
        size_t n = strcspn(at, "\n");
        if (strncmp(at, "-----", 5) == 0)
            in_banner = !in_banner;
        else if (!in_banner && n > 0 && at[0] != '=' && at[0] != ' ') {
            snprintf(line, len, "%.*s", (int)n, at);
            return;
        }
        at += n + (at[n] == '\n');
    }
}

/* Names an address of a program as the sanitizer would have, had it been
 * able to run its symbolizer (behind the boundary no program may start):
 * addr2line, run here in the judge on the program's file, gives "in
 * FUNCTION FILE:LINE" into `frame`, for a line of a lesson's file (not the
 * shared library's or the system's). False where it gives none. The path
 * comes from the report, which the program wrote: it must be a plain
 * absolute path, and addr2line gets it as an argument, never through a
 * shell. */
static bool symbolize(const char *path, unsigned long long offset,
                      char *frame, size_t frame_len)
{
    if (path[0] != '/')
        return false;
    for (const char *c = path; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9') || strchr("/._+-", *c) != NULL))
            return false;
    int out[2];
    if (pipe(out) != 0)
        return false;
    char address[32];
    snprintf(address, sizeof address, "0x%llx", offset);
    pid_t child = fork();
    if (child < 0) {
        close(out[0]);
        close(out[1]);
        return false;
    }
    if (child == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (dup2(out[1], STDOUT_FILENO) < 0 || null < 0 ||
            dup2(null, STDERR_FILENO) < 0)
            _exit(127);
        execlp("addr2line", "addr2line", "-f", "-e", path, address,
               (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    char text[1024];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof text - 1 &&
           (n = read(out[0], text + got, sizeof text - 1 - got)) > 0)
        got += (size_t)n;
    close(out[0]);
    text[got] = '\0';
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
    }
    char function[256], place[512];
    if (sscanf(text, "%255[^\n]\n%511[^\n]", function, place) != 2 ||
        strcmp(function, "??") == 0 || strstr(place, ".c:") == NULL ||
        strstr(place, "/common/") != NULL || strstr(place, "/usr/") != NULL)
        return false;
    char *note = strstr(place, " (discriminator");
    if (note != NULL)
        *note = '\0';
    /* Relative to the checkout, where the tests run, as the sanitizers'
     * own lines are. */
    char here[PATH_MAX];
    const char *shown = place;
    size_t here_length = getcwd(here, sizeof here) ? strlen(here) : 0;
    if (here_length > 1 && strncmp(place, here, here_length) == 0 &&
        place[here_length] == '/')
        shown = place + here_length + 1;
    /* clang names a parallel region's body after the region, not the
     * function it lies in: the line says which. */
    int written = snprintf(frame, frame_len, "in %s %s",
                           strncmp(function, ".omp_outlined", 13) == 0
                               ? "an OpenMP parallel region at"
                               : function, shown);
    return written > 0;
}

/* The path and offset of a frame the sanitizer left unnamed:
 * "    #3 0x55d0c1a3b7fa (/abs/path/openmp+0xc87fa)". */
static bool unnamed_frame(const char *line, size_t n, const char *lesson,
                          char *path, size_t path_len,
                          unsigned long long *offset)
{
    const char *open_paren = memchr(line, '(', n);
    if (open_paren == NULL)
        return false;
    size_t rest = n - (size_t)(open_paren + 1 - line);
    const char *plus = NULL;
    for (size_t k = 0; k < rest; k++)
        if (open_paren[1 + k] == '+')
            plus = open_paren + 1 + k;
    if (plus == NULL || (size_t)(plus - open_paren - 1) >= path_len)
        return false;
    char *end = NULL;
    *offset = strtoull(plus + 1, &end, 16);
    if (end == plus + 1 || *end != ')')
        return false;
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%.*s", (int)(plus - open_paren - 1),
             open_paren + 1);
    if (strstr(name, ".so") != NULL)
        return false;
    /* ThreadSanitizer gives the file's name alone: the lesson's program. */
    const char *build = getenv("ZZ_BUILD_DIR");
    int written = -1;
    if (name[0] == '/')
        written = snprintf(path, path_len, "%s", name);
    else if (build != NULL && lesson[0] != '\0' &&
             strchr(name, '/') == NULL)
        written = snprintf(path, path_len, "%s/%s/%s", build, lesson, name);
    return written > 0 && (size_t)written < path_len;
}

/* The first frame of a lesson's file in the stack that starts at `at`:
 * named by the sanitizer, or, where it could not name frames, by
 * addr2line (the first twelve unnamed ones: one stack), as "in FUNCTION
 * FILE:LINE" into `frame`. False, and frame "", where there is none. */
static bool first_lesson_frame(const char *at, const char *lesson,
                               char *frame, size_t frame_len)
{
    int unnamed_tried = 0;
    frame[0] = '\0';
    while (*at) {
        size_t m = strcspn(at, "\n");
        const char *in = strstr(at, " in ");
        char path[PATH_MAX];
        unsigned long long offset = 0;
        bool is_frame = at[strspn(at, " ")] == '#';
        if (is_frame && in != NULL && in < at + m &&
            memmem(at, m, "/common/", 8) == NULL &&
            memmem(at, m, "/usr/", 5) == NULL &&
            memmem(at, m, ".c:", 3) != NULL) {
            snprintf(frame, frame_len, "%.*s", (int)(at + m - in - 1),
                     in + 1);
            return true;
        }
        if (is_frame && (in == NULL || in > at + m) && unnamed_tried < 12 &&
            unnamed_frame(at, m, lesson, path, sizeof path, &offset)) {
            unnamed_tried++;
            if (symbolize(path, offset, frame, frame_len))
                return true;
        }
        at += m + (at[m] == '\n');
    }
    return false;
}

/* A sanitizer's report in `err` (the grading's sanitized pass builds the
 * programs with AddressSanitizer and UBSan, or ThreadSanitizer): its tool,
 * its first line from the kind of error on ("heap-buffer-overflow on
 * address ...", "signed integer overflow: ...", "data race"), and the
 * first frame of its stack in a lesson's file, not the shared library's
 * or the system's ("in fast_matvec .../matvec.c:42"). NULL when there is
 * none. */
static const char *sanitizer_report(const char *err, const char *lesson,
                                    char *line, size_t len, char *frame,
                                    size_t frame_len)
{
    static const struct { const char *mark, *tool; } kinds[] = {
        { "ERROR: AddressSanitizer: ", "AddressSanitizer" },
        { "WARNING: ThreadSanitizer: ", "ThreadSanitizer" },
        { ": runtime error: ", "UndefinedBehaviorSanitizer" },
    };
    const char *found = NULL, *tool = NULL;
    size_t mark_length = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const char *at = k == 1 ? first_own_race(err)
                                : strstr(err, kinds[k].mark);
        if (at != NULL && (found == NULL || at < found)) {
            found = at;
            tool = kinds[k].tool;
            mark_length = strlen(kinds[k].mark);
        }
    }
    if (found == NULL)
        return NULL;
    /* UBSan's line starts with its place: "FILE:LINE:COL: runtime error";
     * the others' with the kind of error, up to the registers' values
     * (" at pc 0x..."), which say nothing to a student. */
    const char *start = found + mark_length;
    if (strcmp(tool, "UndefinedBehaviorSanitizer") == 0)
        for (start = found; start > err && start[-1] != '\n';)
            start--;
    size_t n = strcspn(start, "\n");
    /* ThreadSanitizer's " (pid=N)" is a number in the run's namespace. */
    const char *registers = strstr(start, " at pc 0x");
    if (registers == NULL)
        registers = strstr(start, " (pid=");
    if (registers != NULL && (size_t)(registers - start) < n)
        n = (size_t)(registers - start);
    snprintf(line, len, "%s: %.*s", tool, (int)(n < 200 ? n : 200), start);
    first_lesson_frame(found + n, lesson, frame, frame_len);
    /* A race has two places: the other thread's access, its "Previous
     * write" or "Previous read", comes second. */
    const char *previous = strstr(found, "\n  Previous ");
    const char *next_report = strstr(found + 1, "WARNING: ThreadSanitizer: ");
    char other[256];
    if (frame[0] != '\0' && previous != NULL &&
        (next_report == NULL || previous < next_report) &&
        first_lesson_frame(previous + 1, lesson, other, sizeof other) &&
        strcmp(other, frame) != 0) {
        char both[640];
        snprintf(both, sizeof both, "%.255s, and %.255s on another thread",
                 frame, other);
        if (strlen(both) < frame_len)
            memcpy(frame, both, strlen(both) + 1);
    }
    return line;
}

/* The first line of `err` that shows a corrupted heap: glibc's own words
 * when it finds its bookkeeping overwritten (a write past the end or
 * before the start of a block, or a block freed twice); a sanitizer's
 * report is sanitizer_report's. NULL when there is none. */
static const char *heap_corruption_line(const char *err, char *line,
                                        size_t len)
{
    static const char *const starts[] = {
        "double free or corruption", "free(): ", "malloc(): ", "realloc(): ",
        "corrupted size vs. prev_size", "corrupted double-linked list",
        "malloc_consolidate(): ", "munmap_chunk(): ", "_int_malloc(): ",
        "_int_free(): ",
    };
    for (const char *at = err; *at;) {
        size_t n = strcspn(at, "\n");
        bool found = false;
        for (size_t k = 0; !found && k < sizeof starts / sizeof starts[0];
             k++)
            found = strncmp(at, starts[k], strlen(starts[k])) == 0;
        if (found) {
            snprintf(line, len, "%.*s", (int)(n < len ? n : len - 1), at);
            return line;
        }
        at += n + (at[n] == '\n');
    }
    return NULL;
}

/* mpirun's line about a rank that a signal ended ("mpirun noticed that
 * process rank 1 with PID 0 on node vm exited on signal 11 (Segmentation
 * fault)."): the rank, the signal and its name. False when there is none. */
static bool crashed_rank(const char *err, int *rank, int *signal_number,
                         char *name, size_t len)
{
    const char *at = strstr(err, "mpirun noticed that process rank ");
    if (at == NULL ||
        sscanf(at, "mpirun noticed that process rank %d", rank) != 1)
        return false;
    const char *on = strstr(at, " exited on signal ");
    if (on == NULL || on - at > 200 ||
        sscanf(on, " exited on signal %d", signal_number) != 1)
        return false;
    const char *open = strchr(on, '('), *close = open ? strchr(open, ')')
                                                      : NULL;
    if (open != NULL && close != NULL && close - on < 80)
        snprintf(name, len, "%.*s", (int)(close - open - 1), open + 1);
    else
        snprintf(name, len, "%s", strsignal(*signal_number));
    return true;
}

/* Rank `rank`'s part of a `where` text ("rank 1: TODO 4: assemble_y,
 * inside MPI_Allgatherv"), without the rank; empty when it has none. */
static void step_of_rank(const char *where, int rank, char *step, size_t len)
{
    char key[32];
    step[0] = '\0';
    if (where == NULL)
        return;
    snprintf(key, sizeof key, "rank %d: ", rank);
    for (const char *at = strstr(where, key); at != NULL;
         at = strstr(at + 1, key)) {
        if (at != where && strncmp(at - 2, "; ", 2) != 0)
            continue;
        at += strlen(key);
        const char *end = strstr(at, "; rank ");
        size_t n = end != NULL ? (size_t)(end - at) : strlen(at);
        snprintf(step, len, "%.*s", (int)(n < len ? n : len - 1), at);
        return;
    }
}

/* What an MPI error in the output means, for errors whose own words do
 * not say what to look for; "" for any other. */
static const char *mpi_error_meaning(const char *err)
{
    if (strstr(err, "MPI_ERR_TRUNCATE") != NULL)
        return ". MPI_ERR_TRUNCATE: a message arrived that was longer than "
               "the receive posted for it, so the sender and the receiver "
               "disagree on how many elements that message holds (which "
               "block or chunk is sent at that step, or how long it is)";
    if (strstr(err, "MPI_ERR_RANK") != NULL)
        return ". MPI_ERR_RANK: a rank outside the communicator was named "
               "(a rank number from another communicator, or one not "
               "wrapped around with % size)";
    return "";
}

/* harness_run_failure's answer: the message, and true. */
static bool said(char *why, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static bool said(char *why, size_t size, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(why, size, format, args);
    va_end(args);
    return true;
}

bool harness_run_failure(const run_result *result, const char *what,
                         char *why, size_t size, bool *not_started)
{
    char line[1024], heap[256], step[256], name[64];
    *not_started = false;
    if (!result->started)
        return said(why, size, "could not start %s: %s", what, result->err);
    if (not_started_line(result->err, line, sizeof line) != NULL) {
        *not_started = true;
        return said(why, size, "%s", line);
    }
    /* A sanitizer's report first: it names the error where it happened,
     * before any later crash or wrong result it would lead to. */
    char frame[600];
    if ((result->timed_out || result->signal != 0 ||
         result->exit_status != 0) &&
        sanitizer_report(result->err, result->lesson, line, sizeof line,
                         frame, sizeof frame) != NULL)
        return said(why, size,
                    "%s: %s%s%s. The program ran built with the sanitizers, "
                    "which stop it at the first memory error, undefined "
                    "behaviour or data race, even one that leaves the "
                    "results right", what, line, frame[0] ? ", " : "",
                    frame);
    /* A corrupted heap first: a rank that finds its heap corrupted often
     * hangs while reporting it (its signal handler needs the very heap),
     * and that is not a deadlock. */
    const char *corrupted = heap_corruption_line(result->err, heap,
                                                 sizeof heap);
    if (corrupted != NULL && (result->timed_out || result->signal != 0 ||
                              result->exit_status != 0))
        return said(why, size,
                    "%s %s: its heap was corrupted (\"%s\"). That "
                    "happens when code writes past the end (or before the "
                    "start) of memory it allocated, or frees a block "
                    "twice; check every index and count against the size "
                    "allocated.%s%s%s", what,
                    result->timed_out ? "stopped answering, and not from "
                                        "a deadlock"
                                      : "crashed",
                    corrupted,
                    /* An MPI call writes count elements of its datatype:
                     * MPI_DOUBLE for floats writes twice the bytes. */
                    result->where && strstr(result->where, "inside MPI_")
                        ? " A rank was inside an MPI call: its count is in "
                          "elements of its datatype, and the datatype is "
                          "the buffer's (MPI_FLOAT for float: MPI_DOUBLE "
                          "moves 8 bytes an element)."
                        : "",
                    result->where ? " Where each rank was: " : "",
                    result->where ? result->where : "");
    if (result->timed_out && result->looping_s > 0 && result->where != NULL)
        return said(why, size,
                    "no answer from %s in %.0f s: an endless loop of MPI "
                    "calls, not a deadlock (every rank was still making MPI "
                    "calls, and none had left its step for %.0f s: check "
                    "the loop around them, its counter and its end). Where "
                    "each rank was: %s", what, result->seconds,
                    result->looping_s, result->where);
    char collective[64], agreement[400] = "";
    if (result->timed_out && result->where != NULL &&
        all_in_one_collective(result->where, collective, sizeof collective))
        snprintf(agreement, sizeof agreement, " Every rank was inside "
                 "MPI_%s: ranks that all entered one collective and none "
                 "left most often gave it a count or datatype that does not "
                 "match their data (MPI_FLOAT for float; a count in "
                 "elements, not bytes), or different counts or "
                 "communicators on different ranks.", collective);
    if (result->timed_out && result->stalled_s > 0 && result->where != NULL)
        return said(why, size,
                    "no answer from %s in %.0f s: a deadlock (every rank "
                    "waited inside an MPI call for %.0f s, none moving on)."
                    "%s Where each rank was: %s", what, result->seconds,
                    result->stalled_s, agreement, result->where);
    /* No rank inside an MPI call: none waits for another. A rank stuck
     * in given code that only computes is most often one whose heap an
     * earlier write past a buffer broke: glibc's malloc then waits for
     * ever on its own lock. */
    if (result->timed_out && result->where != NULL &&
        strstr(result->where, "inside MPI_") == NULL)
        return said(why, size,
                    "no answer from %s in %.0f s, and not a deadlock: no rank "
                    "was inside an MPI call. A rank that hangs outside MPI, "
                    "in given code, most often had its heap broken by an "
                    "earlier write past the end of a buffer (malloc then "
                    "waits for ever), or loops without end: check every "
                    "buffer's size against what is written into it (make "
                    "grade's AddressSanitizer run names the line of such a "
                    "write). Where each rank was: %s", what, result->seconds,
                    result->where);
    if (result->timed_out && result->where != NULL)
        return said(why, size,
                    "no answer from %s in %.0f s: probably a deadlock (every "
                    "rank waiting for another).%s Where each rank was: %s",
                    what, result->seconds, agreement, result->where);
    if (result->timed_out)
        return said(why, size,
                    "no answer from %s in %.0f s: an endless loop, or a "
                    "deadlock?", what, result->seconds);
    if (result->signal != 0)
        return said(why, size,
                    "%s crashed: %s (signal %d, after %.1f s)", what,
                    strsignal(result->signal), result->signal,
                    result->seconds);
    /* Under mpirun a rank's crash is mpirun's exit status; mpirun names the
     * rank and the signal, and the rank's steps file says where it was. */
    int rank, signal_number;
    if (result->exit_status != 0 &&
        crashed_rank(result->err, &rank, &signal_number, name, sizeof name)) {
        step_of_rank(result->where, rank, step, sizeof step);
        if (strncmp(step, "(no step", 8) == 0)
            step[0] = '\0';
        /* A crash in given code (a step not of a TODO) after the
         * student's code ran is most often that code's earlier write out
         * of bounds, found only when given code uses the memory. */
        const bool in_given = step[0] != '\0' && strstr(step, "TODO") == NULL;
        const bool touched = signal_number == SIGSEGV ||
                             signal_number == SIGBUS;
        return said(why, size,
                    "%s: rank %d crashed: %s (signal %d)%s%s%s%s%s", what,
                    rank, name, signal_number, step[0] ? ", in " : "", step,
                    touched ? ". It touched memory it does not own: an index "
                              "past the end of a buffer, a count larger than "
                              "the buffer (one kept from an earlier, smaller "
                              "call included), or a pointer never set"
                            : "",
                    /* An MPI call reads and writes count elements of its
                     * datatype: MPI_DOUBLE for floats, twice the bytes. */
                    touched && strstr(step, "inside MPI_") != NULL
                        ? ". It was inside an MPI call: its count is in "
                          "elements of its datatype, and the datatype is "
                          "the buffer's (MPI_FLOAT for float: MPI_DOUBLE "
                          "moves 8 bytes an element)"
                        : "",
                    in_given ? ". That step is given code, which runs the "
                               "same for every correct program: most often "
                               "your code wrote out of bounds before it "
                               "(an index below 0 or past the end), and the "
                               "given code met the damage. make grade runs "
                               "the tests under AddressSanitizer, which stops "
                               "at that write and names its line"
                             : "");
    }
    if (result->supervisor_lost)
        return said(why, size,
                    "%s killed the harness's keeper of the run after %.1f s: "
                    "code under test may signal only processes it started "
                    "itself", what, result->seconds);
    if (result->exit_status == 0 && result->strays > 0)
        return said(why, size,
                    "%s ended but left processes running; the harness "
                    "killed them. A program must wait for what it starts.",
                    what);
    if (result->exit_status != 0) {
        first_own_line(result->err, line, sizeof line);
        return said(why, size,
                    "%s failed with exit status %d%s%s%s", what,
                    result->exit_status, line[0] ? ": " : "", line,
                    mpi_error_meaning(result->err));
    }
    return false;
}

void harness_expect_success(const run_result *result, const char *what)
{
    char why[4096];
    bool not_started;
    if (!harness_run_failure(result, what, why, sizeof why, &not_started))
        return;
    if (not_started)
        _ck_assert_failed(__FILE__, __LINE__, "not started", "%s", why);
    ck_abort_msg("%s", why);
}

void harness_write_input(const char *dir, const char *name,
                         const void *values, size_t size, size_t count)
{
    char path[PATH_MAX], file_name[PATH_MAX];
    path_of(path, "%s/%s.bin", dir, name);
    path_of(file_name, "%s.bin", name);
    FILE *file = create_run_input(dir, file_name);
    bool ok = file != NULL &&
              (count == 0 || fwrite(values, size, count, file) == count);
    ck_assert_msg(file != NULL && fclose(file) == 0 && ok, "harness: cannot "
                  "write %s: %s", path, strerror(errno));
}

run_result harness_produce(const char *lesson, const char *case_name,
                           const char *dir, const char *args,
                           char *const env[], double timeout_s)
{
    /* producer CASE DIR, its ARGs (producer.h), and the NULL. */
    char *argv[3 + PRODUCER_MAX_ARGS + 1];
    size_t count = 0;
    argv[count++] = (char *)harness_program(lesson, "producer");
    argv[count++] = (char *)case_name;
    argv[count++] = (char *)dir;
    char *words = strdup(args != NULL ? args : "");
    ck_assert_msg(words != NULL, "harness: out of memory");
    for (char *word = strtok(words, " "); word != NULL;
         word = strtok(NULL, " "))
        append_word(argv, &count, sizeof argv / sizeof argv[0], word,
                    "a producer's command");
    argv[count] = NULL;
    /* The student's code runs behind the boundary, but in the CUDA
     * lessons: the CUDA runtime opens its devices and maps their memory
     * when first used, which the boundary refuses. ZZ_NO_BOUNDARY=1 in
     * the judge's environment leaves it open too: for the attack fixtures
     * that show what stops an attack where there is no boundary
     * (expected-no-boundary.txt, scripts/grade-fixture.sh). */
    enum { MAX_ENV = 32 };
    char *with_boundary[MAX_ENV];
    size_t env_count = 0;
    const char *cuda = getenv("ZZ_CUDA_LESSONS");
    const char *no_boundary = getenv("ZZ_NO_BOUNDARY");
    bool cuda_lesson = cuda != NULL && strstr(cuda, lesson) != NULL;
    if (!cuda_lesson && !(no_boundary != NULL &&
                          strcmp(no_boundary, "1") == 0))
        append_word(with_boundary, &env_count, MAX_ENV, "ZZ_BOUNDARY=1",
                    "a producer's environment");
    for (size_t k = 0; env != NULL && env[k] != NULL; k++)
        append_word(with_boundary, &env_count, MAX_ENV, env[k],
                    "a producer's environment");
    with_boundary[env_count] = NULL;
    run_result result = harness_run(argv, with_boundary, timeout_s);
    free(words);
    return result;
}

void harness_produce_case(const char *lesson, const char *case_name,
                          const char *dir, const char *args,
                          char *const env[], double test_timeout_s,
                          const char *what)
{
    run_result r = harness_produce(lesson, case_name, dir, args, env,
                                   test_timeout_s - 2);
    harness_expect_success(&r, what);
    run_result_free(&r);
}

void harness_read_output(const char *dir, const char *name, void *values,
                         size_t size, size_t count)
{
    char file_name[PATH_MAX];
    path_of(file_name, "%s.bin", name);
    FILE *file = open_run_output(dir, file_name);
    ck_assert_msg(file != NULL, "the program that runs your code wrote no "
                  "%s: it ended before your code returned (exit() in the "
                  "middle of it?)", name);
    size_t got = size > 0 ? fread(values, size, count, file) : 0;
    int extra = fgetc(file);
    fclose(file);
    ck_assert_msg(got == count && extra == EOF, "the producer's %s holds "
                  "%s%zu elements, expected %zu", name,
                  extra == EOF ? "" : "more than ", got, count);
}

int harness_occurrences(const char *text, const char *part)
{
    int count = 0;
    for (const char *at = strstr(text, part); at; at = strstr(at + 1, part))
        count++;
    return count;
}

/* ---- The watch's reports -------------------------------------------------- */

bool harness_outside_measures(void)
{
#ifdef __linux__
    return true;
#else
    return false;
#endif
}

bool harness_outside_traffic(void)
{
    const char *mpi = getenv("ZZ_MPI");
    return harness_outside_measures() &&
           (mpi == NULL || strcmp(mpi, "mpich") != 0);
}

/* Reads "KEY VALUE" pairs of a watch line into an event. */
static void read_event(const char *line, watch_event *e)
{
    sscanf(line, "event %31s anon %llu file %llu shmem %llu peak %llu sent "
           "%llu received %llu launcher_sent %llu launcher_received %llu",
           e->name, &e->anon, &e->file, &e->shmem, &e->peak, &e->sent,
           &e->received, &e->launcher_sent, &e->launcher_received);
}

watch_report harness_read_watch(const run_result *result, int rank)
{
    watch_report w = { 0 };
    if (result->watch_dir == NULL)
        return w;
    char name[48];
    snprintf(name, sizeof name, "watch-rank-%d.txt", rank);
    FILE *file = open_run_output(result->watch_dir, name);
    if (file == NULL)
        return w;
    w.found = true;
    char line[512];
    while (fgets(line, sizeof line, file) != NULL) {
        if (strncmp(line, "boundary ", 9) == 0) {
            w.boundary_seen = sscanf(line, "boundary seccomp %d filters %*d "
                                     "no_new_privs %d capabilities %llx",
                                     &w.seccomp, &w.no_new_privs,
                                     &w.capabilities) == 3;
        } else if (strncmp(line, "event ", 6) == 0) {
            if (w.event_count < WATCH_MOST_EVENTS)
                read_event(line, &w.events[w.event_count]);
            w.event_count++;
            w.socket_count = 0;
        } else if (strncmp(line, "socket ", 7) == 0 &&
                   w.socket_count < WATCH_MOST_SOCKETS) {
            watch_socket *s = &w.sockets[w.socket_count];
            if (sscanf(line, "socket %*s %u %u %llu %llu", &s->local_port,
                       &s->remote_port, &s->sent, &s->received) == 4) {
                s->launcher = strstr(line, " launcher") != NULL;
                w.socket_count++;
            }
        } else if (strncmp(line, "exit ", 5) == 0) {
            w.exited = sscanf(line, "exit %d %d maxrss %llu", &w.exit_status,
                              &w.exit_signal, &w.maxrss) == 3;
        }
    }
    fclose(file);
    return w;
}

/* The mark named `name`, or NULL. */
static const watch_event *event_named(const watch_report *w, const char *name)
{
    int count = w->event_count < WATCH_MOST_EVENTS ? w->event_count
                                                   : WATCH_MOST_EVENTS;
    for (int k = 0; k < count; k++)
        if (strcmp(w->events[k].name, name) == 0)
            return &w->events[k];
    return NULL;
}

void harness_expect_watched(const watch_report *w, int rank, const char *what)
{
    ck_assert_msg(w->found, "%s: the watch wrote nothing for rank %d: the "
                  "rank did not start, or the run was not watched", what,
                  rank);
    ck_assert_msg(w->boundary_seen && w->event_count >= 1 &&
                  strcmp(w->events[0].name, "boundary") == 0,
                  "%s: rank %d never reached the run-time boundary (its "
                  "first mark: %s): the driver stopped before the student's "
                  "code ran", what, rank,
                  w->event_count ? w->events[0].name : "none");
    ck_assert_msg(w->seccomp == 2 && w->no_new_privs == 1 &&
                  w->capabilities == 0, "%s: rank %d's boundary was not "
                  "in place (seccomp %d, no_new_privs %d, capabilities "
                  "%llx): nothing it measured can be trusted", what, rank,
                  w->seccomp, w->no_new_privs, w->capabilities);
    ck_assert_msg(w->event_count == 2 && strcmp(w->events[1].name, "done")
                  == 0, "%s: rank %d made %d marks for the watch (%s%s%s), "
                  "where its driver makes exactly two (boundary, done): "
                  "code other than the driver's wrote to the watch's pipe, "
                  "or the rank ended before its work was done", what, rank,
                  w->event_count, w->events[0].name,
                  w->event_count > 1 ? ", " : "",
                  w->event_count > 1 ? w->events[1].name : "");
    ck_assert_msg(w->exited, "%s: the watch saw rank %d's driver not end",
                  what, rank);
}

unsigned long long watch_bytes_sent(const watch_report *w)
{
    const watch_event *from = event_named(w, "boundary");
    const watch_event *to = event_named(w, "done");
    return from && to && to->sent >= from->sent ? to->sent - from->sent : 0;
}

unsigned long long watch_bytes_received(const watch_report *w)
{
    const watch_event *from = event_named(w, "boundary");
    const watch_event *to = event_named(w, "done");
    return from && to && to->received >= from->received
               ? to->received - from->received
               : 0;
}

unsigned long long watch_memory_growth(const watch_report *w)
{
    const watch_event *from = event_named(w, "boundary");
    const watch_event *to = event_named(w, "done");
    if (from == NULL || to == NULL)
        return 0;
    unsigned long long others = to->file + to->shmem;
    unsigned long long anon_peak = to->peak > others ? to->peak - others : 0;
    return anon_peak > from->anon ? 1024ull * (anon_peak - from->anon) : 0;
}

/* Point-to-point calls: one message each (Sendrecv two). */
static unsigned long long messages_of(const char *call, unsigned long long
                                      calls, int ranks)
{
    static const char *const single[] = {
        "MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend", "MPI_Isend",
        "MPI_Issend", "MPI_Ibsend", "MPI_Irsend", "MPI_Recv", "MPI_Irecv",
    };
    if (strncmp(call, "MPI_Wait", 8) == 0 || strncmp(call, "MPI_Test", 8) == 0
        || strcmp(call, "MPI_Request_free") == 0)
        return 0;
    for (size_t k = 0; k < sizeof single / sizeof *single; k++)
        if (strcmp(call, single[k]) == 0)
            return calls;
    if (strncmp(call, "MPI_Sendrecv", 12) == 0 ||
        strncmp(call, "MPI_Isendrecv", 13) == 0)
        return 2 * calls;
    /* A collective: a message to and from each other rank, twice over
     * for the two-phase ones (allreduce, reduce-scatter). */
    return 2 * calls * (unsigned long long)(ranks > 1 ? ranks - 1 : 0);
}

ledger_traffic harness_ledger_traffic(const char *report, int ranks)
{
    ledger_traffic t = { 0 };
    for (const char *line = report; line != NULL && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        char call[64];
        unsigned long long calls, sent, received;
        if (sscanf(line, "comm %63s %llu %llu %llu", call, &calls, &sent,
                   &received) != 4)
            continue;
        t.sent += sent;
        t.received += received;
        t.messages += messages_of(call, calls, ranks);
    }
    return t;
}

unsigned long long harness_wire_overhead(unsigned long long bytes,
                                         unsigned long long messages)
{
    return 1024 + 160 * messages + bytes / 512;
}

/* The bytes to and from the process manager between the marks. */
static unsigned long long launcher_bytes(const watch_report *w)
{
    const watch_event *from = event_named(w, "boundary");
    const watch_event *to = event_named(w, "done");
    if (from == NULL || to == NULL)
        return 0;
    return (to->launcher_sent - from->launcher_sent) +
           (to->launcher_received - from->launcher_received);
}

/* One direction's check: the wire carried `wire`, the ledger counted
 * `counted` in `messages` messages. */
static void expect_wire(const watch_report *w, int rank, const char *verb,
                        unsigned long long wire, unsigned long long counted,
                        unsigned long long messages, const char *what,
                        const char *hint)
{
    if (!harness_outside_traffic())
        return;
    harness_expect_watched(w, rank, what);
    const unsigned long long extra = harness_wire_overhead(counted, messages);
    ck_assert_msg(wire + 64 >= counted, "%s: rank %d's MPI calls count %llu "
                  "bytes %s, but its sockets %s only %llu (measured by the "
                  "kernel, outside the rank's process): bytes counted that "
                  "never crossed to another rank (a message to itself?), or "
                  "a ledger written over. Hint: %s", what, rank, counted,
                  verb, verb, wire, hint);
    ck_assert_msg(wire <= counted + extra, "%s: rank %d's sockets %s %llu "
                  "bytes (measured by the kernel, outside the rank's "
                  "process), but its MPI calls count only %llu, and the "
                  "wire's headers take at most %llu more: data moved "
                  "between ranks past the MPI calls the lesson counts. Hint: "
                  "%s", what, rank, verb, wire, counted, extra, hint);
    const unsigned long long manager = launcher_bytes(w);
    ck_assert_msg(manager <= 4096, "%s: rank %d exchanged %llu bytes with "
                  "the MPI process manager while the lesson's code ran: data "
                  "sent past MPI's communication calls. Hint: %s", what,
                  rank, manager, hint);
}

void harness_expect_received(const watch_report *w, int rank,
                             const ledger_traffic *counted, const char *what,
                             const char *hint)
{
    expect_wire(w, rank, "received", watch_bytes_received(w),
                counted->received, counted->messages, what, hint);
}

void harness_expect_sent(const watch_report *w, int rank,
                         const ledger_traffic *counted, const char *what,
                         const char *hint)
{
    expect_wire(w, rank, "sent", watch_bytes_sent(w), counted->sent,
                counted->messages, what, hint);
}

void harness_expect_memory(const watch_report *w, int rank,
                           unsigned long long allowed, const char *what,
                           const char *hint)
{
    if (!w->found && !harness_outside_measures())
        return;
    harness_expect_watched(w, rank, what);
    const unsigned long long growth = watch_memory_growth(w);
    ck_assert_msg(growth <= allowed + HARNESS_MEMORY_SLACK, "%s: rank %d's "
                  "memory rose by %llu bytes while the lesson's code ran "
                  "(the kernel's count of the pages it touched, measured "
                  "outside its process: heap, stack and static arrays "
                  "alike), where what it may hold comes to %llu and the "
                  "libraries' own buffers to at most %d more. Hint: %s",
                  what, rank, growth, allowed, HARNESS_MEMORY_SLACK, hint);
}

unsigned long long harness_watch_anon_at_done(const watch_report *w,
                                              int rank, const char *what)
{
    for (int k = 0; k < w->event_count && k < WATCH_MOST_EVENTS; k++)
        if (strcmp(w->events[k].name, "done") == 0)
            return w->events[k].anon;
    ck_assert_msg(0, "%s: the watch saw no \"done\" mark on rank %d", what,
                  rank);
    return 0;
}

void harness_watch_peer_bytes(const run_result *result, int ranks,
                              unsigned long long *bytes)
{
    watch_report *all = calloc((size_t)ranks, sizeof *all);
    ck_assert_msg(all != NULL, "harness: out of memory");
    memset(bytes, 0, (size_t)ranks * (size_t)ranks * sizeof *bytes);
    for (int r = 0; r < ranks; r++)
        all[r] = harness_read_watch(result, r);
    for (int a = 0; a < ranks; a++)
        for (int k = 0; k < all[a].socket_count; k++) {
            const watch_socket *s = &all[a].sockets[k];
            if (s->launcher)
                continue;
            for (int b = 0; b < ranks; b++)
                for (int m = 0; b != a && m < all[b].socket_count; m++)
                    if (all[b].sockets[m].local_port == s->remote_port &&
                        all[b].sockets[m].remote_port == s->local_port)
                        bytes[a * ranks + b] += s->sent;
        }
    free(all);
}

void harness_expect_traffic_totals(const run_result *result, int ranks,
                                   const ledger_traffic *counted,
                                   const char *what, const char *hint)
{
    if (!harness_outside_traffic())
        return;
    unsigned long long sent = 0, received = 0, wire_sent = 0,
                       wire_received = 0, messages = 0, manager = 0;
    for (int rank = 0; rank < ranks; rank++) {
        watch_report w = harness_read_watch(result, rank);
        harness_expect_watched(&w, rank, what);
        wire_sent += watch_bytes_sent(&w);
        wire_received += watch_bytes_received(&w);
        manager += launcher_bytes(&w);
        sent += counted[rank].sent;
        received += counted[rank].received;
        messages += counted[rank].messages;
    }
    const unsigned long long extra = harness_wire_overhead(sent, messages) *
                                     (unsigned long long)ranks;
    ck_assert_msg(wire_sent + 64ull * (unsigned long long)ranks >= sent,
                  "%s: the ranks' MPI calls count %llu bytes sent in all, "
                  "but their sockets sent only %llu (measured by the kernel, "
                  "outside the ranks' processes): bytes counted that never "
                  "crossed to another rank (a message to itself?), or a "
                  "ledger written over. Hint: %s", what, sent, wire_sent,
                  hint);
    ck_assert_msg(wire_sent <= sent + extra && wire_received <=
                  received + extra, "%s: the ranks' sockets sent %llu bytes "
                  "in all and received %llu (measured by the kernel, "
                  "outside the ranks' processes), but their MPI calls count "
                  "only %llu and %llu, and the wire's headers take at most "
                  "%llu more: data moved between ranks past the MPI calls "
                  "the lesson counts. Hint: %s", what, wire_sent,
                  wire_received, sent, received, extra, hint);
    ck_assert_msg(manager <= 4096ull * (unsigned long long)ranks, "%s: the "
                  "ranks exchanged %llu bytes with the MPI process manager "
                  "while the lesson's code ran: data sent past MPI's "
                  "communication calls. Hint: %s", what, manager, hint);
}
