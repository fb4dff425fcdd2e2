/* The run-time boundary (common/boundary.h): what a process may still do
 * once it has entered it, tried one thing at a time by
 * tests/common/boundary_probe.c in a process of its own, and judged here
 * from the lines it wrote. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* What each try of the probe must come to. `needs`: what the kernel must
 * have for the boundary to stop it ("landlock", "tcp rules"); on a kernel
 * without, the try is not judged (and the status line says so). */
static const struct {
    const char *name;
    bool allowed;
    const char *needs;
} expected[] = {
    { "write-own-report", true, NULL },
    { "write-other-file", false, "landlock" },
    { "read-other-file", false, "landlock" },
    { "create-file", false, "landlock" },
    { "read-system-file", true, NULL },
    { "read-proc-parent", false, "landlock" },
    { "read-own-task", true, NULL },
    { "fork", false, NULL },
    { "exec", false, NULL },
    { "thread", true, NULL },
    { "signal-parent", false, NULL },
    { "signal-self", true, NULL },
    { "ptrace-parent", false, NULL },
    { "read-parent-memory", false, NULL },
    { "memfd", false, NULL },
    { "io-uring", false, NULL },
    { "udp-socket", false, NULL },
    { "unix-socket", false, NULL },
    { "tcp-socket", true, NULL },
    { "tcp-connect", false, NULL },
    { "shared-mapping-kept", false, NULL },
    { "mprotect-guarded", false, NULL },
    { "mprotect-across-start", false, NULL },
    { "mprotect-across-end", false, NULL },
    { "mprotect-covering", false, NULL },
    { "mprotect-below", true, NULL },
    { "mprotect-above", true, NULL },
    { "munmap-guarded", false, NULL },
    { "madvise-guarded", false, NULL },
    { "mmap-fixed-over", false, NULL },
    { "mprotect-through-the-gate", true, NULL },
};

START_TEST(boundary_refuses_what_it_must)
{
    if (!harness_outside_measures())
        HARNESS_SKIP("the boundary needs Linux (seccomp and Landlock)");
    char dir[HARNESS_PATH], setting[HARNESS_PATH + 16];
    harness_out_dir(dir);
    char *argv[] = { (char *)harness_program("tests/common",
                                             "boundary_probe"),
                     dir, NULL };
    snprintf(setting, sizeof setting, "ZZ_BOUNDARY=1");
    char *env[] = { setting, NULL };
    run_result r = harness_run(argv, env, 20);
    harness_expect_success(&r, "boundary_probe");
    int seccomp = 0, landlock = 0;
    const char *status = strstr(r.out, "boundary seccomp ");
    ck_assert_msg(status != NULL && sscanf(status, "boundary seccomp %d "
                  "landlock %d", &seccomp, &landlock) == 2, "the probe wrote "
                  "no boundary line:\n%s", r.out);
    ck_assert_msg(seccomp == 1, "the system-call filter was not installed "
                  "(%s)", status);
    for (size_t k = 0; k < sizeof expected / sizeof *expected; k++) {
        if (expected[k].needs != NULL && landlock == 0)
            continue;
        char key[96];
        snprintf(key, sizeof key, "\n%s ", expected[k].name);
        const char *line = strstr(r.out, key);
        ck_assert_msg(line != NULL, "the probe wrote nothing for %s (did it "
                      "end there?):\n%s", expected[k].name, r.out);
        line += strlen(key);
        bool allowed = strncmp(line, "allowed", 7) == 0;
        ck_assert_msg(allowed == expected[k].allowed, "behind the boundary, "
                      "%s was %.*s; it must be %s", expected[k].name,
                      (int)strcspn(line, "\n"), line,
                      expected[k].allowed ? "allowed" : "refused");
    }
    run_result_free(&r);
    harness_remove_out_dir(dir);
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("boundary");
    harness_add(suite, "boundary: files, processes, signals, sockets, "
                "shared memory and the guarded range, each as it must be",
                boundary_refuses_what_it_must, 0, 30);
    return suite;
}
