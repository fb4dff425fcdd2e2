/* The grader's last step: turns each lesson's test results into scores.
 *
 * Reads, for every lesson named with --lessons:
 *   tests/manifest/LESSON.txt   the points of each test (see its header), and
 *                               tests/hidden/manifest/LESSON.txt if present
 *   WORK/LESSON.results         what the runner judged, one line a test:
 *                               "OUTCOME<TAB>NAME<TAB>MESSAGE"
 *   WORK/LESSON.build.log       when the lesson did not build (and so has
 *                               no results): the compiler's words, or the
 *                               "refused: ..." lines of the checks on the
 *                               submission's files (scripts/check-submission.sh)
 *   WORK/LESSON.ended           when the test program did not end by itself:
 *                               how it ended; its tests that have no result
 *                               fail with those words
 * and writes into OUT: results.json (Gradescope's format), junit.xml,
 * results.tap, scores.txt (per lesson, for rosters); on stdout a table and
 * "Score: X/Y". It exits 0 only at full
 * marks.
 *
 * Nothing here reads what student code printed: the runner's verdicts come
 * from Check's records and its own comparisons, and a lesson that did not
 * run scores 0.
 *
 *   grade --lessons "00-setup 01-serial-matvec" --work DIR --out DIR
 *         [--manifests DIR] [--seconds N] [--sources DIR]
 *   (--sources: the folder the submission's files were copied to; messages
 *   name them as lessons/LESSON/FILE, where the student knows them)
 *   grade ... --progress         one line per lesson and TODO, for students
 *   grade --sweep DIR            kills every process whose program lies in
 *                                DIR (absolute): for systems where programs
 *                                cannot run in PID namespaces of their own
 *   grade --lessons L --check-names FILE   every test named in FILE has
 *                                exactly one manifest line, and back
 *   grade ... --expect FILE      checks a broken submission's expected score
 *         [--tally FILE]         and failures (in tests/fixtures): exit 0
 *                                when every expectation holds */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The most tests of all the lessons graded together, and of lessons; a
 * message's room (TEXT), and a line's of the files read here (LINE: a
 * results line is an outcome, a name and a message). More tests or lessons,
 * a longer line, a manifest's value too long for its field or a path too
 * long for PATH_MAX are refused with one line (exit 3), never cut short. */
enum { MAX_TESTS = 2048, MAX_LESSONS = 64, TEXT = 2048, LINE = TEXT + 512 };

typedef enum { PASSED, FAILED, NOT_STARTED, SKIPPED } outcome;

typedef struct {
    char lesson[64];
    char name[256];
    char todo[48];
    double points;
    bool hidden;
    bool excluded_if_skipped;
    bool unchecked;            /* make progress: no results for its lesson yet */
    outcome what;
    char message[TEXT];
    double score, max_score;   /* after scoring */
} test;

static test tests[MAX_TESTS];
static int test_count;

static void fail_usage(const char *why)
{
    fprintf(stderr, "grade: %s\nusage: grade --lessons \"L1 L2 ...\" --work "
            "DIR --out DIR [--manifests DIR] [--seconds N] [--progress] "
            "[--expect FILE [--tally FILE]]\n", why);
    exit(2);
}

/* A path from `format` into path[PATH_MAX]; see the enum above. */
__attribute__((format(printf, 2, 3)))
static void path_or_exit(char path[PATH_MAX], const char *format, ...)
{
    va_list args;
    va_start(args, format);
    int length = vsnprintf(path, PATH_MAX, format, args);
    va_end(args);
    if (length < 0 || length >= PATH_MAX) {
        fprintf(stderr, "grade: a path longer than %d characters: %s...\n",
                PATH_MAX - 1, path);
        exit(3);
    }
}

/* The next line of `file` (read from `path`) into line[LINE], with its
 * newline; false at the end. See the enum above. */
static bool read_line(char line[LINE], FILE *file, const char *path)
{
    if (fgets(line, LINE, file) == NULL)
        return false;
    size_t n = strlen(line);
    if (n > 0 && line[n - 1] != '\n' && getc(file) != EOF) {
        fprintf(stderr, "grade: %s: a line longer than %d characters\n",
                path, LINE - 2);
        exit(3);
    }
    return true;
}

/* `text` into a test's field of `size` bytes; see the enum above. */
static void copy_field(char *field, size_t size, const char *text,
                       const char *path, const char *what)
{
    int length = snprintf(field, size, "%s", text);
    if (length < 0 || (size_t)length >= size) {
        fprintf(stderr, "grade: %s: %s longer than %zu characters: %s\n",
                path, what, size - 1, text);
        exit(3);
    }
}

