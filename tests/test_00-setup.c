/* Lesson 00's tests: the hello programs, run as a person would run them,
 * for several rank and thread counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* `out` must be exactly `count` lines, line k starting with the text that
 * `expect` builds for k. */
static void expect_lines(const char *out, int count,
                         void (*expect)(char *buf, size_t len, int k, int count),
                         const char *what, const char *hint)
{
    const char *line = out;
    for (int k = 0; k < count; k++) {
        char wanted[128];
        expect(wanted, sizeof wanted, k, count);
        size_t len = strcspn(line, "\n");
        ck_assert_msg(line[0] != '\0', "%s: expected %d lines, got %d. "
                      "Hint: %s", what, count, k, hint);
        ck_assert_msg(strncmp(line, wanted, strlen(wanted)) == 0,
                      "%s: line %d should start \"%s\", got \"%.*s\". Hint: %s",
                      what, k + 1, wanted, (int)len, line, hint);
        line += len + (line[len] == '\n');
    }
    ck_assert_msg(line[0] == '\0', "%s: more than %d lines; the extra one is "
                  "\"%.*s\". Hint: %s", what, count, (int)strcspn(line, "\n"),
                  line, hint);
}

static void rank_line(char *buf, size_t len, int k, int count)
{
    snprintf(buf, len, "hello from rank %d of %d on ", k, count);
}

static void thread_line(char *buf, size_t len, int k, int count)
{
    snprintf(buf, len, "hello from thread %d of %d", k, count);
}

/* Ranks 1..4, one test each. */
START_TEST(hello_mpi_ranks)
{
    int ranks = _i;
    char what[64];
    snprintf(what, sizeof what, "hello_mpi on %d rank%s", ranks,
             ranks == 1 ? "" : "s");
    run_result result = harness_run_mpi("00-setup", "hello_mpi", ranks, NULL,
                                        NULL, 30);
    harness_expect_success(&result, what);
    expect_lines(result.out, ranks, rank_line, what,
                 "TODO 2: rank 0 alone prints, after gathering every rank's "
                 "greeting, in rank order");
    run_result_free(&result);
}
END_TEST

START_TEST(hello_omp_threads)
{
    int threads = _i;
    char what[64], setting[32];
    snprintf(what, sizeof what, "hello_omp with OMP_NUM_THREADS=%d", threads);
    snprintf(setting, sizeof setting, "OMP_NUM_THREADS=%d", threads);
    char *env[] = { setting, NULL };
    char *argv[] = { (char *)harness_program("00-setup", "hello_omp"), NULL };
    run_result result = harness_run(argv, env, 20);
    harness_expect_success(&result, what);
    expect_lines(result.out, threads, thread_line, what,
                 "TODO 1 records one greeting per thread of the team; TODO 2 "
                 "prints them in thread order after the parallel region");
    run_result_free(&result);
}
END_TEST

Suite *lesson_suite(void)
{
    /* hello_mpi on 1..4 ranks, then hello_omp on 1..4 threads. */
    static char names[4 + 4][64];
    Suite *suite = suite_create("00-setup");
    for (int ranks = 1; ranks <= 4; ranks++) {
        snprintf(names[ranks - 1], sizeof names[0], "hello_mpi on %d rank%s",
                 ranks, ranks == 1 ? "" : "s");
        harness_add(suite, names[ranks - 1], hello_mpi_ranks, ranks, 40);
    }
    for (int threads = 1; threads <= 4; threads++) {
        snprintf(names[3 + threads], sizeof names[0],
                 "hello_omp with %d thread%s", threads,
                 threads == 1 ? "" : "s");
        harness_add(suite, names[3 + threads], hello_omp_threads, threads, 30);
    }
    return suite;
}
