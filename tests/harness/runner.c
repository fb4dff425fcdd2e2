/* Runs one Check suite and tells a person what happened.
 *
 *   runner --title "01 serial matvec" --mode student   one mark per test
 *   runner ... --mode solution                         the same; all must pass
 *   runner ... --mode skeleton                         all must FAIL: a test
 *          that passes on the untouched skeleton cannot tell an unfinished
 *          submission from a finished one, and is itself a bug
 *   runner ... --mode fixture --expect FILE
 *          a broken submission (tests/fixtures/): every line of FILE,
 *          "fails: TEST | WORDS" or "passes: TEST", must hold for every
 *          test whose name starts with TEST; WORDS must appear in the
 *          failure message
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

typedef enum { MODE_STUDENT, MODE_SOLUTION, MODE_SKELETON, MODE_FIXTURE } run_mode;

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
            "skeleton|fixture] [--expect FILE] [--tally FILE]\n");
    exit(2);
}

/* Trims spaces at both ends, in place. */
static char *trim(char *text)
{
    while (*text == ' ' || *text == '\t')
        text++;
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\n' ||
                     text[n - 1] == '\r' || text[n - 1] == '\t'))
        text[--n] = '\0';
    return text;
}

/* Checks a fixture's expectations against the results; prints one line per
 * expectation and counts them into *met and *unmet. */
static void check_expectations(const char *path, TestResult **results,
                               int count, int *met, int *unmet)
{
    FILE *file = fopen(path, "r");
    char line[1024];
    if (file == NULL) {
        perror(path);
        (*unmet)++;
        return;
    }
    while (fgets(line, sizeof line, file) != NULL) {
        char *text = trim(line);
        bool must_fail;
        if (strncmp(text, "fails:", 6) == 0)
            must_fail = true;
        else if (strncmp(text, "passes:", 7) == 0)
            must_fail = false;
        else
            continue; /* comments and blank lines */
        char *name = trim(text + (must_fail ? 6 : 7));
        char *words = strchr(name, '|');
        if (words != NULL) {
            *words++ = '\0';
            words = trim(words);
            name = trim(name);
        }
        int matched = 0;
        const char *problem = NULL;
        char detail[1200] = "";
        for (int k = 0; k < count && problem == NULL; k++) {
            if (strncmp(tr_tcname(results[k]), name, strlen(name)) != 0)
                continue;
            matched++;
            bool failed = classify(results[k]) != OUTCOME_PASSED;
            const char *message = tr_msg(results[k]) ? tr_msg(results[k]) : "";
            if (must_fail && !failed)
                problem = "passed, but this broken submission must fail it";
            else if (!must_fail && failed)
                problem = "failed, but it should pass";
            else if (must_fail && words != NULL && words[0] != '\0' &&
                     strstr(message, words) == NULL) {
                problem = "failed without naming the problem";
                snprintf(detail, sizeof detail, "; wanted \"%s\" in: %s",
                         words, message);
            }
            if (problem != NULL && detail[0] == '\0')
                snprintf(detail, sizeof detail, " (%s)", tr_tcname(results[k]));
        }
        if (matched == 0)
            problem = "no test has this name";
        if (problem == NULL) {
            (*met)++;
            printf("  [pass] %s %s%s%s\n", must_fail ? "fails:" : "passes:",
                   name, words ? " | " : "", words ? words : "");
        } else {
            (*unmet)++;
            printf("  [FAIL] %s %s: %s%s\n", must_fail ? "fails:" : "passes:",
                   name, problem, detail);
        }
    }
    fclose(file);
}

int main(int argc, char **argv)
{
    const char *title = "tests", *tally_path = NULL, *expect_path = NULL;
    run_mode mode = MODE_STUDENT;
    int passed = 0, failed = 0, skipped = 0, not_started = 0;
    int wrongly_passed = 0;

    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--title") == 0 && k + 1 < argc)
            title = argv[++k];
        else if (strcmp(argv[k], "--tally") == 0 && k + 1 < argc)
            tally_path = argv[++k];
        else if (strcmp(argv[k], "--expect") == 0 && k + 1 < argc)
            expect_path = argv[++k];
        else if (strcmp(argv[k], "--mode") == 0 && k + 1 < argc) {
            const char *name = argv[++k];
            if (strcmp(name, "student") == 0)
                mode = MODE_STUDENT;
            else if (strcmp(name, "solution") == 0)
                mode = MODE_SOLUTION;
            else if (strcmp(name, "skeleton") == 0)
                mode = MODE_SKELETON;
            else if (strcmp(name, "fixture") == 0)
                mode = MODE_FIXTURE;
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
           ? " (untouched skeleton: every test must fail)"
           : mode == MODE_FIXTURE ? " (a broken submission: the tests must "
             "catch it)" : "");
    if (mode == MODE_FIXTURE) {
        int met = 0, unmet = 0;
        if (expect_path == NULL)
            usage();
        check_expectations(expect_path, results, count, &met, &unmet);
        passed = met;
        failed = unmet;
        count = 0; /* the per-test marks are not the point here */
    }
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

    if (mode == MODE_FIXTURE) {
        printf("  %d of %d expectations hold\n", passed, passed + failed);
    } else if (mode == MODE_SKELETON) {
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
    if (mode == MODE_STUDENT || mode == MODE_SOLUTION)
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