static char *trim(char *text)
{
    while (*text == ' ' || *text == '\t')
        text++;
    size_t n = strlen(text);
    while (n > 0 && strchr(" \t\r\n", text[n - 1]) != NULL)
        text[--n] = '\0';
    return text;
}

/* Reads one lesson's manifest into tests[]; a missing one is an error
 * unless `optional` (the hidden tests' manifests). */
static void read_manifest(const char *dir, const char *lesson, bool optional)
{
    char path[PATH_MAX], line[LINE];
    path_or_exit(path, "%s/%s.txt", dir, lesson);
    FILE *file = fopen(path, "r");
    if (file == NULL && optional)
        return;
    if (file == NULL) {
        fprintf(stderr, "grade: no manifest %s: every lesson needs one\n",
                path);
        exit(3);
    }
    while (read_line(line, file, path)) {
        char *text = trim(line);
        if (text[0] == '#' || text[0] == '\0')
            continue;
        char *fields[4] = { NULL };
        int count = 0;
        for (char *field = strtok(text, "|"); field && count < 4;
             field = strtok(NULL, "|"))
            fields[count++] = trim(field);
        if (count < 3) {
            fprintf(stderr, "grade: %s: bad line (POINTS | TODO | NAME "
                    "[| OPTIONS]): %s\n", path, text);
            exit(3);
        }
        if (test_count == MAX_TESTS) {
            fprintf(stderr, "grade: %s: more than %d tests in the "
                    "manifests\n", path, MAX_TESTS);
            exit(3);
        }
        test *t = &tests[test_count++];
        memset(t, 0, sizeof *t);
        copy_field(t->lesson, sizeof t->lesson, lesson, path, "the lesson's "
                   "name");
        t->points = atof(fields[0]);
        copy_field(t->todo, sizeof t->todo, fields[1], path, "a TODO");
        copy_field(t->name, sizeof t->name, fields[2], path, "a test's name");
        t->hidden = count == 4 && strstr(fields[3], "hidden") != NULL;
        t->excluded_if_skipped = count == 4 &&
                                 strstr(fields[3], "excluded if skipped");
        t->what = FAILED;
        snprintf(t->message, sizeof t->message, "this test did not run: the "
                 "test program stopped before it (see the lesson's log)");
    }
    fclose(file);
}

static test *find(const char *lesson, const char *name)
{
    for (int k = 0; k < test_count; k++)
        if (strcmp(tests[k].lesson, lesson) == 0 &&
            strcmp(tests[k].name, name) == 0)
            return &tests[k];
    return NULL;
}

/* Why a lesson did not build: the lines that refused the submission's
 * files, or else the compiler's error lines. */
static void read_build_failure(const char *path, char *message, size_t len)
{
    FILE *file = fopen(path, "r");
    char line[LINE]; /* a longer line is read in pieces: it is only shown */
    bool refused = false;
    while (file != NULL && fgets(line, sizeof line, file) != NULL)
        refused = refused || strncmp(line, "refused: ", 9) == 0;
    size_t used = (size_t)snprintf(message, len, refused
        ? "your files were refused, so this lesson scores 0:"
        : "your files do not compile, so this lesson scores 0:");
    int shown = 0;
    if (file != NULL)
        rewind(file);
    while (file != NULL && fgets(line, sizeof line, file) != NULL &&
           shown < 6 && used < len) {
        if (refused ? strncmp(line, "refused: ", 9) != 0
                    : strstr(line, "error") == NULL)
            continue;
        used += (size_t)snprintf(message + used, len - used, " %s",
                                 trim(refused ? line + 9 : line));
        shown++;
    }
    if (file != NULL)
        fclose(file);
    if (shown == 0 && used < len)
        snprintf(message + used, len - used, " (see the build log)");
}

