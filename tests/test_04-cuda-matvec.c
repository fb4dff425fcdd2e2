/* Lesson 04's tests: every kernel, in double and in float, on shapes that
 * trip a GPU matvec up, against a reference computed here on the CPU; the
 * copies to the device and back (TODO 1); and the driver under
 * compute-sanitizer's memcheck. Every test needs a CUDA device: without
 * one, each says so and is reported skipped, never passed or failed. Each
 * test checks for the device before it runs any of the student's code,
 * whose unfinished parts stop on the host (NOT_DONE) before any launch.
 *
 * The student's code runs in the lesson's producer
 * (tests/producer/04-cuda-matvec.c, its cases in 04-cuda-matvec.h), never
 * in this program, which links none of it: the producer puts the inputs on
 * the device, calls the student's functions and writes back what came out;
 * this program decides every verdict from those outputs alone. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_cuda.h"
#include "cuda_matvec.h" /* the kernels' numbers only: nothing is called */
#include "harness.h"
#include "matrix.h"
#include "producer/04-cuda-matvec.h"
#include "reference.h"

static const char *const lesson = "04-cuda-matvec";

/* Time limits, in seconds. Grading a whole lesson has 600 s of wall time
 * (scripts/grade.sh), and a test that hangs (a kernel that never ends, on
 * a GPU grader) uses all of its limit: the limits of the lesson's 56 tests
 * add up to 44 * 6 + 10 * 10 + 2 * 45 = 454 s, so that even a submission
 * whose every test hangs is graded in time (`test_04-cuda-matvec
 * --limits` prints the sum). The matrices are small: on a
 * GPU each kernel takes microseconds to milliseconds; a producer's run is
 * mostly CUDA's start-up (a second or two at worst, where the driver must
 * load first) and, for 4096 x 4096, moving A (64 or 128 MiB) through a
 * file, to the device and back, and into a file again (well under a
 * second). The test's own work (its CUDA device probe, the inputs, the
 * reference, reading the outputs) takes under a second even at
 * 4096 x 4096 built with AddressSanitizer: each producer's limit is 2-3 s
 * below its test's. compute-sanitizer runs the driver on 37 x 45 in a few
 * seconds; its limit is 5 s below its test's. */
enum {
    CHECK_SMALL_S = 6,      /* every shape but 4096 x 4096, and transfers */
    PRODUCE_SMALL_S = 4,
    CHECK_LARGE_S = 10,     /* 4096 x 4096 */
    PRODUCE_LARGE_S = 7,
    CHECK_SANITIZER_S = 45,
    SANITIZER_RUN_S = 40,
};

typedef struct {
    size_t m, n;
    const char *why;  /* what the shape catches */
} shape;

/* A shape's time limits: the test's, and its producer's run. */
static bool shape_large(const shape *s)
{
    return s->m * s->n > ((size_t)1 << 22);
}

static int check_limit(const shape *s)
{
    return shape_large(s) ? CHECK_LARGE_S : CHECK_SMALL_S;
}

static int produce_limit(const shape *s)
{
    return shape_large(s) ? PRODUCE_LARGE_S : PRODUCE_SMALL_S;
}

/* Shapes for every kernel. Blocks have 256 threads (8 warps); a double2
 * holds 2 numbers, a float4 4. */
static const shape shapes[] = {
    { 1, 1, "the smallest product" },
    { 33, 65, "one past the warp size; n odd, so every other row starts "
              "off a 16-byte boundary" },
    { 1000, 1, "one column: 31 lanes of every warp without one" },
    { 3, 4099, "fewer rows than warps in a block; a ragged tail of 3 "
               "columns" },
    { 4096, 4096, "large: many blocks, x in many tiles" },
};
enum { shape_count = sizeof shapes / sizeof shapes[0] };

/* The copies of TODO 1 are tested through the thread-per-row kernel
 * (TODO 2), on row counts that are a multiple of every block size up to
 * 1024, so that a kernel without its bounds check cannot spoil them. */
static const shape transfer_shapes[] = {
    { 1024, 77, "more rows than columns" },
    { 1024, 1537, "more columns than rows" },
};
enum { transfer_count = sizeof transfer_shapes / sizeof transfer_shapes[0] };

typedef struct {
    int kernel;
    const char *name;
    const char *hint;
} kernel_info;

