/* Unit tests of the shared library (common/): each header's promises. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "cli.h"
#include "compare.h"
#include "format_bytes.h"
#include "kernels.h"
#include "ledger_watch.h"
#include "memory_ledger.h"
#include "matrix.h"
#include "partition.h"
#include "reference.h"
#include "report.h"
#include "rng.h"
#include "stream.h"
#include "timer.h"

/* ---- timer.h ---- */

START_TEST(timer_is_monotonic)
{
    double previous = timer_now();
    for (int k = 0; k < 100000; k++) {
        double now = timer_now();
        ck_assert_msg(now >= previous, "timer went back: %.9f after %.9f",
                      now, previous);
        previous = now;
    }
}
END_TEST

START_TEST(median_of_odd_and_even_counts)
{
    const double odd[] = { 5, 1, 9, 3, 7 };
    const double even[] = { 4, 1, 3, 2 };
    ck_assert(timings_median(odd, 5) == 5.0);
    ck_assert(timings_median(even, 4) == 2.5);
    ck_assert_msg(odd[0] == 5 && odd[1] == 1, "median reordered its input");
}
END_TEST

/* ---- rng.h ---- */

/* SplitMix64 from seed 1234567: the published reference outputs of the
 * generator (the test values distributed with Vigna's splitmix64.c and
 * Java's SplittableRandom agree). A platform that gives other numbers is
 * not running SplitMix64. */
START_TEST(rng_matches_splitmix64_reference)
{
    const uint64_t expected[] = { 6457827717110365317u, 3203168211198807973u,
                                  9817491932198370423u, 4593380528125082431u,
                                  16408922859458223821u };
    rng_t rng = rng_seeded(1234567);
    for (int k = 0; k < 5; k++) {
        uint64_t got = rng_next_u64(&rng);
        ck_assert_msg(got == expected[k], "output %d: expected %llu, got %llu",
                      k, (unsigned long long)expected[k],
                      (unsigned long long)got);
    }
}
END_TEST

START_TEST(rng_uniform_is_in_range_and_spread)
{
    rng_t rng = rng_seeded(42);
    double sum = 0.0;
    const int count = 100000;
    for (int k = 0; k < count; k++) {
        double u = rng_next_uniform(&rng);
        ck_assert_msg(u >= 0.0 && u < 1.0, "uniform %.17g outside [0, 1)", u);
        sum += u;
    }
    /* The mean of n uniforms has standard deviation 1/sqrt(12 n) = 0.0009;
     * 0.005 is more than five of them. */
    ck_assert_msg(fabs(sum / count - 0.5) < 0.005, "mean %.4f far from 0.5",
                  sum / count);
    ck_assert(rng_bits_to_uniform(UINT64_MAX) < 1.0);
    ck_assert(rng_bits_to_uniform(0) == 0.0);
}
END_TEST

START_TEST(generated_matrix_is_the_same_for_any_partition)
{
    enum { rows = 13, cols = 7 };
    double whole[rows * cols], block[rows * cols];
    matrix_fill_random(whole, rows, cols, 0, 0, 99);
    /* Rows 5..12, columns 2..6, generated on their own. */
    matrix_fill_random(block, 8, 5, 5, 2, 99);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 5; c++)
            ck_assert_msg(block[r * 5 + c] == whole[(5 + r) * cols + 2 + c],
                          "entry (%d, %d) differs between the whole matrix "
                          "and a block", 5 + r, 2 + c);
    double x[10], tail[4];
    vector_fill_random(x, 10, 0, 99);
    vector_fill_random(tail, 4, 6, 99);
    for (int k = 0; k < 4; k++)
        ck_assert(tail[k] == x[6 + k]);
    /* The vector is not the matrix's first column or row. */
    ck_assert(x[0] != whole[0] && x[1] != whole[1] && x[1] != whole[cols]);
    /* Another seed, another matrix. */
    matrix_fill_random(block, 1, 1, 0, 0, 100);
    ck_assert(block[0] != whole[0]);
    for (int k = 0; k < rows * cols; k++)
        ck_assert(whole[k] >= -1.0 && whole[k] < 1.0);
}
END_TEST

/* ---- matrix.h ---- */

START_TEST(matrix_bytes_detects_overflow)
{
    size_t bytes = 0;
    ck_assert(matrix_bytes(1000, 1000, &bytes) && bytes == 8000000);
    ck_assert(matrix_bytes(0, 5, &bytes) && bytes == 0);
    ck_assert(!matrix_bytes(SIZE_MAX / 2, 3, &bytes));
    ck_assert(!matrix_bytes((size_t)1 << 32, (size_t)1 << 32, &bytes));
    ck_assert(!matrix_bytes(SIZE_MAX / 8 + 1, 1, &bytes));
}
END_TEST

START_TEST(matrix_alloc_is_aligned_and_zeroed)
{
    double *A = matrix_alloc_or_exit(7, 9, "A");
    ck_assert_msg(((uintptr_t)A % 64) == 0, "not 64-byte aligned");
    for (int k = 0; k < 63; k++)
        ck_assert(A[k] == 0.0);
    matrix_free(A);
}
END_TEST

/* An impossible size is bad input: exit status 2, not a crash. */
START_TEST(matrix_alloc_too_large_exits_2)
{
    freopen("/dev/null", "w", stderr); /* the expected error, not noise */
    matrix_alloc_or_exit(SIZE_MAX / 4, 4, "A");
}
END_TEST

/* The _try_ forms return instead of exiting, so that an MPI driver can end
 * every rank together: a process that exited here would fail the test. */