/* Applies a lesson's results (or its build failure) to its tests. */
static void read_results(const char *work, const char *lesson)
{
    char path[PATH_MAX], line[LINE];
    path_or_exit(path, "%s/%s.ended", work, lesson);
    FILE *ended = fopen(path, "r");
    if (ended != NULL) {
        /* The tests that did not get to run, and why. */
        char how[TEXT - 64] = "";
        if (fgets(how, sizeof how, ended) == NULL)
            how[0] = '\0';
        fclose(ended);
        for (int k = 0; k < test_count; k++)
            if (strcmp(tests[k].lesson, lesson) == 0)
                snprintf(tests[k].message, sizeof tests[k].message,
                         "this test did not run: %s", trim(how));
    }
    path_or_exit(path, "%s/%s.results", work, lesson);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        char log[PATH_MAX], message[TEXT];
        path_or_exit(log, "%s/%s.build.log", work, lesson);
        if (access(log, R_OK) != 0) {
            /* Nothing yet: the lesson was never checked or graded. */
            for (int k = 0; k < test_count; k++)
                if (strcmp(tests[k].lesson, lesson) == 0)
                    tests[k].unchecked = true;
        }
        read_build_failure(log, message, sizeof message);
        for (int k = 0; k < test_count; k++)
            if (strcmp(tests[k].lesson, lesson) == 0)
                snprintf(tests[k].message, sizeof tests[k].message, "%s",
                         message);
        return;
    }
    while (read_line(line, file, path)) {
        char *name = strchr(line, '\t');
        char *message = name ? strchr(name + 1, '\t') : NULL;
        if (message == NULL)
            continue;
        *name++ = '\0';
        *message++ = '\0';
        test *t = find(lesson, name);
        if (t == NULL) {
            fprintf(stderr, "grade: test '%s' of lesson %s has no line in its "
                    "manifest\n", name, lesson);
            exit(3);
        }
        t->what = strcmp(line, "pass") == 0   ? PASSED
                  : strcmp(line, "todo") == 0 ? NOT_STARTED
                  : strcmp(line, "skip") == 0 ? SKIPPED
                                              : FAILED;
        snprintf(t->message, sizeof t->message, "%s", trim(message));
    }
    fclose(file);
}

/* Replaces every "SOURCES/" in the messages by "lessons/". */
static void name_sources_as_lessons(const char *sources)
{
    char prefix[PATH_MAX];
    path_or_exit(prefix, "%s/", sources);
    size_t prefix_len = strlen(prefix);
    for (int k = 0; k < test_count; k++) {
        char rewritten[TEXT], *from = tests[k].message;
        size_t used = 0;
        for (char *at; (at = strstr(from, prefix)) != NULL && used < TEXT;
             from = at + prefix_len)
            used += (size_t)snprintf(rewritten + used, TEXT - used,
                                     "%.*slessons/", (int)(at - from), from);
        if (used < TEXT)
            snprintf(rewritten + used, TEXT - used, "%s", from);
        snprintf(tests[k].message, sizeof tests[k].message, "%s", rewritten);
    }
}

static void score_all(double *score, double *max_score)
{
    *score = *max_score = 0;
    for (int k = 0; k < test_count; k++) {
        test *t = &tests[k];
        t->max_score = t->what == SKIPPED && t->excluded_if_skipped
                           ? 0 : t->points;
        t->score = t->what == PASSED ? t->points : 0;
        *score += t->score;
        *max_score += t->max_score;
    }
}

/* ---- writing the formats ---- */

static void json_string(FILE *out, const char *text)
{
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(out, "\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", out);
        else if (*c < 0x20)
            fprintf(out, "\\u%04x", *c);
        else
            fputc(*c, out);
    }
    fputc('"', out);
}

static void xml_text(FILE *out, const char *text)
{
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        switch (*c) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default:
            if (*c >= 0x20 || *c == '\n' || *c == '\t')
                fputc(*c, out);
        }
    }
}

static const char *lesson_number(const char *lesson, char *buf, size_t len)
{
    snprintf(buf, len, "%.2s", lesson);
    return buf;
}

static FILE *open_output(const char *dir, const char *name)
{
    char path[PATH_MAX];
    path_or_exit(path, "%s/%s", dir, name);
    FILE *file = fopen(path, "w");
    if (file == NULL) {
        perror(path);
        exit(3);
    }
    return file;
}

