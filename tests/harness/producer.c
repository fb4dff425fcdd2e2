/* The producer side of a lesson's tests: see producer.h. */
#define _GNU_SOURCE /* ptrace's requests */
#include "producer.h"

#include "boundary.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

static const char *folder;
static size_t args[PRODUCER_MAX_ARGS];
static int arg_count;

static _Noreturn void usage(const char *program, const producer_case *cases,
                            size_t count)
{
    fprintf(stderr, "usage: %s CASE DIR [ARG...]; cases:", program);
    for (size_t k = 0; k < count; k++)
        fprintf(stderr, " %s (%d args)", cases[k].name, cases[k].arg_count);
    fputc('\n', stderr);
    exit(2);
}

static void path_of(char path[PATH_MAX], const char *name);

void producer_region(void)
{
    raise(SIGSTOP);
}

/* The most regions, and the most instructions one region may take before
 * the count stops (a loop that never ends would otherwise keep the
 * producer single-stepping until the test's limit). */
enum { MAX_REGIONS = 16 };
#define MAX_STEPS 20000000ull

/* A counted case: the child returns from here and runs the case behind
 * the boundary; the parent single-steps it through its regions, writes
 * their counts and exits with the child's status. */
static void run_counted(void)
{
#if defined(__linux__)
    fflush(NULL);
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "producer: cannot count instructions: fork: %s\n",
                strerror(errno));
        exit(PRODUCER_NOT_COUNTED);
    }
    if (child == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
            fprintf(stderr, "producer: cannot count instructions: ptrace: "
                    "%s\n", strerror(errno));
            _exit(PRODUCER_NOT_COUNTED);
        }
        raise(SIGSTOP);   /* the parent takes over here */
        return;
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status)) {
        fprintf(stderr, "producer: cannot count instructions: the child did "
                "not stop for its tracer\n");
        exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
    }
    (void)ptrace(PTRACE_SETOPTIONS, child, NULL, (void *)PTRACE_O_EXITKILL);
    uint64_t counts[MAX_REGIONS], steps = 0, stops = 0;
    int regions = 0, deliver = 0;
    bool inside = false;
    for (;;) {
        long request = inside ? PTRACE_SINGLESTEP : PTRACE_CONT;
        if (ptrace((enum __ptrace_request)request, child, NULL,
                   (void *)(intptr_t)deliver) != 0) {
            fprintf(stderr, "producer: cannot count instructions: ptrace: "
                    "%s\n", strerror(errno));
            kill(child, SIGKILL);
            exit(PRODUCER_NOT_COUNTED);
        }
        if (waitpid(child, &status, 0) != child)
            exit(1);
        if (WIFEXITED(status) || WIFSIGNALED(status))
            break;
        deliver = 0;
        const int signal_number = WSTOPSIG(status);
        if (signal_number == SIGTRAP && inside) {
            if (++steps < MAX_STEPS)
                continue;
            counts[regions++] = steps;   /* at the cap: the count stops */
            inside = false;
        } else if (signal_number == SIGSTOP) {
            stops++;
            if (inside && regions < MAX_REGIONS)
                counts[regions++] = steps;
            inside = !inside && regions < MAX_REGIONS;
            steps = 0;
        } else {
            deliver = signal_number;   /* the child's own signals */
        }
    }
    /* The child may have left files of these names (links, say): gone
     * first, so that what the judge reads is this process's own. */
    char path[PATH_MAX];
    path_of(path, "instructions");
    (void)remove(path);
    path_of(path, "stops");
    (void)remove(path);
    produce("instructions", counts, sizeof counts[0], (size_t)regions);
    /* Every SIGSTOP the child took: the judge knows how many its regions
     * make, and one more is code that stopped itself to split them. */
    produce("stops", &stops, sizeof stops, 1);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "producer: the counted case died of signal %d\n",
                WTERMSIG(status));
        exit(1);
    }
    exit(WEXITSTATUS(status));
#else
    fprintf(stderr, "producer: cannot count instructions: single-stepping "
            "(ptrace) is used only on Linux\n");
    exit(PRODUCER_NOT_COUNTED);
#endif
}

int producer_main(int argc, char **argv, const producer_case *cases,
                  size_t count)
{
    if (argc < 3 || argc - 3 > PRODUCER_MAX_ARGS)
        usage(argv[0], cases, count);
    folder = argv[2];
    arg_count = argc - 3;
    for (int k = 0; k < arg_count; k++) {
        char *end;
        errno = 0;
        unsigned long long value = strtoull(argv[3 + k], &end, 10);
        if (errno != 0 || end == argv[3 + k] || *end != '\0' ||
            argv[3 + k][0] == '-' || value > SIZE_MAX)
            usage(argv[0], cases, count);
        args[k] = (size_t)value;
    }
    for (size_t k = 0; k < count; k++)
        if (strcmp(cases[k].name, argv[1]) == 0) {
            if (cases[k].arg_count != arg_count)
                usage(argv[0], cases, count);
            if (cases[k].counted)
                run_counted();
            /* The student's code runs behind the boundary (boundary.h):
             * it may read and write its case's folder and nothing else,
             * start threads but no process, signal only itself. */
            char why[512];
            if (boundary_enter(NULL, folder, NULL, why, sizeof why) != 0) {
                fprintf(stderr, "producer: %s\n", why);
                exit(1);
            }
            cases[k].run();
            return 0;
        }
    usage(argv[0], cases, count);
}

size_t producer_arg(int k)
{
    if (k < 0 || k >= arg_count) {
        fprintf(stderr, "producer: no argument %d\n", k);
        exit(2);
    }
    return args[k];
}

void *producer_alloc(size_t count, size_t size, const char *what)
{
    void *memory = calloc(count ? count : 1, size ? size : 1);
    if (memory == NULL) {
        fprintf(stderr, "producer: out of memory for %s (%zu x %zu bytes)\n",
                what, count, size);
        exit(1);
    }
    return memory;
}

/* DIR/NAME.bin into path[PATH_MAX], or exits: never another file. */
static void path_of(char path[PATH_MAX], const char *name)
{
    int length = snprintf(path, PATH_MAX, "%s/%s.bin", folder, name);
    if (length < 0 || length >= PATH_MAX) {
        fprintf(stderr, "producer: %s/%s.bin: path longer than %d "
                "characters\n", folder, name, PATH_MAX - 1);
        exit(2);
    }
}

void *producer_input(const char *name, size_t size, size_t count)
{
    char path[PATH_MAX];
    path_of(path, name);
    void *values = producer_alloc(count, size, name);
    FILE *file = fopen(path, "rb");
    size_t got = file != NULL && count > 0 ? fread(values, size, count, file)
                                           : 0;
    if (file == NULL || got != count || fgetc(file) != EOF) {
        fprintf(stderr, "producer: %s does not hold %zu elements of %zu "
                "bytes\n", path, count, size);
        exit(1);
    }
    fclose(file);
    return values;
}

void produce(const char *name, const void *values, size_t size, size_t count)
{
    char path[PATH_MAX];
    path_of(path, name);
    FILE *file = fopen(path, "wb");
    if (file == NULL || (count > 0 && fwrite(values, size, count, file) !=
                                          count) || fclose(file) != 0) {
        fprintf(stderr, "producer: cannot write %s: %s\n", path,
                strerror(errno));
        exit(1);
    }
}