static const kernel_info kernels[] = {
    { MATVEC_THREAD_PER_ROW, "thread per row",
      "TODO 2: thread i computes all of row i, the sum over j < n of "
      "A[i*n + j] * x[j], and stores it in y[i]; a thread whose i >= m must "
      "do nothing (the bounds check); every row needs a thread, or a loop "
      "over the rows in strides of the whole grid" },
    { MATVEC_WARP_PER_ROW, "warp per row",
      "TODO 3: lane l adds columns l, l + 32, l + 64, ... while they are "
      "below n (the last round is partial when n is not a multiple of 32); "
      "all 32 lanes reach the shuffles, which gather the 32 partial sums "
      "in lane 0, and lane 0 alone stores y[i]; a warp whose row i >= m "
      "does nothing" },
    { MATVEC_VECTORISED, "vectorised",
      "TODO 4: every element of a row counted exactly once: the head (the "
      "elements before the row's first 16-byte boundary; row i starts off "
      "one when i*n*sizeof(T) is not a multiple of 16), the whole vectors, "
      "and the tail of fewer than width elements after them; x read as "
      "vectors only where x + head is on a boundary too" },
    { MATVEC_SHARED_X, "shared x",
      "TODO 5: every tile of x, including a last, partial one (n need not "
      "be a multiple of TILE), is written whole into shared memory before "
      "any warp reads it, and not overwritten while one still does "
      "(__syncthreads, twice per tile); every thread of the block reaches "
      "every barrier, warps without a row too" },
    { MATVEC_CUBLAS, "cuBLAS",
      "TODO 6: to cuBLAS (column-major) the row-major m x n A is an n x m "
      "matrix with leading dimension n, so y = Ax is gemv with CUBLAS_OP_T, "
      "dimensions (n, m), lda = n, alpha 1, beta 0: cublasDgemv for "
      "double, cublasSgemv for float" },
};
enum { kernel_count = sizeof kernels / sizeof kernels[0] };

/* Elements after y that a kernel must leave alone (the producer's guard):
 * as many as any grid of blocks of up to 1024 threads has threads past the
 * last row. */
enum { GUARD = MATVEC04_GUARD };

static void *checked_malloc(size_t bytes)
{
    void *data = malloc(bytes);
    ck_assert_msg(data != NULL, "the test cannot allocate %zu bytes", bytes);
    return data;
}

/* ---- The reference, and the error a correct kernel may make -------------- */

/* One test's inputs and what a correct kernel gives. A is (m, n), x (n),
 * expected and bound (m). */
typedef struct {
    size_t m, n;
    bool single;
    size_t element;     /* bytes of one number: 4 or 8 */
    double *A, *x;      /* for float, already rounded to float */
    float *A32, *x32;   /* the same numbers as floats (float only) */
    double *expected, *bound;
} problem;

/* The tolerance.
 *
 * Double: reference_matvec's bound (common/reference.h). A length-n dot
 * product computed in double, with the additions in any order and with or
 * without fused multiply-adds, is within gamma_n * sum_j |A[i][j] x[j]| of
 * the exact value, gamma_n = n u / (1 - n u), u = 2^-53 (Higham, "Accuracy
 * and Stability of Numerical Algorithms", section 3.1). Every kernel here
 * is such an order: one thread's running sum; 32 lanes' partial sums
 * added by shuffles; vectors of 2 products; tiles; cuBLAS's own order. The
 * reference's own error (Dot2: as if computed in twice the precision) is
 * added on top.
 *
 * Float: the kernel receives A and x rounded to float. That rounding is no
 * error of the kernel's, so the test rounds the generated numbers to float
 * itself, in place, before it computes the reference in double from them:
 * the reference then sees exactly the kernel's inputs, and only the
 * kernel's own rounding remains. The kernel multiplies and adds in float,
 * so the same bound applies with float's unit roundoff, u = 2^-24:
 * gamma_n(float) * sum_j |A[i][j] x[j]|, plus the reference's own error as
 * reference_matvec counts it. */
static void float_bound(const problem *p)
{
    double nu = (double)p->n * 0x1.0p-24;
    double gamma_float = nu / (1.0 - nu);
    double gamma_double = gamma_n(p->n);
    for (size_t i = 0; i < p->m; i++) {
        double magnitude;
        p->expected[i] = dot_reference(p->n, &p->A[i * p->n], p->x,
                                       &magnitude);
        p->bound[i] = gamma_float * magnitude * (1.0 + 2.0 * gamma_float)
                      + gamma_double * gamma_double * magnitude
                      + 2.0 * UNIT_ROUNDOFF * fabs(p->expected[i]);
    }
}