static void write_json(const char *dir, double score, double seconds)
{
    FILE *out = open_output(dir, "results.json");
    fprintf(out, "{\n  \"score\": %g,\n  \"execution_time\": %.0f,\n"
            "  \"tests\": [\n", score, seconds);
    int in_lesson = 0;
    const char *lesson = "";
    for (int k = 0; k < test_count; k++) {
        const test *t = &tests[k];
        char number[32], digits[8];
        in_lesson = strcmp(lesson, t->lesson) == 0 ? in_lesson + 1 : 1;
        lesson = t->lesson;
        snprintf(number, sizeof number, "%s.%d",
                 lesson_number(t->lesson, digits, sizeof digits), in_lesson);
        fprintf(out, "    {\"name\": ");
        char name[sizeof "[skipped] NN: " + sizeof t->name];
        snprintf(name, sizeof name, "%s%s: %s", t->what == SKIPPED
                 ? "[skipped] " : "", digits, t->name);
        json_string(out, name);
        fprintf(out, ", \"number\": \"%s\", \"score\": %g, \"max_score\": %g",
                number, t->score, t->max_score);
        /* Gradescope knows two statuses. A skipped test (CUDA without a
         * GPU) is "passed" where it is left out of the total (0 of 0
         * points, nothing lost) and "failed" where its points count. */
        fprintf(out, ", \"status\": \"%s\"",
                t->what == PASSED ||
                        (t->what == SKIPPED && t->score == t->max_score)
                    ? "passed" : "failed");
        fprintf(out, ", \"output\": ");
        char output[sizeof "skipped: " + TEXT];
        snprintf(output, sizeof output, "%s%s",
                 t->what == SKIPPED &&
                         strncmp(t->message, "skipped:", 8) != 0
                     ? "skipped: " : "", t->message);
        json_string(out, output);
        fprintf(out, ", \"visibility\": \"%s\", \"tags\": [\"lesson %s\", "
                "\"TODO %s\"%s]}%s\n", t->hidden ? "after_due_date" : "visible",
                digits, t->todo, t->what == SKIPPED ? ", \"skipped\"" : "",
                k + 1 < test_count ? "," : "");
    }
    fprintf(out, "  ]\n}\n");
    fclose(out);
}

static void write_junit(const char *dir, double seconds)
{
    FILE *out = open_output(dir, "junit.xml");
    int failures = 0, skipped = 0;
    for (int k = 0; k < test_count; k++) {
        failures += tests[k].what == FAILED || tests[k].what == NOT_STARTED;
        skipped += tests[k].what == SKIPPED;
    }
    fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<testsuites name=\"zero-to-zero\" tests=\"%d\" failures=\"%d\" "
            "skipped=\"%d\" time=\"%.0f\">\n", test_count, failures, skipped,
            seconds);
    for (int k = 0; k < test_count;) {
        const char *lesson = tests[k].lesson;
        int end = k, lesson_failures = 0, lesson_skipped = 0;
        while (end < test_count && strcmp(tests[end].lesson, lesson) == 0) {
            lesson_failures += tests[end].what == FAILED ||
                               tests[end].what == NOT_STARTED;
            lesson_skipped += tests[end].what == SKIPPED;
            end++;
        }
        fprintf(out, "  <testsuite name=\"lesson %s\" tests=\"%d\" "
                "failures=\"%d\" skipped=\"%d\">\n", lesson, end - k,
                lesson_failures, lesson_skipped);
        for (; k < end; k++) {
            const test *t = &tests[k];
            fprintf(out, "    <testcase classname=\"%s\" name=\"", lesson);
            xml_text(out, t->name);
            fprintf(out, "\">");
            if (t->what == FAILED || t->what == NOT_STARTED) {
                fprintf(out, "\n      <failure message=\"");
                xml_text(out, t->message);
                fprintf(out, "\">");
                xml_text(out, t->message);
                fprintf(out, "</failure>\n    ");
            } else if (t->what == SKIPPED) {
                fprintf(out, "\n      <skipped message=\"");
                xml_text(out, t->message);
                fprintf(out, "\"/>\n    ");
            }
            fprintf(out, "</testcase>\n");
        }
        fprintf(out, "  </testsuite>\n");
    }
    fprintf(out, "</testsuites>\n");
    fclose(out);
}

static void write_tap(const char *dir)
{
    FILE *out = open_output(dir, "results.tap");
    fprintf(out, "TAP version 13\n1..%d\n", test_count);
    for (int k = 0; k < test_count; k++) {
        const test *t = &tests[k];
        char digits[8];
        lesson_number(t->lesson, digits, sizeof digits);
        if (t->what == SKIPPED) {
            fprintf(out, "ok %d - %s: %s # SKIP ", k + 1, digits, t->name);
            for (const char *c = t->message; *c; c++)
                fputc(*c == '\n' ? ' ' : *c, out);
            fputc('\n', out);
            continue;
        }
        fprintf(out, "%s %d - %s: %s\n", t->what == PASSED ? "ok" : "not ok",
                k + 1, digits, t->name);
        if (t->what != PASSED) {
            /* YAML block: the message as a single-quoted scalar. */
            fprintf(out, "  ---\n  message: '");
            for (const char *c = t->message; *c; c++) {
                if (*c == '\'')
                    fputs("''", out);
                else
                    fputc(*c == '\n' ? ' ' : *c, out);
            }
            fprintf(out, "'\n  ...\n");
        }
    }
    fclose(out);
}

