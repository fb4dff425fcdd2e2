/* Runs one Check suite and tells a person what happened.
 *
 *   runner --title "01 serial matvec" --mode student   one mark per test
 *   runner ... --mode solution                         the same; all must pass
 *   runner ... --mode skeleton                         all must FAIL: a test
 *          that passes on the untouched skeleton cannot tell an unfinished
 *          submission from a finished one, and is itself a bug
 *   --tally FILE   appends "passed failed skipped" for the closing summary
 *
 * Every test runs in its own forked process with a time limit (Check's fork
 * mode), so a crash or an endless loop fails that test and the rest go on. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef enum { MODE_STUDENT, MODE_SOLUTION, MODE_SKELETON } run_mode;

typedef enum { OUTCOME_PASSED, OUTCOME_FAILED, OUTCOME_NOT_STARTED,
               OUTCOME_SKIPPED } outcome;

static outcome classify(TestResult *result)
{
    const char *message = tr_msg(result);
    if (tr_rtype(result) == CK_PASS)
        return OUTCOME_PASSED;
    if (message != NULL && strncmp(message, "not started", 11) == 0)
        return OUTCOME_NOT_STARTED;
    if (message != NULL && strncmp(message, "skipped", 7) == 0)
        return OUTCOME_SKIPPED;
    return OUTCOME_FAILED;
}

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

static void usage(void)
{
    fprintf(stderr, "usage: runner --title TEXT [--mode student|solution|"
            "skeleton] [--tally FILE]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *title = "tests", *tally_path = NULL;
    run_mode mode = MODE_STUDENT;
    int passed = 0, failed = 0, skipped = 0, not_started = 0;
    int wrongly_passed = 0;

    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--title") == 0 && k + 1 < argc)
            title = argv[++k];
        else if (strcmp(argv[k], "--tally") == 0 && k + 1 < argc)
            tally_path = argv[++k];
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

    SRunner *runner = srunner_create(lesson_suite());
    srunner_set_fork_status(runner, CK_FORK);
    srunner_run_all(runner, CK_SILENT);

    int count = srunner_ntests_run(runner);
    TestResult **results = srunner_results(runner);
    printf("%s%s\n", title, mode == MODE_SKELETON
           ? " (untouched skeleton: every test must fail)" : "");
    for (int k = 0; k < count; k++) {
        TestResult *result = results[k];
        char text[1024];
        outcome what = classify(result);
        explain(result, text, sizeof text);
        if (mode == MODE_SKELETON) {
            /* Here a failure is the expected outcome. */
            if (what == OUTCOME_PASSED) {
                wrongly_passed++;
                printf("  [PASSES ON SKELETON] %s: this test cannot tell an "
                       "unfinished submission from a finished one\n",
                       tr_tcname(result));
            } else if (what == OUTCOME_SKIPPED) {
                skipped++;
            } else {
                passed++;
            }
            continue;
        }
        switch (what) {
        case OUTCOME_PASSED:
            passed++;
            printf("  [pass] %s\n", tr_tcname(result));
            break;
        case OUTCOME_NOT_STARTED:
            not_started++;
            printf("  [todo] %s: %s\n", tr_tcname(result), text);
            break;
        case OUTCOME_SKIPPED:
            skipped++;
            printf("  [skip] %s: %s\n", tr_tcname(result), text);
            break;
        case OUTCOME_FAILED:
            failed++;
            printf("  [FAIL] %s: %s\n", tr_tcname(result), text);
            /* Where the failure was raised matters only when it is the
             * student's code, not the test's own assertion. */
            if (strncmp(tr_lfile(result), "tests/", 6) != 0)
                printf("         at %s:%d\n", tr_lfile(result),
                       tr_lno(result));
            break;
        }
    }
    free(results);

    if (mode == MODE_SKELETON) {
        printf("  %d of %d tests fail on the untouched skeleton%s\n", passed,
               count, wrongly_passed ? "; the tests above do not" : ", as "
               "they must");
        failed = wrongly_passed;
    } else {
        failed += not_started;
        printf("  %d passed, %d failed (%d of them not started)%s\n", passed,
               failed, not_started, skipped ? ", some skipped" : "");
    }
    /* Check's own closing line. */
    if (mode != MODE_SKELETON)
        srunner_print(runner, CK_MINIMAL);
    srunner_free(runner);

    if (tally_path != NULL) {
        FILE *tally = fopen(tally_path, "a");
        if (tally == NULL) {
            perror(tally_path);
            return 1;
        }
        fprintf(tally, "%d %d %d %s\n", passed, failed, skipped, title);
        fclose(tally);
    }
    return failed == 0 ? 0 : 1;
}