static problem problem_make(size_t m, size_t n, bool single)
{
    problem p = { .m = m, .n = n, .single = single,
                  .element = single ? sizeof(float) : sizeof(double) };
    p.A = matrix_alloc_or_exit(m, n, "A");
    p.x = vector_alloc_or_exit(n, "x");
    p.expected = vector_alloc_or_exit(m, "reference y");
    p.bound = vector_alloc_or_exit(m, "bounds");
    matrix_fill_random(p.A, m, n, 0, 0, 2026);
    vector_fill_random(p.x, n, 0, 2026);
    if (!single) {
        reference_matvec(m, n, p.A, p.x, p.expected, p.bound);
        return p;
    }
    p.A32 = checked_malloc(m * n * sizeof(float));
    p.x32 = checked_malloc(n * sizeof(float));
    for (size_t k = 0; k < m * n; k++) {
        p.A32[k] = (float)p.A[k];
        p.A[k] = p.A32[k];
    }
    for (size_t k = 0; k < n; k++) {
        p.x32[k] = (float)p.x[k];
        p.x[k] = p.x32[k];
    }
    float_bound(&p);
    return p;
}

static void problem_free(problem *p)
{
    matrix_free(p->A);
    matrix_free(p->x);
    matrix_free(p->expected);
    matrix_free(p->bound);
    free(p->A32);
    free(p->x32);
}

/* The inputs as the kernel gets them. */
static const void *input_A(const problem *p)
{
    return p->single ? (const void *)p->A32 : (const void *)p->A;
}

static const void *input_x(const problem *p)
{
    return p->single ? (const void *)p->x32 : (const void *)p->x;
}

/* Element i of y as a double (exact for a float). */
static double element_of(const problem *p, const void *y, size_t i)
{
    return p->single ? (double)((const float *)y)[i]
                     : ((const double *)y)[i];
}

/* Fails unless y (m numbers of the problem's precision) is right within
 * the bound, with the comparison's words and, for a NaN, a word on it. */
static void expect_right(const problem *p, const void *y, const char *what,
                         const char *hint)
{
    double *got = checked_malloc(p->m * sizeof(double));
    for (size_t i = 0; i < p->m; i++)
        got[i] = element_of(p, y, i);
    comparison_t c = compare_within(p->expected, got, p->bound, p->m);
    free(got);
    if (comparison_ok(&c))
        return;
    char text[512];
    comparison_describe(&c, "y", text, sizeof text);
    if (isnan(c.got))
        ck_abort_msg("%s: %s. Hint: y[%zu] is NaN: it was never written (the "
                     "test fills y with NaN first), or its sum read a NaN "
                     "from outside A or x. %s", what, text, c.first, hint);
    ck_abort_msg("%s: %s. Hint: %s", what, text, hint);
}

/* ---- Running the producer ------------------------------------------------ */

/* The text after the producer's last MATVEC04_FAILED_WORDS, to the end of
 * its line, into `reason`; "" when there is none. */
static void failure_reason(const char *err, char *reason, size_t len)
{
    const char *last = NULL;
    for (const char *at = strstr(err, MATVEC04_FAILED_WORDS); at != NULL;
         at = strstr(at + 1, MATVEC04_FAILED_WORDS))
        last = at;
    reason[0] = '\0';
    if (last == NULL)
        return;
    last += strlen(MATVEC04_FAILED_WORDS);
    size_t n = strcspn(last, "\n");
    snprintf(reason, len, "%.*s", (int)(n < len ? n : len - 1), last);
}

/* Fails unless the student's call returned 0 (the producer's status). */
static void expect_status_zero(const char *dir, const char *what,
                               const char *call)
{
    int status;
    harness_read_output(dir, "status", &status, sizeof status, 1);
    ck_assert_msg(status == 0, "%s: %s%sreturned %d, not 0, for a kernel and "
                  "a shape it must take", what, call ? call : "",
                  call ? " " : "", status);
}

/* Writes p's inputs (as the kernel gets them) into `dir`, runs the
 * producer's `case_name` on them with `kernel`, and fails the test unless
 * the producer ran to its end: first on the status the student's `call`
 * returned (NULL: `what` names it), then on a kernel that failed on the
 * GPU (the producer's MATVEC04_KERNEL_FAILED), then as
 * harness_expect_success says (not started, no answer in time, a crash, a
 * failed CUDA call). On success the outputs are in `dir`. */