/* "LESSON SCORE MAX" per lesson, then "total SCORE MAX": for rosters. */
static void write_scores(const char *dir, double score, double max_score)
{
    FILE *out = open_output(dir, "scores.txt");
    for (int k = 0; k < test_count;) {
        const char *lesson = tests[k].lesson;
        double got = 0, of = 0;
        for (; k < test_count && strcmp(tests[k].lesson, lesson) == 0; k++) {
            got += tests[k].score;
            of += tests[k].max_score;
        }
        fprintf(out, "%s %g %g\n", lesson, got, of);
    }
    fprintf(out, "total %g %g\n", score, max_score);
    fclose(out);
}

/* The table for a person: one line per lesson, then what failed. */
static void print_table(double score, double max_score, const char *work)
{
    printf("  %-26s %8s\n", "lesson", "points");
    for (int k = 0; k < test_count;) {
        const char *lesson = tests[k].lesson;
        double got = 0, of = 0;
        int end = k;
        for (; end < test_count && strcmp(tests[end].lesson, lesson) == 0;
             end++) {
            got += tests[end].score;
            of += tests[end].max_score;
        }
        printf("  %-26s %4g/%-4g\n", lesson, got, of);
        /* A lesson that did not compile says so once. */
        if ((strncmp(tests[k].message, "your files do not compile", 25) == 0 ||
             strncmp(tests[k].message, "your files were refused", 23) == 0) &&
            tests[k].what != PASSED) {
            printf("      [FAIL] %.600s\n", tests[k].message);
            k = end;
            continue;
        }
        bool cut = false;
        for (; k < end; k++) {
            const test *t = &tests[k];
            if (t->what == PASSED)
                continue;
            cut = cut || strlen(t->message) > 300;
            printf("      [%s] %s: %.300s%s\n", t->what == SKIPPED ? "skip"
                   : t->what == NOT_STARTED ? "todo" : "FAIL", t->name,
                   t->message, strlen(t->message) > 300 ? "..." : "");
        }
        /* The hints come at the end of a message: say where it is whole. */
        if (cut)
            printf("      (each message whole, with its hint: %s/%s.log, "
                   "and the sanitizers' run: %s/%s.sanitized.log)\n", work,
                   lesson, work, lesson);
    }
    printf("Score: %g/%g\n", score, max_score);
}

/* A TODO label's first and last numbers ("1, 3": 1 and 3; "2": 2 and 2). */
static void todo_numbers(const char *label, long *first, long *last)
{
    *first = *last = 0;
    bool any = false;
    for (const char *at = label; *at != '\0';) {
        if (*at >= '0' && *at <= '9') {
            char *end;
            long number = strtol(at, &end, 10);
            if (!any)
                *first = number;
            *last = number;
            any = true;
            at = end;
        } else {
            at++;
        }
    }
}

/* Whether label a goes before label b: by the last TODO a test needs, then
 * the one that needs the fewer earlier TODOs ("2" before "1-2"). */
static bool todo_before(const char *a, const char *b)
{
    long a_first, a_last, b_first, b_last;
    todo_numbers(a, &a_first, &a_last);
    todo_numbers(b, &b_first, &b_last);
    if (a_last != b_last)
        return a_last < b_last;
    if (a_first != b_first)
        return a_first > b_first;
    return strcmp(a, b) < 0;
}

/* make progress: one line per lesson and TODO. A TODO is done when all its
 * tests pass, not started when none passes and one still meets NOT_DONE(),
 * and failing otherwise. */