START_TEST(matrix_try_alloc_returns_the_reason)
{
    char error[256] = "";
    size_t before = memory_ledger_current(MEMORY_MATRIX);
    ck_assert(matrix_try_alloc(SIZE_MAX / 4, 4, "A", error, sizeof error)
              == NULL);
    ck_assert_msg(strstr(error, "A of") != NULL &&
                  strstr(error, "too large to address") != NULL, "%s", error);
    ck_assert(matrix_try_alloc((size_t)1 << 30, (size_t)1 << 30, "A", error,
                               sizeof error) == NULL);
    ck_assert_msg(strcmp(error, "cannot allocate 8.0 EiB for A (1073741824 "
                         "x 1073741824 doubles): not enough memory") == 0,
                  "%s", error);
    ck_assert(vector_try_alloc(SIZE_MAX, "x", error, sizeof error) == NULL);
    ck_assert_msg(strstr(error, "x of") != NULL, "%s", error);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_MATRIX), before);
    double *A = matrix_try_alloc(3, 4, "A", error, sizeof error);
    ck_assert(A != NULL && A[11] == 0.0);
    matrix_free(A);
}
END_TEST

/* ---- format_bytes.h ---- */

START_TEST(format_bytes_reads_well)
{
    char text[32];
    format_bytes(512.0 * 1024 * 1024, text, sizeof text);
    ck_assert_str_eq(text, "512.0 MiB");
    format_bytes(100, text, sizeof text);
    ck_assert_str_eq(text, "100 B");
}
END_TEST

/* ---- compare.h ---- */

START_TEST(compare_reports_first_mismatch)
{
    const double expected[] = { 1.0, 2.0, 3.0, 4.0 };
    const double got[] = { 1.0, 2.5, 3.0, 5.0 };
    const double bound[] = { 0.1, 0.1, 0.1, 0.1 };
    comparison_t c = compare_within(expected, got, bound, 4);
    ck_assert(!comparison_ok(&c));
    ck_assert_uint_eq(c.wrong, 2);
    ck_assert_uint_eq(c.first, 1);
    ck_assert(c.expected == 2.0 && c.got == 2.5 && c.abs_error == 0.5);
    ck_assert(c.rel_error == 0.25);
    char text[256];
    comparison_describe(&c, "y", text, sizeof text);
    ck_assert_msg(strstr(text, "y[1]: expected 2, got 2.5") != NULL &&
                  strstr(text, "2 of 4 elements wrong") != NULL, "%s", text);
    c = compare_within(expected, expected, bound, 4);
    ck_assert(comparison_ok(&c));
}
END_TEST

START_TEST(compare_fails_on_nan)
{
    const double expected[] = { 1.0, 2.0 };
    const double got[] = { 1.0, NAN };
    const double bound[] = { INFINITY, INFINITY };
    comparison_t c = compare_within(expected, got, bound, 2);
    ck_assert(c.wrong == 1 && c.first == 1);
    c = compare_relative(expected, got, 2, 1.0, 1.0);
    ck_assert(c.wrong == 1);
}
END_TEST

START_TEST(compare_bitwise_sees_one_ulp_and_signed_zero)
{
    const double expected[] = { 1.0, 0.0 };
    double got[] = { nextafter(1.0, 2.0), -0.0 };
    comparison_t c = compare_bitwise(expected, got, 2);
    ck_assert_uint_eq(c.wrong, 2);
    got[0] = 1.0;
    got[1] = 0.0;
    c = compare_bitwise(expected, got, 2);
    ck_assert(comparison_ok(&c));
}
END_TEST

/* ---- reference.h ---- */

/* A sum that cancels: 1e16 + 1 - 1e16 is 1, and plain double addition
 * loses the 1 entirely. Dot2 keeps it. */
START_TEST(dot_reference_survives_cancellation)
{
    const double x[] = { 1e16, 1.0, -1e16 };
    const double ones[] = { 1.0, 1.0, 1.0 };
    double magnitude;
    double plain = (x[0] + x[1]) + x[2];
    ck_assert(plain != 1.0);
    ck_assert(dot_reference(3, x, ones, &magnitude) == 1.0);
    ck_assert(magnitude == 2e16 + 1.0);
}
END_TEST

/* The bound holds for a plain loop on hard data (mixed magnitudes from
 * 2^-30 to 2^30), and is not absurdly loose: the plain loop's actual error
 * is a noticeable fraction of it somewhere. */
START_TEST(matvec_bound_holds_and_is_tight_enough)
{
    enum { m = 64, n = 1000 };
    static double A[m * n], x[n], y[m], expected[m], bound[m];
    rng_t rng = rng_seeded(5);
    for (int k = 0; k < m * n; k++)
        A[k] = (2 * rng_next_uniform(&rng) - 1) *
               ldexp(1.0, (int)(rng_next_u64(&rng) % 61) - 30);
    for (int k = 0; k < n; k++)
        x[k] = 2 * rng_next_uniform(&rng) - 1;
    reference_matvec(m, n, A, x, expected, bound);
    double worst = 0.0;
    for (int i = 0; i < m; i++) {
        double sum = 0.0;
        for (int j = 0; j < n; j++)
            sum += A[i * n + j] * x[j];
        y[i] = sum;
        ck_assert_msg(fabs(y[i] - expected[i]) <= bound[i], "row %d: error "
                      "%.3g above bound %.3g", i, fabs(y[i] - expected[i]),
                      bound[i]);
        if (fabs(y[i] - expected[i]) / bound[i] > worst)
            worst = fabs(y[i] - expected[i]) / bound[i];
    }
    ck_assert_msg(worst > 1e-6, "bound is loose beyond use: worst error is "
                  "%.3g of it", worst);
}
END_TEST

/* ---- partition.h ---- */

START_TEST(block_partition_is_balanced_and_covers)
{
    for (size_t total = 0; total <= 40; total++) {
        for (size_t parts = 1; parts <= 9; parts++) {
            size_t next = 0;
            for (size_t index = 0; index < parts; index++) {
                size_t begin, end;
                block_range(total, parts, index, &begin, &end);
                ck_assert_msg(begin == next, "total %zu parts %zu: part %zu "
                              "starts at %zu, not %zu", total, parts, index,
                              begin, next);
                size_t size = end - begin;
                size_t expected = total / parts +
                                  (index < total % parts ? 1 : 0);
                ck_assert_uint_eq(size, expected);
                ck_assert_uint_eq(block_size(total, parts, index), size);
                for (size_t item = begin; item < end; item++)
                    ck_assert_uint_eq(block_owner(total, parts, item), index);
                next = end;
            }
            ck_assert_uint_eq(next, total);
        }
    }
}
END_TEST