static void produce_case(const problem *p, const char *dir,
                         const char *case_name, int kernel, int limit_s,
                         const char *what, const char *call,
                         const char *hint)
{
    harness_write_input(dir, "A", input_A(p), p->element, p->m * p->n);
    harness_write_input(dir, "x", input_x(p), p->element, p->n);
    char args[96];
    snprintf(args, sizeof args, "%d %zu %zu", kernel, p->m, p->n);
    run_result r = harness_produce(lesson, case_name, dir, args, NULL,
                                   limit_s);
    if (r.started && !r.timed_out && r.signal == 0 && !r.supervisor_lost &&
        r.exit_status == MATVEC04_KERNEL_FAILED &&
        strstr(r.err, "not started: ") == NULL) {
        /* The producer writes the status before it waits for the kernel. */
        expect_status_zero(dir, what, call);
        char reason[400];
        failure_reason(r.err, reason, sizeof reason);
        ck_abort_msg("%s: the kernel failed on the GPU: %s. Hint: an index "
                     "outside A, x or y? %s", what,
                     reason[0] ? reason : "(the producer did not say why)",
                     hint);
    }
    char run_what[400];
    snprintf(run_what, sizeof run_what, "%s%s%s", call ? call : "",
             call ? " on " : "", what);
    harness_expect_success(&r, run_what);
    run_result_free(&r);
    expect_status_zero(dir, what, call);
}

/* Fails unless the producer's `name` (A_after or x_after: what it read
 * back after the call) holds exactly `input`, `count` numbers of the
 * problem's precision. */
static void expect_unchanged(const problem *p, const char *dir,
                             const char *name, const void *input,
                             size_t count, const char *message)
{
    unsigned char *back = checked_malloc(count * p->element);
    harness_read_output(dir, name, back, p->element, count);
    ck_assert_msg(memcmp(back, input, count * p->element) == 0, "%s",
                  message);
    free(back);
}

/* ---- TODO 2-7: each kernel on device memory ------------------------------ */

/* Test _i: kernel _i / (2 * shape_count), float when (_i / shape_count) is
 * odd, shape _i % shape_count.
 *
 * The producer puts A and x on the device itself and calls
 * matvec_device_*, so each kernel is tested on its own, whatever TODO 1
 * does. y on the device is followed by GUARD more elements, and every byte
 * of both is 0xFF first: all bits set is a NaN in float and in double, so
 * an element of y that the kernel never writes fails, and so does a write
 * past its end. The producer sends back all of them, and A and x as the
 * device held them after the kernel. */
START_TEST(kernel_case)
{
    char why[256];
    if (cuda_devices_available(why, sizeof why) == 0)
        HARNESS_SKIP("%s", why);
    const kernel_info *k = &kernels[_i / (2 * shape_count)];
    const bool single = (_i / shape_count) % 2 == 1;
    const shape *s = &shapes[_i % shape_count];
    char what[256], hint[1024];
    snprintf(what, sizeof what, "%s, %s, A is %zu x %zu (%s)", k->name,
             single ? "float" : "double", s->m, s->n, s->why);
    snprintf(hint, sizeof hint, "%s%s", k->hint, single ? "; and TODO 7, "
             "the float entry points" : "");

    problem p = problem_make(s->m, s->n, single);
    const size_t bytes_y = (s->m + GUARD) * p.element;
    char dir[HARNESS_PATH];
    harness_out_dir(dir);
    produce_case(&p, dir, single ? "device_float" : "device_double",
                 k->kernel, produce_limit(s), what,
                 single ? "matvec_device_float" : "matvec_device_double",
                 hint);

    unsigned char *y = checked_malloc(bytes_y);
    harness_read_output(dir, "y", y, p.element, s->m + GUARD);
    size_t b = s->m * p.element;
    while (b < bytes_y && y[b] == 0xFF)
        b++;
    ck_assert_msg(b == bytes_y, "%s: the kernel wrote past the end of y, into "
                  "element y[%zu] (y has m = %zu elements): a thread or warp "
                  "without a row of its own stored a result. Hint: %s", what,
                  b / p.element, s->m, hint);
    expect_right(&p, y, what, hint);

    /* A and x must come back as they went: a kernel only reads them. */
    char message[400];
    snprintf(message, sizeof message, "%s: the kernel changed A on the "
             "device: it must only read A", what);
    expect_unchanged(&p, dir, "A_after", input_A(&p), s->m * s->n, message);
    snprintf(message, sizeof message, "%s: the kernel changed x on the "
             "device: it must only read x", what);
    expect_unchanged(&p, dir, "x_after", input_x(&p), s->n, message);

    free(y);
    harness_remove_out_dir(dir);
    problem_free(&p);
}
END_TEST