static void print_progress(void)
{
    /* What to do next: the first TODO, in order, of a lesson that has
     * been checked (the lessons the student works on) that is failing,
     * not started, or whose tests make check T=N has not run yet; else
     * the first lesson never checked. */
    const test *next = NULL, *next_unchecked = NULL;
    /* The first lesson never checked after the last lesson that was: a
     * student who starts at lesson 05 in a fresh tree, with lessons 00-04
     * done elsewhere, goes on to 06, not back to 00. */
    const test *unchecked_after = NULL;
    bool next_not_run = false;
    for (int k = 0; k < test_count;) {
        const char *lesson = tests[k].lesson;
        int end = k;
        while (end < test_count && strcmp(tests[end].lesson, lesson) == 0)
            end++;
        printf("lesson %s\n", lesson);
        if (tests[k].unchecked) {
            printf("  not checked yet: make check L=%.2s\n", lesson);
            if (next_unchecked == NULL)
                next_unchecked = &tests[k];
            if (unchecked_after == NULL)
                unchecked_after = &tests[k];
            k = end;
            continue;
        }
        /* A checked lesson: what comes after it is looked for afresh. */
        unchecked_after = NULL;
        /* Each TODO label once, in the lesson's order: TODO N, then the
         * tests that need TODOs up to N ("1-2", "1, 2") before TODO N+1's,
         * as make check T=N groups them. */
        int order[MAX_TESTS], labels = 0;
        for (int first = k; first < end; first++) {
            bool seen = false;
            for (int j = 0; j < labels && !seen; j++)
                seen = strcmp(tests[order[j]].todo, tests[first].todo) == 0;
            if (!seen)
                order[labels++] = first;
        }
        for (int a = 1; a < labels; a++)
            for (int b = a; b > 0 && todo_before(tests[order[b]].todo,
                                                 tests[order[b - 1]].todo);
                 b--) {
                int swap = order[b];
                order[b] = order[b - 1];
                order[b - 1] = swap;
            }
        for (int label = 0; label < labels; label++) {
            const int first = order[label];
            int count = 0, passed = 0, not_started = 0, skipped = 0;
            int not_run = 0;
            const test *example = NULL, *unrun = NULL;
            for (int j = first; j < end; j++) {
                if (strcmp(tests[j].todo, tests[first].todo) != 0)
                    continue;
                count++;
                passed += tests[j].what == PASSED;
                not_started += tests[j].what == NOT_STARTED;
                /* make check T=N records the tests it did not run as
                 * skipped "not run ...": not done, nor failing. */
                if (tests[j].what == SKIPPED &&
                    strncmp(tests[j].message, "not run", 7) == 0) {
                    not_run++;
                    if (unrun == NULL)
                        unrun = &tests[j];
                    continue;
                }
                skipped += tests[j].what == SKIPPED;
                if (tests[j].what != PASSED && tests[j].what != SKIPPED &&
                    example == NULL)
                    example = &tests[j];
            }
            /* A skipped test (CUDA without a GPU) is neither done nor
             * failing: it could not run here. */
            const char *state = skipped == count           ? "skipped"
                                : passed + skipped == count ? "done"
                                : example == NULL            ? "not run"
                                : passed == 0 && not_started > 0
                                    ? "not started" : "failing";
            if (example == NULL && unrun != NULL) {
                example = unrun;
                if (next == NULL) {
                    next = unrun;
                    next_not_run = true;
                }
            }
            if (skipped == count && example == NULL)
                for (int j = first; j < end && example == NULL; j++)
                    if (strcmp(tests[j].todo, tests[first].todo) == 0)
                        example = &tests[j];
            printf("  TODO %-16s %-12s %d/%d tests pass", tests[first].todo,
                   state, passed, count);
            if (example != NULL)
                printf("; e.g. %s: %.160s", example->name, example->message);
            printf("\n");
            if (example != NULL && next == NULL && skipped != count)
                next = example;
        }
        k = end;
    }
    long first_todo, last_todo;
    if (next != NULL && next_not_run) {
        todo_numbers(next->todo, &first_todo, &last_todo);
        printf("next: lesson %s, TODO %s, whose tests have not all run "
               "on your code as it is (make check L=%.2s T=%ld)\n",
               next->lesson, next->todo, next->lesson, last_todo);
    } else if (next != NULL) {
        printf("next: lesson %s, TODO %s (make check L=%.2s)\n", next->lesson,
               next->todo, next->lesson);
    } else if (next_unchecked != NULL) {
        if (unchecked_after != NULL)
            next_unchecked = unchecked_after;
        printf("next: lesson %s (make check L=%.2s)\n", next_unchecked->lesson,
               next_unchecked->lesson);
    } else {
        printf("every TODO is done\n");
    }
}

/* A broken submission's expectations: "score: X/Y", and lines "fails: NAME |
 * WORDS" or "passes: NAME", NAME the start of test names (across lessons),
 * WORDS part of the failure message. Returns how many do not hold. */