/* ---- cli.h ---- */

static int parse(size_t *m, double *rate, bool *verbose, char *error,
                 int argc, char **argv)
{
    const cli_option options[] = {
        { "m", CLI_SIZE, m, "rows", 1, 1000 },
        { "rate", CLI_DOUBLE, rate, "rate", 0, 1 },
        { "verbose", CLI_FLAG, verbose, "say more", 0, 0 },
    };
    const cli_spec spec = { "prog", "a test", options, 3 };
    return cli_parse(&spec, argc, argv, error, 256);
}

START_TEST(cli_accepts_good_flags)
{
    size_t m = 7;
    double rate = 0.5;
    bool verbose = false;
    char error[256];
    char *argv[] = { "prog", "--m", "12", "--rate=0.25", "--verbose", NULL };
    ck_assert_int_eq(parse(&m, &rate, &verbose, error, 5, argv), CLI_OK);
    ck_assert(m == 12 && rate == 0.25 && verbose);
    char *defaults[] = { "prog", NULL };
    m = 7;
    ck_assert_int_eq(parse(&m, &rate, &verbose, error, 1, defaults), CLI_OK);
    ck_assert(m == 7);
    char *help[] = { "prog", "--help", NULL };
    ck_assert_int_eq(parse(&m, &rate, &verbose, error, 2, help), CLI_HELP);
}
END_TEST

START_TEST(cli_rejects_bad_input)
{
    static const struct {
        const char *flag, *value, *says;
    } cases[] = {
        { "--m", "abc", "needs a whole number, got 'abc'" },
        { "--m", "-5", "needs a whole number, got '-5'" },
        { "--m", "0", "must be from 1 to 1000, got '0'" },
        { "--m", "1001", "must be from 1 to 1000" },
        { "--m", "99999999999999999999999", "needs a whole number" },
        { "--m", "12x", "needs a whole number" },
        { "--m", " 12", "needs a whole number" },
        { "--m", "", "needs a whole number" },
        { "--rate", "2", "must be from 0 to 1" },
        { "--rate", "nan", "needs a number" },
        { "--rate", "1e999", "needs a number" },
        { "--bogus", "1", "unknown flag '--bogus'" },
        { "stray", "1", "unexpected argument 'stray'" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t m = 7;
        double rate = 0.5;
        bool verbose = false;
        char error[256] = "";
        char *argv[] = { "prog", (char *)cases[k].flag, (char *)cases[k].value,
                         NULL };
        int result = parse(&m, &rate, &verbose, error, 3, argv);
        ck_assert_msg(result == CLI_ERROR, "%s %s accepted", cases[k].flag,
                      cases[k].value);
        ck_assert_msg(strstr(error, cases[k].says) != NULL,
                      "%s '%s': message '%s' lacks '%s'", cases[k].flag,
                      cases[k].value, error, cases[k].says);
    }
    size_t m = 7;
    double rate = 0.5;
    bool verbose = false;
    char error[256];
    char *missing[] = { "prog", "--m", NULL };
    ck_assert_int_eq(parse(&m, &rate, &verbose, error, 2, missing), CLI_ERROR);
    ck_assert(strstr(error, "--m needs a value") != NULL);
    char *flag_value[] = { "prog", "--verbose=1", NULL };
    ck_assert_int_eq(parse(&m, &rate, &verbose, error, 2, flag_value),
                     CLI_ERROR);
}
END_TEST

/* ---- stream.h ---- */

START_TEST(triad_computes_and_measures)
{
    triad_arrays arrays = triad_alloc_or_exit(1000);
    double seconds = triad_once(&arrays);
    ck_assert(seconds >= 0.0);
    for (size_t i = 0; i < arrays.n; i++)
        ck_assert(arrays.a[i] == 1.0 + 3.0 * 2.0);
    ck_assert(triad_bytes(1000) == 24000.0);
    triad_free(&arrays);
    double gbs = 0.0;
    char error[256];
    ck_assert(stream_triad_gbs(1 << 16, 3, &gbs, error, sizeof error) == 0);
    ck_assert(gbs > 0.0);
}
END_TEST

/* Arrays that cannot be had are the caller's to report: a -1 and the
 * reason, nothing left allocated, the process still running. */
START_TEST(triad_too_large_returns_the_reason)
{
    char error[256] = "";
    size_t before = memory_ledger_current(MEMORY_VECTOR);
    triad_arrays arrays;
    ck_assert(triad_try_alloc(SIZE_MAX, &arrays, error, sizeof error) == -1);
    ck_assert_msg(strstr(error, "triad array a of") != NULL, "%s", error);
    ck_assert(arrays.a == NULL && arrays.b == NULL && arrays.c == NULL);
    double gbs = -1.0;
    error[0] = '\0';
    ck_assert(stream_triad_gbs(SIZE_MAX, 3, &gbs, error, sizeof error) == -1);
    ck_assert_msg(strstr(error, "too large to address") != NULL, "%s", error);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_VECTOR), before);
}
END_TEST

/* ---- report.h ---- */

/* `dir` refused with one line "--out: cannot write to 'DIR': ..." that
 * says `why`; a name too long for the line is cut short, the reason kept. */
static void expect_refused(const char *dir, const char *why)
{
    char error[256] = "", start[HARNESS_PATH + 64];
    ck_assert_msg(report_check_dir(dir, error, sizeof error) == -1,
                  "--out %.200s was accepted", dir);
    snprintf(start, sizeof start, "--out: cannot write to '%.*s", 40, dir);
    ck_assert_msg(strncmp(error, start, strlen(start)) == 0 &&
                  strstr(error, why) != NULL && strchr(error, '\n') == NULL,
                  "--out %.200s: expected one line \"%s...%s\", got \"%s\"",
                  dir, start, why, error);
}