/* ---- TODO 1: the copies to the device and back --------------------------- */

/* Test _i: double for _i < transfer_count, then float; the shape
 * _i % transfer_count. Here the student's matvec_gpu_* does everything:
 * y in host memory starts as NaN (the producer fills it), so a y that
 * never comes back fails. */
START_TEST(transfers_case)
{
    char why[256];
    if (cuda_devices_available(why, sizeof why) == 0)
        HARNESS_SKIP("%s", why);
    const bool single = _i >= transfer_count;
    const shape *s = &transfer_shapes[_i % transfer_count];
    char what[256];
    snprintf(what, sizeof what, "matvec_gpu_%s, A is %zu x %zu (%s), thread "
             "per row", single ? "float" : "double", s->m, s->n, s->why);
    const char *hint = single
        ? "TODO 1: room on the device for A (m*n elements), x (n) and y (m), "
          "counted in bytes (elements * sizeof(T)); A and x copied to the "
          "device before the kernel runs, y copied back after it; then "
          "every buffer freed. And TODO 7, the float entry points. (This "
          "test runs your TODO 2 kernel: if its tests fail too, start "
          "there.)"
        : "TODO 1: room on the device for A (m*n elements), x (n) and y (m), "
          "counted in bytes (elements * sizeof(T)); A and x copied to the "
          "device before the kernel runs, y copied back after it; then "
          "every buffer freed. (This test runs your TODO 2 kernel: if its "
          "tests fail too, start there.)";

    problem p = problem_make(s->m, s->n, single);
    char dir[HARNESS_PATH];
    harness_out_dir(dir);
    produce_case(&p, dir, single ? "gpu_float" : "gpu_double",
                 MATVEC_THREAD_PER_ROW, produce_limit(s), what, NULL, hint);

    void *y = checked_malloc(s->m * p.element);
    harness_read_output(dir, "y", y, p.element, s->m);
    expect_right(&p, y, what, hint);
    /* The producer sends back A and x in host memory as the call left
     * them, to prove that it left them alone. */
    char message[400];
    snprintf(message, sizeof message, "%s: A in host memory changed: the "
             "copies go from A to the device and from the device to y, "
             "never into A", what);
    expect_unchanged(&p, dir, "A_after", input_A(&p), s->m * s->n, message);
    snprintf(message, sizeof message, "%s: x in host memory changed: the "
             "copies go from x to the device, never into x", what);
    expect_unchanged(&p, dir, "x_after", input_x(&p), s->n, message);

    free(y);
    harness_remove_out_dir(dir);
    problem_free(&p);
}
END_TEST

/* ---- The driver under compute-sanitizer ---------------------------------- */

/* compute-sanitizer's path in `path`: on PATH, else in the CUDA toolkit's
 * usual places. False when there is none. */
static bool find_sanitizer(char *path, size_t len)
{
    const char *search = getenv("PATH");
    char dirs[8192];
    snprintf(dirs, sizeof dirs, "%s:%s%s:/usr/local/cuda/bin",
             search ? search : "", getenv("CUDA_HOME") ? getenv("CUDA_HOME")
             : "/usr/local/cuda", "/bin");
    for (char *dir = strtok(dirs, ":"); dir != NULL; dir = strtok(NULL, ":")) {
        if (dir[0] == '\0')
            continue;
        snprintf(path, len, "%s/compute-sanitizer", dir);
        if (access(path, X_OK) == 0)
            return true;
    }
    return false;
}

/* The first error compute-sanitizer reported: its "=========" lines after
 * the banner, up to the first blank one, prefixes removed. */
static void first_error(const char *text, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    const char *at = strstr(text, "========= ");
    bool started = false;
    while (at != NULL && used + 1 < len) {
        const char *line = at + 10;
        size_t n = strcspn(line, "\n");
        bool banner = strncmp(line, "COMPUTE-SANITIZER", 17) == 0 ||
                      strncmp(line, "ERROR SUMMARY", 13) == 0;
        bool blank = strspn(line, " ") == n;
        if (started && blank)
            break;
        if (!banner && !blank) {
            started = true;
            size_t skip = strspn(line, " ");
            used += (size_t)snprintf(out + used, len - used, "%s%.*s",
                                     used ? "; " : "", (int)(n - skip),
                                     line + skip);
        }
        at = strstr(line + n, "========= ");
    }
}