static int check_expectations(const char *path, double score,
                              double max_score, int *held)
{
    FILE *file = fopen(path, "r");
    char line[LINE];
    int broken = 0;
    if (file == NULL) {
        perror(path);
        return 1;
    }
    while (read_line(line, file, path)) {
        char *text = trim(line);
        double want, want_max;
        if (sscanf(text, "score: %lf/%lf", &want, &want_max) == 2) {
            bool ok = want == score && want_max == max_score;
            printf("  [%s] score: %g/%g%s", ok ? "pass" : "FAIL", want,
                   want_max, ok ? "\n" : "");
            if (!ok)
                printf(": the grade was %g/%g\n", score, max_score);
            ok ? (*held)++ : broken++;
            continue;
        }
        bool must_fail = strncmp(text, "fails:", 6) == 0;
        if (!must_fail && strncmp(text, "passes:", 7) != 0)
            continue;
        char *name = trim(text + (must_fail ? 6 : 7));
        char *words = strchr(name, '|');
        if (words != NULL) {
            *words++ = '\0';
            words = trim(words);
            name = trim(name);
        }
        int matched = 0;
        const test *wrong = NULL;
        for (int k = 0; k < test_count && wrong == NULL; k++) {
            if (strncmp(tests[k].name, name, strlen(name)) != 0)
                continue;
            matched++;
            bool failed = tests[k].what != PASSED;
            if (failed != must_fail ||
                (must_fail && words && !strstr(tests[k].message, words)))
                wrong = &tests[k];
        }
        if (matched > 0 && wrong == NULL) {
            (*held)++;
            printf("  [pass] %s %s%s%s\n", must_fail ? "fails:" : "passes:",
                   name, words ? " | " : "", words ? words : "");
            continue;
        }
        broken++;
        if (matched == 0)
            printf("  [FAIL] %s %s: no test has this name\n",
                   must_fail ? "fails:" : "passes:", name);
        else
            printf("  [FAIL] %s %s%s%s: '%s' %s: %.400s\n",
                   must_fail ? "fails:" : "passes:", name, words ? " | " : "",
                   words ? words : "", wrong->name,
                   wrong->what == PASSED ? "passed" : "failed", wrong->message);
    }
    fclose(file);
    return broken;
}

/* make test: the names the suite gives (runner --list, in `path`) and the
 * manifests' lines must match one to one, so that no test goes unscored and
 * no points hang on a test that does not exist. Returns the problems. */
static int check_names(const char *path)
{
    FILE *file = fopen(path, "r");
    char line[LINE];
    int problems = 0, listed = 0;
    bool seen[MAX_TESTS] = { false };
    if (file == NULL) {
        perror(path);
        return 1;
    }
    while (read_line(line, file, path)) {
        char *name = trim(line);
        if (name[0] == '\0')
            continue;
        listed++;
        int matches = 0;
        for (int k = 0; k < test_count; k++)
            if (strcmp(tests[k].name, name) == 0) {
                matches++;
                seen[k] = true;
            }
        if (matches != 1) {
            printf("  [FAIL] test '%s' has %d lines in the manifests, not "
                   "one\n", name, matches);
            problems++;
        }
    }
    fclose(file);
    for (int k = 0; k < test_count; k++)
        if (!seen[k]) {
            printf("  [FAIL] the manifest of %s gives points to '%s', which "
                   "is no test\n", tests[k].lesson, tests[k].name);
            problems++;
        }
    if (problems == 0)
        printf("  [pass] manifest: each of the %d tests has its points\n",
               listed);
    return problems;
}

/* Kills every process whose program (its /proc/PID/exe) lies in `dir`, an
 * absolute path: this grading's own build, which no other checkout or
 * grading shares, whatever their command lines say. Repeated until none is
 * found, so that a process that forked while being killed goes too. */