START_TEST(report_check_dir_accepts_a_folder_and_leaves_it_empty)
{
    char dir[HARNESS_PATH], error[256] = "";
    harness_out_dir(dir);
    ck_assert_msg(report_check_dir(dir, error, sizeof error) == 0, "%s",
                  error);
    /* The file it tried the folder with is gone again. */
    DIR *listing = opendir(dir);
    ck_assert(listing != NULL);
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL)
        ck_assert_msg(strcmp(entry->d_name, ".") == 0 ||
                      strcmp(entry->d_name, "..") == 0,
                      "left behind: %s", entry->d_name);
    closedir(listing);
    harness_remove_out_dir(dir);
}
END_TEST

/* What --out can name that no report can go to: each refused up front,
 * with its reason, where access(W_OK) alone let some through (root may
 * "write" to a regular file's name and to /proc/self). */
START_TEST(report_check_dir_refuses_what_cannot_take_reports)
{
    char dir[HARNESS_PATH], file[HARNESS_PATH + 16], below[HARNESS_PATH + 32];
    harness_out_dir(dir);
    snprintf(file, sizeof file, "%s/a-file", dir);
    FILE *made = fopen(file, "w");
    ck_assert(made != NULL && fclose(made) == 0);
    snprintf(below, sizeof below, "%s/a-file/below", dir);

    expect_refused("/nonexistent/folder", "no such folder");
    expect_refused(file, "it is a file, not a folder");
    expect_refused(below, "");
    expect_refused(file, file); /* the whole name, when it fits */
    if (access("/proc/self", F_OK) == 0)
        expect_refused("/proc/self", "inside /proc");
    if (access("/sys/kernel", F_OK) == 0)
        expect_refused("/sys/kernel", "inside /sys");
    static char long_name[5000];
    memset(long_name, 'a', sizeof long_name - 1);
    expect_refused(long_name, "the name is too long");
    harness_remove_out_dir(dir);
}
END_TEST

/* The bytes of DIR/NAME-rank-0.bin, `*size` of them (malloc'd). */
static char *read_vector_file(const char *dir, const char *name, long *size)
{
    char path[HARNESS_PATH + 64];
    snprintf(path, sizeof path, "%s/%s-rank-0.bin", dir, name);
    FILE *file = fopen(path, "rb");
    ck_assert_msg(file != NULL, "%s was not written", path);
    ck_assert(fseek(file, 0, SEEK_END) == 0);
    *size = ftell(file);
    ck_assert(*size >= 0 && fseek(file, 0, SEEK_SET) == 0);
    char *bytes = malloc((size_t)*size + 1);
    ck_assert(bytes != NULL);
    ck_assert(fread(bytes, 1, (size_t)*size, file) == (size_t)*size);
    fclose(file);
    return bytes;
}

/* Floats written widened are the file their doubles make, for lengths
 * within one of its pieces, across several and none. */
START_TEST(report_write_floats_writes_the_doubles)
{
    char dir[HARNESS_PATH];
    harness_out_dir(dir);
    enum { MOST = 1300 };
    static float floats[MOST];
    static double doubles[MOST];
    for (size_t k = 0; k < MOST; k++) {
        floats[k] = (float)k * 0.37f - 100.0f;
        doubles[k] = floats[k];
    }
    const size_t counts[] = { 0, 1, 512, 513, MOST };
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        ck_assert(report_write_floats(dir, "floats", 0, floats,
                                      counts[c]) == 0);
        ck_assert(report_write_doubles(dir, "doubles", 0, doubles,
                                       counts[c]) == 0);
        long float_size, double_size;
        char *from_floats = read_vector_file(dir, "floats", &float_size);
        char *from_doubles = read_vector_file(dir, "doubles", &double_size);
        ck_assert_msg(float_size == (long)(counts[c] * sizeof(double)) &&
                      float_size == double_size &&
                      memcmp(from_floats, from_doubles,
                             (size_t)float_size) == 0,
                      "%zu floats: %ld bytes, not the %ld of their doubles",
                      counts[c], float_size, double_size);
        free(from_floats);
        free(from_doubles);
    }
    harness_remove_out_dir(dir);
}
END_TEST

/* ---- cli.h: programs without flags ---- */

START_TEST(cli_no_flags_returns_on_an_empty_line)
{
    char *argv[] = { "prog", NULL };
    cli_no_flags_or_exit("prog", "a test", 1, argv);
}
END_TEST

START_TEST(cli_no_flags_exits_2_on_a_flag)
{
    freopen("/dev/null", "w", stderr); /* the expected error, not noise */
    char *argv[] = { "prog", "--threads", "4", NULL };
    cli_no_flags_or_exit("prog", "a test", 3, argv);
}
END_TEST


/* ---- memory_ledger.h ---- */

START_TEST(memory_ledger_tracks_current_and_peak)
{
    size_t matrix0 = memory_ledger_current(MEMORY_MATRIX);
    double *A = matrix_alloc_or_exit(10, 10, "A");
    double *B = matrix_alloc_or_exit(5, 10, "B");
    ck_assert_uint_eq(memory_ledger_current(MEMORY_MATRIX), matrix0 + 1200);
    ck_assert_uint_ge(memory_ledger_peak(MEMORY_MATRIX), matrix0 + 1200);
    matrix_free(A);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_MATRIX), matrix0 + 400);
    ck_assert_uint_ge(memory_ledger_peak(MEMORY_MATRIX), matrix0 + 1200);
    double *x = vector_alloc_or_exit(3, "x");
    ck_assert_uint_ge(memory_ledger_current(MEMORY_VECTOR), 24);
    void *state = ledger_alloc(MEMORY_OPTIMIZER, 100);
    ck_assert(state != NULL && ((uintptr_t)state % 64) == 0);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_OPTIMIZER), 100);
    ledger_free(state);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_OPTIMIZER), 0);
    ck_assert_uint_eq(memory_ledger_peak(MEMORY_OPTIMIZER), 100);
    ck_assert_str_eq(memory_category_name(MEMORY_OPTIMIZER), "optimizer");
    matrix_free(B);
    matrix_free(x);
}
END_TEST

/* The peak of the total is the most held at one moment: two categories
 * that peak one after the other add nothing up. The new categories of
 * lesson 06 are written with the others, then the total. */
