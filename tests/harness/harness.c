/* What every lesson's Check suite uses. */
#define _XOPEN_SOURCE 700
#include "harness.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "timer.h"

/* Check keeps the names it is given; these live as long as the suite. */
void harness_add(Suite *suite, const char *name, const TTest *test, int index,
                 double timeout_s)
{
    TCase *tcase = tcase_create(name);
    tcase_add_loop_test(tcase, test, index, index + 1);
    tcase_set_timeout(tcase, timeout_s);
    suite_add_tcase(suite, tcase);
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

run_result harness_run(char *const argv[], char *const env[],
                       double timeout_s)
{
    run_result result = { 0 };
    /* Output goes to unnamed temporary files, not pipes: a child that writes
     * a lot can never block on a full pipe while we wait for it. */
    FILE *out = tmpfile(), *err = tmpfile();
    double start = timer_now();
    int status = 0;
    pid_t child;

    ck_assert_msg(out != NULL && err != NULL, "harness: tmpfile: %s",
                  strerror(errno));
    fflush(NULL);
    child = fork();
    ck_assert_msg(child >= 0, "harness: fork: %s", strerror(errno));
    if (child == 0) {
        setpgid(0, 0);
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(err), STDERR_FILENO);
        for (size_t k = 0; env != NULL && env[k] != NULL; k++)
            putenv(env[k]);
        execvp(argv[0], argv);
        fprintf(stderr, "harness: cannot run %s: %s\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    /* Both sides set the group, so no signal can miss it whoever runs
     * first. */
    setpgid(child, child);

    for (;;) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child)
            break;
        if (timer_now() - start > timeout_s) {
            result.timed_out = true;
            kill(-child, SIGTERM);
            sleep_seconds(1.0);
            kill(-child, SIGKILL);
            waitpid(child, &status, 0);
            break;
        }
        sleep_seconds(0.005);
    }
    /* Whatever the group still holds (a rank that ignored SIGTERM, a
     * daemonised grandchild) goes too. */
    kill(-child, SIGKILL);

    result.seconds = timer_now() - start;
    result.started = !(WIFEXITED(status) && WEXITSTATUS(status) == 127);
    if (WIFEXITED(status))
        result.exit_status = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        result.signal = WTERMSIG(status);
    result.out = slurp(out);
    result.err = slurp(err);
    fclose(out);
    fclose(err);
    return result;
}

void run_result_free(run_result *result)
{
    free(result->out);
    free(result->err);
    result->out = result->err = NULL;
}

const char *harness_program(const char *lesson, const char *program)
{
    static char path[4096];
    const char *build = getenv("ZZ_BUILD_DIR");
    ck_assert_msg(build != NULL, "harness: ZZ_BUILD_DIR is not set: run the "
                  "tests through make (make check L=NN)");
    snprintf(path, sizeof path, "%s/%s/%s", build, lesson, program);
    return path;
}

run_result harness_run_mpi(const char *lesson, const char *program, int ranks,
                           char *const args[], char *const env[],
                           double timeout_s)
{
    enum { max_words = 64 };
    char *argv[max_words];
    char launcher[1024], ranks_text[16], mpirun_timeout[16];
    size_t count = 0;
    const char *mpirun = getenv("ZZ_MPIRUN");

    ck_assert_msg(mpirun != NULL, "harness: ZZ_MPIRUN is not set: run the "
                  "tests through make (make check L=NN)");
    snprintf(launcher, sizeof launcher, "%s", mpirun);
    /* ZZ_MPIRUN is a command line such as "env A=1 mpirun --oversubscribe";
     * split it on spaces. */
    for (char *word = strtok(launcher, " "); word && count < max_words - 16;
         word = strtok(NULL, " "))
        argv[count++] = word;
    snprintf(ranks_text, sizeof ranks_text, "%d", ranks);
    argv[count++] = "-np";
    argv[count++] = ranks_text;
    /* mpirun's own limit comes first, so that it kills its ranks and removes
     * its shared-memory files itself; ours is the backstop. */
    const char *timeout_flag = getenv("ZZ_MPIRUN_TIMEOUT_FLAG");
    if (timeout_flag != NULL && timeout_flag[0] != '\0' && timeout_s > 4) {
        snprintf(mpirun_timeout, sizeof mpirun_timeout, "%d",
                 (int)(timeout_s - 3));
        argv[count++] = (char *)timeout_flag;
        argv[count++] = mpirun_timeout;
    }
    argv[count++] = (char *)harness_program(lesson, program);
    for (size_t k = 0; args != NULL && args[k] != NULL && count < max_words - 1;
         k++)
        argv[count++] = args[k];
    argv[count] = NULL;

    /* MPI libraries allocate in plugins they unload at exit, which a leak
     * checker cannot tell from a leak; under AddressSanitizer, MPI programs
     * are checked for memory errors but not for leaks. */
    enum { max_env = 32 };
    char *mpi_env[max_env];
    size_t env_count = 0;
    mpi_env[env_count++] = "ASAN_OPTIONS=detect_leaks=0:"
                           "allocator_may_return_null=1";
    for (size_t k = 0; env != NULL && env[k] != NULL && env_count < max_env - 1;
         k++)
        mpi_env[env_count++] = env[k];
    mpi_env[env_count] = NULL;
    return harness_run(argv, mpi_env, timeout_s);
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

/* The last line of the program's error output, for the failure message. */
static void last_line(const char *text, char *line, size_t len)
{
    size_t n = strlen(text);
    while (n > 0 && text[n - 1] == '\n')
        n--;
    size_t begin = n;
    while (begin > 0 && text[begin - 1] != '\n')
        begin--;
    snprintf(line, len, "%.*s", (int)(n - begin), text + begin);
}

void harness_expect_success(const run_result *result, const char *what)
{
    char line[512];
    if (!result->started)
        ck_abort_msg("could not start %s: %s", what, result->err);
    if (not_started_line(result->err, line, sizeof line) != NULL)
        _ck_assert_failed(__FILE__, __LINE__, "not started", "%s", line);
    if (result->timed_out)
        ck_abort_msg("no answer from %s in %.0f s: an endless loop, or a "
                     "deadlock (every rank waiting for another)?", what,
                     result->seconds);
    if (result->signal != 0)
        ck_abort_msg("%s crashed: %s", what, strsignal(result->signal));
    if (result->exit_status != 0) {
        last_line(result->err, line, sizeof line);
        ck_abort_msg("%s failed with exit status %d%s%s", what,
                     result->exit_status, line[0] ? ": " : "", line);
    }
}