static const char *const sanitized_precisions[] = { "double", "float" };
enum { sanitized_count = 2 };

/* The driver checks every kernel through matvec_gpu_* (TODO 1-7), then
 * times them, on a ragged shape; memcheck watches every access the GPU
 * makes, including those that land inside some allocation by luck and so
 * show in no result. */
START_TEST(sanitizer_case)
{
    char why[256] = "", sanitizer[4096];
    bool device = cuda_devices_available(why, sizeof why) > 0;
    bool found = find_sanitizer(sanitizer, sizeof sanitizer);
    if (!device || !found)
        HARNESS_SKIP("%s%s%s", device ? "" : why, !device && !found ? "; "
                     : "", found ? "" : "compute-sanitizer is not installed "
                     "(not on PATH, nor in $CUDA_HOME/bin or "
                     "/usr/local/cuda/bin)");
    const char *precision = sanitized_precisions[_i];
    char what[128];
    snprintf(what, sizeof what, "cuda_matvec --precision %s under "
             "compute-sanitizer", precision);
    char *argv[] = { sanitizer, "--tool", "memcheck",
                     (char *)harness_program("04-cuda-matvec", "cuda_matvec"),
                     "--m", "37", "--n", "45", "--reps", "1", "--precision",
                     (char *)precision, NULL };

    run_result r = harness_run(argv, NULL, SANITIZER_RUN_S);
    const char *summary_out = strstr(r.out, "ERROR SUMMARY: ");
    const char *summary = summary_out ? summary_out
                                      : strstr(r.err, "ERROR SUMMARY: ");
    unsigned long errors = 0;
    if (summary != NULL && sscanf(summary, "ERROR SUMMARY: %lu", &errors) == 1
        && errors > 0) {
        char first[600];
        first_error(summary_out ? r.out : r.err, first, sizeof first);
        ck_abort_msg("%s: memcheck found %lu memory error%s; the first: %s. "
                     "Hint: an access outside A, x or y: the bounds checks "
                     "of TODO 2-5 (threads and warps past the last row), the "
                     "ragged ends of TODO 4, the last tile of TODO 5, or the "
                     "byte counts of TODO 1", what, errors,
                     errors == 1 ? "" : "s", first);
    }
    harness_expect_success(&r, what);
    ck_assert_msg(summary != NULL && errors == 0, "%s: compute-sanitizer "
                  "printed no \"ERROR SUMMARY: 0 errors\"", what);
    run_result_free(&r);
}
END_TEST

Suite *lesson_suite(void)
{
    static char transfer_names[2 * transfer_count][160];
    static char kernel_names[kernel_count * 2 * shape_count][200];
    static char sanitizer_names[sanitized_count][160];
    Suite *suite = suite_create("04-cuda-matvec");
    for (int k = 0; k < 2 * transfer_count; k++) {
        const shape *s = &transfer_shapes[k % transfer_count];
        snprintf(transfer_names[k], sizeof transfer_names[k], "transfers, "
                 "%s, %zu x %zu: A and x to the device, y back (%s)",
                 k < transfer_count ? "double" : "float", s->m, s->n, s->why);
        harness_add(suite, transfer_names[k], transfers_case, k,
                    check_limit(s));
    }
    for (int k = 0; k < kernel_count * 2 * shape_count; k++) {
        const shape *s = &shapes[k % shape_count];
        snprintf(kernel_names[k], sizeof kernel_names[k], "%s, %s, %zu x "
                 "%zu: %s", kernels[k / (2 * shape_count)].name,
                 (k / shape_count) % 2 ? "float" : "double", s->m, s->n,
                 s->why);
        harness_add(suite, kernel_names[k], kernel_case, k, check_limit(s));
    }
    for (int k = 0; k < sanitized_count; k++) {
        snprintf(sanitizer_names[k], sizeof sanitizer_names[k],
                 "compute-sanitizer memcheck, %s: the driver on 37 x 45, no "
                 "memory errors", sanitized_precisions[k]);
        harness_add(suite, sanitizer_names[k], sanitizer_case, k,
                    CHECK_SANITIZER_S);
    }
    return suite;
}