START_TEST(memory_ledger_total_and_its_peak)
{
    ck_assert_msg(memory_ledger_current_total() == 0 &&
                  memory_ledger_peak_total() == 0, "this test needs a "
                  "fresh ledger (each test runs in a process of its own)");
    void *parameters = ledger_alloc(MEMORY_PARAMETERS, 1000);
    ck_assert(parameters != NULL);
    ledger_free(parameters);
    void *gathered = ledger_alloc(MEMORY_GATHERED, 1000);
    ck_assert(gathered != NULL);
    ck_assert_uint_eq(memory_ledger_peak_total(), 1000);
    void *buckets = ledger_alloc(MEMORY_BUCKETS, 300);
    void *comm = ledger_alloc(MEMORY_COMM, 200);
    ck_assert(buckets != NULL && comm != NULL);
    ck_assert_uint_eq(memory_ledger_current_total(), 1500);
    ck_assert_uint_eq(memory_ledger_peak_total(), 1500);
    ledger_free(gathered);
    ledger_free(buckets);
    ck_assert_uint_eq(memory_ledger_current_total(), 200);
    ck_assert_uint_eq(memory_ledger_peak_total(), 1500);

    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    ck_assert(out != NULL);
    memory_ledger_write(out);
    ck_assert(fclose(out) == 0);
    const char *const lines[] = {
        "memory parameters 0 1000\n", "memory gathered 0 1000\n",
        "memory buckets 0 300\n", "memory comm 200 200\n",
        "memory total 200 1500\n"
    };
    for (size_t k = 0; k < sizeof lines / sizeof *lines; k++)
        ck_assert_msg(strstr(text, lines[k]) != NULL, "expected \"%.*s\" in "
                      "what memory_ledger_write wrote:\n%s",
                      (int)strlen(lines[k]) - 1, lines[k], text);
    ck_assert_msg(strstr(text, "memory cap") == NULL, "no cap was set, yet:"
                  "\n%s", text);
    ck_assert_str_eq(memory_category_name(MEMORY_GATHERED), "gathered");
    ck_assert_str_eq(memory_category_name(MEMORY_BUCKETS), "buckets");
    ck_assert_str_eq(memory_category_name(MEMORY_COMM), "comm");
    free(text);
    ledger_free(comm);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
}
END_TEST

/* Under a cap, an allocation that would pass it fails, allocates nothing,
 * and says who asked for what, with how much free of which cap; exactly
 * the cap is allowed; without a cap the same allocation succeeds. (The
 * large blocks are never written, so they cost address space only.) */
START_TEST(memory_ledger_cap_refuses_with_a_reason)
{
    const size_t mib = 1024 * 1024;
    ck_assert_msg(memory_ledger_current_total() == 0, "this test needs a "
                  "fresh ledger (each test runs in a process of its own)");
    ck_assert(memory_ledger_cap() == MEMORY_LEDGER_NO_CAP);
    ck_assert_str_eq(memory_ledger_last_error(), "");
    memory_ledger_set_cap(105 * mib, 2);
    ck_assert_uint_eq(memory_ledger_cap(), 105 * mib);
    void *parameters = ledger_alloc(MEMORY_PARAMETERS, 100 * mib);
    ck_assert(parameters != NULL);

    size_t heap = memory_ledger_heap_in_use();
    void *optimizer = ledger_alloc(MEMORY_OPTIMIZER, 12 * mib);
    ck_assert_msg(optimizer == NULL, "12 MiB more than 100 held passed a "
                  "105 MiB cap");
    ck_assert_uint_eq(memory_ledger_heap_in_use(), heap);
    ck_assert_str_eq(memory_ledger_last_error(), "rank 2: device out of "
                     "memory: asked 12.0 MiB for optimizer state, free "
                     "5.0 MiB of 105.0 MiB");
    ck_assert_uint_eq(memory_ledger_current(MEMORY_OPTIMIZER), 0);
    ck_assert_uint_eq(memory_ledger_peak(MEMORY_OPTIMIZER), 0);
    ck_assert_uint_eq(memory_ledger_current_total(), 100 * mib);
    ck_assert_uint_eq(memory_ledger_peak_total(), 100 * mib);

    void *comm = ledger_alloc(MEMORY_COMM, 5 * mib);
    ck_assert_msg(comm != NULL, "exactly the cap must be allowed: %s",
                  memory_ledger_last_error());
    ck_assert(ledger_alloc(MEMORY_GATHERED, 1) == NULL);
    ck_assert_str_eq(memory_ledger_last_error(), "rank 2: device out of "
                     "memory: asked 1 B for gathered parameters, free 0 B of "
                     "105.0 MiB");

    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    ck_assert(out != NULL);
    memory_ledger_write(out);
    ck_assert(fclose(out) == 0);
    char line[64];
    snprintf(line, sizeof line, "memory cap %zu\n", 105 * mib);
    ck_assert_msg(strstr(text, line) != NULL, "expected \"%s\" in:\n%s",
                  line, text);
    free(text);

    /* A cap below what is held refuses everything; no cap, nothing. */
    memory_ledger_set_cap(mib, -1);
    ck_assert(ledger_alloc(MEMORY_BUCKETS, 1) == NULL);
    ck_assert_str_eq(memory_ledger_last_error(), "device out of memory: "
                     "asked 1 B for gradient buckets, free 0 B of 1.0 MiB");
    memory_ledger_set_cap(MEMORY_LEDGER_NO_CAP, 2);
    optimizer = ledger_alloc(MEMORY_OPTIMIZER, 12 * mib);
    ck_assert(optimizer != NULL);
    ck_assert_uint_eq(memory_ledger_peak_total(), 117 * mib);
    ledger_free(optimizer);
    ledger_free(comm);
    ledger_free(parameters);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);

    /* What no system can give is refused with its own reason. */
    ck_assert(ledger_alloc(MEMORY_OTHER, SIZE_MAX) == NULL);
    ck_assert_str_eq(memory_ledger_last_error(), "rank 2: cannot allocate "
                     "16.0 EiB of other data: not enough memory (0 B held)");
}
END_TEST