static int sweep(const char *dir)
{
#ifdef __linux__
    size_t length = strlen(dir);
    /* Shorter than PATH_MAX - 1, so that a program's path, read into
     * exe[PATH_MAX] (cut short if it must be), still shows the folder and
     * the slash after it. */
    if (dir[0] != '/' || length >= PATH_MAX - 1) {
        fprintf(stderr, "grade: --sweep needs an absolute folder, shorter "
                "than %d characters\n", PATH_MAX - 1);
        return 2;
    }
    for (int round = 0; round < 100; round++) {
        int found = 0;
        DIR *proc = opendir("/proc");
        struct dirent *entry;
        while (proc != NULL && (entry = readdir(proc)) != NULL) {
            char link[sizeof "/proc//exe" + sizeof entry->d_name];
            char exe[PATH_MAX];
            if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
                continue;
            snprintf(link, sizeof link, "/proc/%s/exe", entry->d_name);
            ssize_t n = readlink(link, exe, sizeof exe - 1);
            if (n <= 0)
                continue;
            exe[n] = '\0';
            if (strncmp(exe, dir, length) == 0 && exe[length] == '/' &&
                kill((pid_t)atoi(entry->d_name), SIGKILL) == 0)
                found++;
        }
        if (proc != NULL)
            closedir(proc);
        if (found == 0)
            break;
    }
#else
    (void)dir;
#endif
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--sweep") == 0)
        return sweep(argv[2]);
    const char *lessons = NULL, *work = NULL, *out = NULL;
    const char *manifests = "tests/manifest", *expect = NULL, *tally = NULL;
    const char *title = "grade", *sources = NULL, *names_path = NULL;
    double seconds = 0;
    bool progress = false;

    for (int k = 1; k < argc; k++) {
        const char *value = k + 1 < argc ? argv[k + 1] : NULL;
        if (strcmp(argv[k], "--progress") == 0)
            progress = true;
        else if (value == NULL)
            fail_usage("a flag needs a value");
        else if (strcmp(argv[k], "--lessons") == 0)
            lessons = argv[++k];
        else if (strcmp(argv[k], "--work") == 0)
            work = argv[++k];
        else if (strcmp(argv[k], "--out") == 0)
            out = argv[++k];
        else if (strcmp(argv[k], "--manifests") == 0)
            manifests = argv[++k];
        else if (strcmp(argv[k], "--expect") == 0)
            expect = argv[++k];
        else if (strcmp(argv[k], "--tally") == 0)
            tally = argv[++k];
        else if (strcmp(argv[k], "--title") == 0)
            title = argv[++k];
        else if (strcmp(argv[k], "--sources") == 0)
            sources = argv[++k];
        else if (strcmp(argv[k], "--check-names") == 0)
            names_path = argv[++k];
        else if (strcmp(argv[k], "--seconds") == 0)
            seconds = atof(argv[++k]);
        else
            fail_usage("unknown flag");
    }
    if (lessons == NULL || (names_path == NULL && (work == NULL ||
        (out == NULL && !progress && expect == NULL))))
        fail_usage("--lessons, --work and --out are needed");

    char *list = strdup(lessons);
    if (list == NULL) {
        perror("grade");
        return 3;
    }
    char *names[MAX_LESSONS];
    int lesson_count = 0;
    for (char *name = strtok(list, " "); name; name = strtok(NULL, " ")) {
        if (lesson_count == MAX_LESSONS) {
            fprintf(stderr, "grade: --lessons names more than %d lessons\n",
                    MAX_LESSONS);
            return 3;
        }
        names[lesson_count++] = name;
    }
    char hidden[PATH_MAX];
    path_or_exit(hidden, "%s/../hidden/manifest", manifests);
    for (int k = 0; k < lesson_count; k++) {
        read_manifest(manifests, names[k], false);
        read_manifest(hidden, names[k], true);
    }
    if (names_path != NULL) {
        int problems = check_names(names_path);
        if (tally != NULL) {
            FILE *file = fopen(tally, "a");
            if (file != NULL) {
                fprintf(file, "%d %d 0 manifest of %s\n", problems == 0,
                        problems != 0, lessons);
                fclose(file);
            }
        }
        return problems == 0 ? 0 : 1;
    }
    for (int k = 0; k < lesson_count; k++)
        read_results(work, names[k]);
    if (sources != NULL)
        name_sources_as_lessons(sources);

    double score, max_score;
    score_all(&score, &max_score);

    if (progress) {
        /* A report, not a verdict: it succeeds whatever it reports. */
        print_progress();
        return 0;
    }
    if (expect != NULL) {
        int held = 0;
        printf("%s\n", title);
        int broken = check_expectations(expect, score, max_score, &held);
        printf("  %d of %d expectations hold\n", held, held + broken);
        if (tally != NULL) {
            FILE *file = fopen(tally, "a");
            if (file != NULL) {
                fprintf(file, "%d %d 0 %s\n", held, broken, title);
                fclose(file);
            }
        }
        return broken == 0 ? 0 : 1;
    }
    write_json(out, score, seconds);
    write_junit(out, seconds);
    write_tap(out);
    write_scores(out, score, max_score);
    print_table(score, max_score, work);
    return score == max_score ? 0 : 1;
}