/* Lesson 07's host categories: memory beside the device, counted apart.
 * The cap (the device's memory) never refuses them, and they are in the
 * host's totals, never in the device's, so lessons 01-06 read the same
 * totals as before. */
START_TEST(memory_ledger_host_categories_are_apart_and_uncapped)
{
    const size_t mib = 1024 * 1024;
    ck_assert_msg(memory_ledger_current_total() == 0 &&
                  memory_ledger_host_current_total() == 0, "this test needs "
                  "a fresh ledger (each test runs in a process of its own)");
    for (int c = 0; c < MEMORY_CATEGORIES; c++) {
        const memory_category category = (memory_category)c;
        const bool host = category == MEMORY_HOST_OPTIMIZER ||
                          category == MEMORY_HOST_STAGING;
        ck_assert_msg(memory_category_is_host(category) == host, "category "
                      "%s: memory_category_is_host said %d",
                      memory_category_name(category), !host);
        /* Reports write "peak NAME VALUE": a name is one word. */
        ck_assert_msg(strpbrk(memory_category_name(category), " \t") == NULL,
                      "category %d's name \"%s\" has a space", c,
                      memory_category_name(category));
    }
    ck_assert_str_eq(memory_category_name(MEMORY_HOST_OPTIMIZER),
                     "host_optimizer");
    ck_assert_str_eq(memory_category_name(MEMORY_HOST_STAGING),
                     "host_staging");

    /* A device of 100 bytes; 3 MiB of host memory beside it. */
    memory_ledger_set_cap(100, 3);
    void *master = ledger_alloc(MEMORY_HOST_OPTIMIZER, 2 * mib);
    void *staging = ledger_alloc(MEMORY_HOST_STAGING, mib);
    ck_assert_msg(master != NULL && staging != NULL, "the cap refused host "
                  "memory: %s", memory_ledger_last_error());
    ck_assert_uint_eq(memory_ledger_current(MEMORY_HOST_OPTIMIZER), 2 * mib);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_HOST_STAGING), mib);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 3 * mib);
    ck_assert_uint_eq(memory_ledger_host_peak_total(), 3 * mib);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
    ck_assert_uint_eq(memory_ledger_peak_total(), 0);

    /* The device's 100 bytes are all still free: exactly those fit, one
     * more does not, and the line counts no host byte. */
    void *parameters = ledger_alloc(MEMORY_PARAMETERS, 100);
    ck_assert_msg(parameters != NULL, "host memory took the device's room: "
                  "%s", memory_ledger_last_error());
    ck_assert(ledger_alloc(MEMORY_GRADIENTS, 1) == NULL);
    ck_assert_str_eq(memory_ledger_last_error(), "rank 3: device out of "
                     "memory: asked 1 B for gradients, free 0 B of 100 B");
    ck_assert_uint_eq(memory_ledger_current_total(), 100);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 3 * mib);

    /* Each side's peak is its own: the host's falls and rises again
     * without the device's moving. */
    ledger_free(staging);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 2 * mib);
    staging = ledger_alloc(MEMORY_HOST_STAGING, 512 * 1024);
    ck_assert(staging != NULL);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 2 * mib + 512 * 1024);
    ck_assert_uint_eq(memory_ledger_host_peak_total(), 3 * mib);
    ck_assert_uint_eq(memory_ledger_peak(MEMORY_HOST_STAGING), mib);
    ck_assert_uint_eq(memory_ledger_peak_total(), 100);

    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    ck_assert(out != NULL);
    memory_ledger_write(out);
    ck_assert(fclose(out) == 0);
    char lines[4][96];
    snprintf(lines[0], sizeof lines[0], "memory host_optimizer %zu %zu\n",
             2 * mib, 2 * mib);
    snprintf(lines[1], sizeof lines[1], "memory host_staging %zu %zu\n",
             (size_t)512 * 1024, mib);
    snprintf(lines[2], sizeof lines[2], "memory total 100 100\n");
    snprintf(lines[3], sizeof lines[3], "memory host_total %zu %zu\n",
             2 * mib + 512 * 1024, 3 * mib);
    for (int k = 0; k < 4; k++)
        ck_assert_msg(strstr(text, lines[k]) != NULL, "expected \"%.*s\" in "
                      "what memory_ledger_write wrote:\n%s",
                      (int)strlen(lines[k]) - 1, lines[k], text);
    free(text);

    /* What the system cannot give is refused as for any category, naming
     * the host's bytes held. */
    ck_assert(ledger_alloc(MEMORY_HOST_STAGING, SIZE_MAX) == NULL);
    ck_assert_str_eq(memory_ledger_last_error(), "rank 3: cannot allocate "
                     "16.0 EiB of staging buffers in host memory: not enough "
                     "memory (2.5 MiB held)");

    ledger_free(master);
    ledger_free(staging);
    ledger_free(parameters);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 0);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_HOST_OPTIMIZER), 0);
}
END_TEST

/* Memory that lives outside the process (a GPU's, device_cuda.c) is
 * counted, capped and refused as a block of ledger_alloc's would be; and a
 * block's own record (what device.h reads) is its size and category. */
START_TEST(memory_ledger_counts_memory_held_elsewhere)
{
    ck_assert_msg(memory_ledger_current_total() == 0, "this test needs a "
                  "fresh ledger (each test runs in a process of its own)");
    memory_ledger_set_cap(1000, 0);
    void *block = ledger_alloc(MEMORY_GATHERED, 300);
    ck_assert(block != NULL);
    ck_assert_uint_eq(ledger_block_bytes(block), 300);
    ck_assert(ledger_block_category(block) == MEMORY_GATHERED);
    ck_assert(ledger_count_external(MEMORY_PARAMETERS, 700) == 0);
    ck_assert_uint_eq(memory_ledger_current(MEMORY_PARAMETERS), 700);
    ck_assert_uint_eq(memory_ledger_current_total(), 1000);
    ck_assert(ledger_count_external(MEMORY_GRADIENTS, 1) == -1);
    ck_assert_str_eq(memory_ledger_last_error(), "rank 0: device out of "
                     "memory: asked 1 B for gradients, free 0 B of 1000 B");
    ck_assert_uint_eq(memory_ledger_current(MEMORY_GRADIENTS), 0);
    ck_assert(ledger_count_external(MEMORY_HOST_STAGING, 5000) == 0);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 5000);
    ledger_uncount_external(MEMORY_PARAMETERS, 700);
    ledger_uncount_external(MEMORY_HOST_STAGING, 5000);
    ck_assert_uint_eq(memory_ledger_current_total(), 300);
    ck_assert_uint_eq(memory_ledger_peak_total(), 1000);
    ck_assert_uint_eq(memory_ledger_host_current_total(), 0);
    ledger_refuse_external(MEMORY_PARAMETERS, 2048, "cudaMalloc: out of "
                           "memory");
    ck_assert_str_eq(memory_ledger_last_error(), "rank 0: cannot allocate "
                     "2.0 KiB of parameters: cudaMalloc: out of memory");
    ledger_free(block);
    ck_assert_uint_eq(memory_ledger_current_total(), 0);
}
END_TEST

/* ---- ledger_watch.h ---- */

/* Memory the ledger never saw shows in the allocator's growth and not in
 * the ledger's; each growth is the largest seen, not the last; the host's
 * categories count only when asked for; the peaks and lines are the
 * ledger's. */
static char *volatile escaped_block;

START_TEST(ledger_watch_sees_memory_behind_the_ledger)
{
    enum { MIB = 1 << 20 };
    ck_assert_msg(memory_ledger_current_total() == 0, "this test needs a "
                  "fresh ledger (each test runs in a process of its own)");
    ledger_watch_start_threads();
    ledger_watch w;
    ledger_watch_start(&w, false);
    char *counted = ledger_alloc(MEMORY_GATHERED, MIB);
    ck_assert(counted != NULL);
    memset(counted, 1, MIB);
    ledger_watch_sample(&w);
    ck_assert_uint_eq(w.ledger_growth, MIB);
    char *hidden = malloc(2 * MIB);
    ck_assert(hidden != NULL);
    memset(hidden, 1, 2 * MIB);
    /* Seen outside this function: clang removes a malloc whose block
     * nothing else sees, and the allocator would not grow. */
    escaped_block = hidden;
    ledger_watch_sample(&w);
    ck_assert_uint_eq(w.ledger_growth, MIB);
    ck_assert_msg(w.heap_growth >= 3 * MIB, "the allocator grew by %zu "
                  "bytes, not the 3 MiB allocated", w.heap_growth);
    ledger_watch_keep_peaks(&w);
    ledger_free(counted);
    free(hidden);
    ledger_watch_sample(&w);
    ck_assert_uint_eq(w.ledger_growth, MIB);
    ck_assert_uint_ge(w.heap_growth, 3 * MIB);
    ck_assert_uint_eq(w.peaks[MEMORY_GATHERED], MIB);
    ck_assert_uint_eq(w.peak_total, MIB);

    ledger_watch device_only, with_host;
    ledger_watch_start(&device_only, false);
    ledger_watch_start(&with_host, true);
    void *staging = ledger_alloc(MEMORY_HOST_STAGING, 4096);
    ck_assert(staging != NULL);
    ledger_watch_sample(&device_only);
    ledger_watch_sample(&with_host);
    ck_assert_uint_eq(device_only.ledger_growth, 0);
    ck_assert_uint_eq(with_host.ledger_growth, 4096);
    ledger_watch_keep_peaks(&with_host);
    ck_assert_uint_eq(with_host.host_peak_total, 4096);
    ledger_free(staging);

    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    ck_assert(out != NULL);
    ledger_watch_write_peaks(&w, out);
    ledger_watch_write_growth(&w, out);
    ck_assert(fclose(out) == 0);
    int lines = 0;
    for (size_t k = 0; k < length; k++)
        lines += text[k] == '\n';
    char growth[160];
    snprintf(growth, sizeof growth, "ledger_growth %d\nheap_growth %zu\n"
             "heap_after_first_step 0\nheap_after_last_step 0\n", MIB,
             w.heap_growth);
    ck_assert_msg(lines == MEMORY_CATEGORIES + 4 &&
                  strncmp(text, "peak matrix 0\n", 14) == 0 &&
                  strstr(text, "peak gathered 1048576\n") != NULL &&
                  length > strlen(growth) &&
                  strcmp(text + length - strlen(growth), growth) == 0,
                  "the report's lines:\n%s", text);
    free(text);
}
END_TEST

/* ---- kernels.h ---- */

/* Any split of the rows gives the same bits as one call over all of them:
 * what lessons 02 and 03 rely on to demand bitwise-equal results. */
START_TEST(matvec_rows_is_split_invariant_and_right)
{
    enum { m = 23, n = 37 };
    double A[m * n], x[n], whole[m], pieces[m], expected[m], bound[m];
    matrix_fill_random(A, m, n, 0, 0, 3);
    vector_fill_random(x, n, 0, 3);
    matvec_rows(m, n, A, n, x, whole);
    reference_matvec(m, n, A, x, expected, bound);
    comparison_t c = compare_within(expected, whole, bound, m);
    EXPECT_COMPARISON(&c, "y", "matvec_rows against the reference");
    for (size_t first = 0; first <= m; first++) {
        for (size_t second = first; second <= m; second++) {
            matvec_rows(first, n, A, n, x, pieces);
            matvec_rows(second - first, n, &A[first * n], n, x,
                        &pieces[first]);
            matvec_rows(m - second, n, &A[second * n], n, x, &pieces[second]);
            c = compare_bitwise(whole, pieces, m);
            ck_assert_msg(comparison_ok(&c), "split at %zu and %zu: y[%zu] "
                          "differs", first, second, c.first);
        }
    }
    /* A leading dimension larger than n: the first 5 columns, checked
     * against the reference on a packed copy, within its error bound. */
    double left[m], packed[m * 5];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < 5; j++)
            packed[i * 5 + j] = A[i * n + j];
    matvec_rows(m, 5, A, n, x, left);
    reference_matvec(m, 5, packed, x, expected, bound);
    c = compare_within(expected, left, bound, m);
    EXPECT_COMPARISON(&c, "y", "matvec_rows with lda > n");
}
END_TEST

/* ledger_free of a block that ledger_alloc did not give (malloc's, or one
 * freed already) ends the process with status 1 and one line that says
 * so, not with a signal, nor by corrupting the heap. */
START_TEST(ledger_free_refuses_foreign_blocks)
{
#ifdef HARNESS_SHADOW_MEMORY
    const int kinds = 1;   /* a block freed already: AddressSanitizer
                              reports the read of its header first */
#else
    const int kinds = 2;
#endif
    for (int kind = 0; kind < kinds; kind++) {
        int pipe_ends[2];
        ck_assert(pipe(pipe_ends) == 0);
        pid_t child = fork();
        ck_assert(child >= 0);
        if (child == 0) {
            dup2(pipe_ends[1], STDERR_FILENO);
            void *block = kind == 0 ? malloc(64)
                                    : ledger_alloc(MEMORY_OTHER, 64);
            if (kind == 1)
                ledger_free(block);
            ledger_free(block);
            _exit(0);
        }
        close(pipe_ends[1]);
        char line[512] = "";
        ssize_t got = read(pipe_ends[0], line, sizeof line - 1);
        line[got > 0 ? got : 0] = '\0';
        close(pipe_ends[0]);
        int status;
        ck_assert(waitpid(child, &status, 0) == child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
                      "ledger_free of a %s block: status %d, not exit 1",
                      kind == 0 ? "malloc'd" : "freed", status);
        ck_assert_msg(strstr(line, "ledger_free: ") != NULL &&
                      strstr(line, "not a block that ledger_alloc gave") !=
                          NULL, "ledger_free said: %s", line);
    }
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("common");
    harness_add(suite, "timer: monotonic", timer_is_monotonic, 0, 10);
    harness_add(suite, "timer: median", median_of_odd_and_even_counts, 0, 10);
    harness_add(suite, "rng: SplitMix64 reference values",
                rng_matches_splitmix64_reference, 0, 10);
    harness_add(suite, "rng: uniform range and mean",
                rng_uniform_is_in_range_and_spread, 0, 10);
    harness_add(suite, "rng: same matrix for any partition",
                generated_matrix_is_the_same_for_any_partition, 0, 10);
    harness_add(suite, "matrix: byte counts overflow-checked",
                matrix_bytes_detects_overflow, 0, 10);
    harness_add(suite, "matrix: aligned and zeroed",
                matrix_alloc_is_aligned_and_zeroed, 0, 10);
    harness_add_exit(suite, "matrix: impossible size exits 2",
                     matrix_alloc_too_large_exits_2, 2, 10);
    harness_add(suite, "matrix: _try_ forms return the reason",
                matrix_try_alloc_returns_the_reason, 0, 10);
    harness_add(suite, "format_bytes: byte counts for people",
                format_bytes_reads_well, 0, 10);
    harness_add(suite, "compare: first mismatch", compare_reports_first_mismatch,
                0, 10);
    harness_add(suite, "compare: NaN never passes", compare_fails_on_nan, 0, 10);
    harness_add(suite, "compare: bitwise",
                compare_bitwise_sees_one_ulp_and_signed_zero, 0, 10);
    harness_add(suite, "reference: Dot2 survives cancellation",
                dot_reference_survives_cancellation, 0, 10);
    harness_add(suite, "reference: matvec bound holds, not loose",
                matvec_bound_holds_and_is_tight_enough, 0, 10);
    harness_add(suite, "partition: balanced, covering, owners",
                block_partition_is_balanced_and_covers, 0, 10);
    harness_add(suite, "cli: good flags", cli_accepts_good_flags, 0, 10);
    harness_add(suite, "cli: bad input rejected with a reason",
                cli_rejects_bad_input, 0, 10);
    harness_add(suite, "stream: triad", triad_computes_and_measures, 0, 10);
    harness_add(suite, "stream: arrays too large return the reason",
                triad_too_large_returns_the_reason, 0, 10);
    harness_add(suite, "report: a writable folder passes, left empty",
                report_check_dir_accepts_a_folder_and_leaves_it_empty, 0, 10);
    harness_add(suite, "report: bad --out folders refused with a reason",
                report_check_dir_refuses_what_cannot_take_reports, 0, 10);
    harness_add(suite, "report: floats written as their doubles",
                report_write_floats_writes_the_doubles, 0, 10);
    harness_add(suite, "cli: no flags, nothing given: returns",
                cli_no_flags_returns_on_an_empty_line, 0, 10);
    harness_add_exit(suite, "cli: no flags, a flag given: exits 2",
                     cli_no_flags_exits_2_on_a_flag, 2, 10);
    harness_add(suite, "memory ledger: current and peak by category",
                memory_ledger_tracks_current_and_peak, 0, 10);
    harness_add(suite, "memory ledger: lesson 06's categories, the total's "
                "peak", memory_ledger_total_and_its_peak, 0, 10);
    harness_add(suite, "memory ledger: a cap refuses, allocating nothing, "
                "with a reason", memory_ledger_cap_refuses_with_a_reason, 0,
                10);
    harness_add(suite, "memory ledger: lesson 07's host categories, apart "
                "and never capped",
                memory_ledger_host_categories_are_apart_and_uncapped, 0, 10);
    harness_add(suite, "memory ledger: memory held elsewhere, counted and "
                "capped alike", memory_ledger_counts_memory_held_elsewhere, 0,
                10);
    harness_add(suite, "memory ledger: ledger_free of a block it did not "
                "give ends with one line", ledger_free_refuses_foreign_blocks,
                0, 10);
    harness_add(suite, "ledger watch: memory behind the ledger's back",
                ledger_watch_sees_memory_behind_the_ledger, 0, 10);
    harness_add(suite, "kernels: any split of rows gives the same bits",
                matvec_rows_is_split_invariant_and_right, 0, 10);
    return suite;
}
