/* The given programs refuse bad input the same way: one line saying what is
 * wrong, a usage line, exit status 2, no crash; under MPI every rank exits
 * and the message appears once. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "memory_ledger.h"
#include "mlp.h"

typedef struct {
    const char *lesson, *program;
    const char *args[4];
    const char *says;   /* what the error line must contain */
} bad_input;

static const bad_input cases[] = {
    { "01-serial-matvec", "matvec", { "--m", "abc" }, "--m needs a whole number, got 'abc'" },
    { "01-serial-matvec", "matvec", { "--m", "-5" }, "--m needs a whole number, got '-5'" },
    { "01-serial-matvec", "matvec", { "--n", "0" }, "--n must be from 1 to" },
    { "01-serial-matvec", "matvec", { "--m", "99999999999999999999999" }, "--m needs a whole number" },
    { "01-serial-matvec", "matvec", { "--m", "1073741824", "--n", "1073741824" }, "cannot allocate 8.0 EiB for A" },
    { "01-serial-matvec", "matvec", { "--m", "1000000", "--n", "1000000" }, "cannot allocate 7.3 TiB for A" },
    { "01-serial-matvec", "matvec", { "--reps", "1.5" }, "--reps needs a whole number" },
    { "01-serial-matvec", "matvec", { "--seed" }, "--seed needs a value" },
    { "01-serial-matvec", "matvec", { "--size", "10" }, "unknown flag '--size'" },
    { "01-serial-matvec", "matvec", { "4096" }, "unexpected argument '4096'" },
    { "00-setup", "stream", { "--n", "0" }, "--n must be from 1 to" },
    { "00-setup", "stream", { "--reps", "65" }, "--reps must be from 1 to 64" },
    { "00-setup", "stream", { "--fast" }, "unknown flag '--fast'" },
    { "00-setup", "hello_omp", { "--bogus" }, "hello_omp: unknown flag '--bogus'" },
    { "00-setup", "hello_omp", { "--threads=4" }, "hello_omp: unknown flag '--threads'" },
    { "00-setup", "hello_omp", { "4" }, "hello_omp: unexpected argument '4'" },
    { "04-cuda-matvec", "cuda_matvec", { "--precision", "half" }, "cuda_matvec: --precision must be float or double, got 'half'" },
    { "04-cuda-matvec", "cuda_matvec", { "--n", "8388609" }, "cuda_matvec: --n must be from 1 to 8388608" },
    { "04-cuda-matvec", "cuda_matvec", { "--precision" }, "cuda_matvec: --precision needs a value" },
    { "03-openmp", "openmp", { "--threads", "0" }, "--threads must be from 1 to 256" },
    { "03-openmp", "openmp", { "--threads", "1024" }, "--threads must be from 1 to 256, got '1024'" },
    { "03-openmp", "openmp", { "--reps", "x" }, "--reps needs a whole number" },
    { "06-zero", "memory_calculator", { "--params", "1.5" }, "memory_calculator: --params needs a whole count of parameters" },
    { "06-zero", "memory_calculator", { "--params", "7.5Q" }, "memory_calculator: --params needs a whole count of parameters" },
    { "06-zero", "memory_calculator", { "--ranks", "1,0" }, "memory_calculator: --ranks needs a list" },
    { "06-zero", "memory_calculator", { "--precision", "fp8" }, "memory_calculator: --precision must be fp16, bf16 or fp32, got 'fp8'" },
    { "06-zero", "memory_calculator", { "--k", "2000" }, "memory_calculator: --k must be from 0 to 1024" },
    { "06-zero", "memory_calculator", { "--offload=dpu" }, "memory_calculator: --offload takes no value" },
    { "06-zero", "memory_calculator", { "--mlp", "2,0,32" }, "memory_calculator: --mlp needs HIDDEN,WIDTH,BATCH" },
    { "06-zero", "memory_calculator", { "--tp", "2,0" }, "memory_calculator: --tp needs a list" },
    { "06-zero", "memory_calculator", { "--pipeline", "2" }, "memory_calculator: --pipeline needs --mlp" },
    { "06-zero", "memory_calculator", { "--mlp=3,128,32", "--pipeline=5" }, "memory_calculator: --pipeline needs --mlp, a --schedule of gpipe, 1f1b or interleaved (--chunks only with interleaved), no more stages times chunks than layers" },
    { "06-zero", "memory_calculator", { "--tp", "2,4" }, "memory_calculator: --tp with the ZeRO tables takes one t, got '2,4'" },
    { "06-zero", "memory_calculator", { "--mlp", "3,64,8", "--parallel-loss" }, "memory_calculator: --parallel-loss is for --mlp with an even number of hidden layers" },
    { "06-zero", "memory_calculator", { "--transformer", "2048,1,12288" }, "memory_calculator: --transformer needs S,B,H,A" },
    { "06-zero", "memory_calculator", { "--plan", "--params", "100B" }, "memory_calculator: --plan needs --transformer S,B,H,A" },
    { "06-zero", "memory_calculator", { "--plan", "--transformer=2048,1,10240,80", "--schedule=interleaved" }, "memory_calculator: --plan needs --transformer S,B,H,A (its micro-batch's shape), a --schedule of gpipe or 1f1b" },
    { "06-zero", "memory_calculator", { "--plan", "--devices", "0" }, "memory_calculator: --devices must be from 1 to 65536" },
};
enum { case_count = sizeof cases / sizeof cases[0] };

static void describe(char *buf, size_t len, const bad_input *c)
{
    int used = snprintf(buf, len, "%s", c->program);
    for (int k = 0; k < 4 && c->args[k] != NULL; k++)
        used += snprintf(buf + used, len - (size_t)used, " %s", c->args[k]);
}

/* Error output must be exactly: "PROGRAM: ..." then "usage: ..."; or, for
 * sizes that cannot be allocated, the one "error: ..." line. */
static void expect_one_error(const run_result *r, const char *what,
                             const char *program, const char *says)
{
    ck_assert_msg(!r->timed_out && r->signal == 0, "%s: crashed or hung", what);
    ck_assert_msg(r->exit_status == 2, "%s: exit status %d, expected 2; "
                  "stderr: %s", what, r->exit_status, r->err);
    ck_assert_msg(strstr(r->err, says) != NULL, "%s: error output lacks "
                  "\"%s\": %s", what, says, r->err);
    /* Under AddressSanitizer a refused allocation adds a warning line of
     * its own ("==PID==WARNING: ..."); that line is the sanitizer's. */
    const char *err = r->err;
    while (strncmp(err, "==", 2) == 0 && strchr(err, '\n') != NULL)
        err = strchr(err, '\n') + 1;
    const char *second = strchr(err, '\n');
    ck_assert_msg(second != NULL, "%s: error does not end its line", what);
    if (strncmp(err, "error: ", 7) == 0) {
        ck_assert_msg(second[1] == '\0', "%s: more than one line: %s", what,
                      r->err);
        return;
    }
    ck_assert_msg(strncmp(err, program, strlen(program)) == 0,
                  "%s: the error should start with the program's name: %s",
                  what, r->err);
    ck_assert_msg(strncmp(second + 1, "usage: ", 7) == 0, "%s: no usage line "
                  "after the error: %s", what, r->err);
    ck_assert_msg(strchr(second + 1, '\n')[1] == '\0', "%s: more than two "
                  "lines: %s", what, r->err);
}

/* Lesson 04 is built only where nvcc is; its bad input is refused before
 * any CUDA call, so wherever it is built these cases run, GPU or not. */
static void skip_unless_built(const char *lesson, const char *program)
{
    if (strcmp(lesson, "04-cuda-matvec") == 0 && access(program, X_OK) != 0)
        HARNESS_SKIP("%s is not built here (no nvcc)", program);
}

START_TEST(driver_rejects_bad_input)
{
    const bad_input *c = &cases[_i];
    char what[256];
    char *argv[8] = { (char *)harness_program(c->lesson, c->program) };
    skip_unless_built(c->lesson, argv[0]);
    for (int k = 0; k < 4 && c->args[k] != NULL; k++)
        argv[k + 1] = (char *)c->args[k];
    describe(what, sizeof what, c);
    run_result r = harness_run(argv, NULL, 20);
    expect_one_error(&r, what, c->program, c->says);
    run_result_free(&r);
}
END_TEST

START_TEST(driver_help_exits_0)
{
    char *argv[] = { (char *)harness_program("01-serial-matvec", "matvec"),
                     "--help", NULL };
    run_result r = harness_run(argv, NULL, 20);
    ck_assert_int_eq(r.exit_status, 0);
    ck_assert_msg(strstr(r.out, "usage: matvec [--m N] [--n N] [--seed N] "
                         "[--reps N]") != NULL, "help: %s", r.out);
    run_result_free(&r);
}
END_TEST

START_TEST(hello_omp_help_exits_0)
{
    char *argv[] = { (char *)harness_program("00-setup", "hello_omp"),
                     "--help", NULL };
    run_result r = harness_run(argv, NULL, 20);
    ck_assert_msg(r.exit_status == 0 && !r.timed_out && r.signal == 0,
                  "hello_omp --help: exit status %d: %s", r.exit_status,
                  r.err);
    ck_assert_msg(strstr(r.out, "usage: hello_omp [--help]\n") != NULL,
                  "help: %s", r.out);
    run_result_free(&r);
}
END_TEST

/* Under MPI: every rank sees the same bad flag, all exit 2, rank 0 alone
 * says so, and nothing hangs. mpirun adds its own report of the exit status
 * after the program's lines, so here the test counts the program's lines
 * instead of all lines. */
START_TEST(pingpong_bad_flag_ends_every_rank)
{
    char *args[] = { "--reps", "zero", NULL };
    run_result r = harness_run_mpi("00-setup", "pingpong", 2, args, NULL, 30);
    ck_assert_msg(!r.timed_out && r.signal == 0, "pingpong hung or crashed");
    ck_assert_msg(r.exit_status == 2, "exit status %d, expected 2: %s",
                  r.exit_status, r.err);
    ck_assert_msg(harness_occurrences(r.err, "pingpong: --reps needs a whole number, "
                              "got 'zero'\nusage: pingpong") == 1,
                  "the error and usage should appear once, from rank 0: %s",
                  r.err);
    run_result_free(&r);
}
END_TEST

/* hello_mpi takes no flags. The check runs before the student's code (it
 * is given), so it holds for the untouched skeleton too. */
START_TEST(hello_mpi_flag_ends_every_rank)
{
    char *args[] = { "--ranks", "4", NULL };
    run_result r = harness_run_mpi("00-setup", "hello_mpi", 2, args, NULL, 30);
    ck_assert_msg(!r.timed_out && r.signal == 0, "hello_mpi hung or crashed");
    ck_assert_msg(r.exit_status == 2, "exit status %d, expected 2: %s",
                  r.exit_status, r.err);
    ck_assert_msg(harness_occurrences(r.err, "hello_mpi: unknown flag '--ranks'\n"
                              "usage: hello_mpi [--help]\n") == 1,
                  "the error and usage should appear once, from rank 0: %s",
                  r.err);
    ck_assert_msg(strstr(r.out, "hello from") == NULL, "hello_mpi greeted "
                  "despite the bad flag: %s", r.out);
    run_result_free(&r);
}
END_TEST

START_TEST(hello_mpi_help_exits_0)
{
    char *args[] = { "--help", NULL };
    run_result r = harness_run_mpi("00-setup", "hello_mpi", 2, args, NULL, 30);
    ck_assert_msg(!r.timed_out && r.signal == 0, "hello_mpi hung or crashed");
    ck_assert_msg(r.exit_status == 0, "exit status %d, expected 0: %s",
                  r.exit_status, r.err);
    ck_assert_msg(harness_occurrences(r.out, "usage: hello_mpi [--help]\n") == 1,
                  "the help should appear once, from rank 0: %s", r.out);
    run_result_free(&r);
}
END_TEST

START_TEST(pingpong_wrong_rank_count_ends_every_rank)
{
    run_result r = harness_run_mpi("00-setup", "pingpong", 3, NULL, NULL, 30);
    ck_assert_msg(!r.timed_out, "pingpong on 3 ranks hung");
    ck_assert_msg(r.exit_status == 2, "exit status %d, expected 2: %s",
                  r.exit_status, r.err);
    ck_assert_msg(strstr(r.err, "needs exactly 2 ranks, got 3") != NULL,
                  "%s", r.err);
    run_result_free(&r);
}
END_TEST

START_TEST(pingpong_measures)
{
    char *args[] = { "--max-bytes", "65536", "--reps", "10", NULL };
    run_result r = harness_run_mpi("00-setup", "pingpong", 2, args, NULL, 30);
    harness_expect_success(&r, "pingpong");
    double latency = 0, bandwidth = 0;
    const char *summary = strstr(r.out, "summary: ");
    ck_assert_msg(summary != NULL && sscanf(summary, "summary: latency_us=%lf "
                  "bandwidth_gbs=%lf", &latency, &bandwidth) == 2,
                  "no summary line: %s", r.out);
    ck_assert_msg(latency > 0 && bandwidth > 0, "latency %g us, bandwidth %g "
                  "GB/s", latency, bandwidth);
    run_result_free(&r);
}
END_TEST

/* Lesson 02's driver under mpirun: bad input ends every rank with status
 * 2, the message once. */
static const struct {
    int ranks;
    const char *args[4];
    const char *says;
} mpi_cases[] = {
    { 4, { "--m", "3" }, "matvec_mpi: more ranks (4) than rows (3)" },
    { 3, { "--n", "2", "--columns" }, "matvec_mpi: more ranks (3) than columns (2)" },
    { 2, { "--m", "0" }, "matvec_mpi: --m must be from 1 to" },
    { 2, { "--n", "-1" }, "matvec_mpi: --n needs a whole number, got '-1'" },
    { 2, { "--rows", "5" }, "matvec_mpi: unknown flag '--rows'" },
    { 2, { "--out", "" }, "matvec_mpi: --out needs a value" },
    { 2, { "--out", "/nonexistent/folder" }, "matvec_mpi: --out: cannot write to '/nonexistent/folder'" },
};
/* The same for lesson 03's hybrid program and the programs of lessons
 * 05-07 (lesson 06's refusals come before any of the student's code runs:
 * a cap too small even for stage 3 is judged by the formulas; lesson 07's
 * device is opened, and its activations allocated, before any of it). */
static const struct {
    const char *lesson, *program;
    const char *args[3];
    const char *says;
} other_mpi_cases[] = {
    { "03-openmp", "hybrid", { "--m", "0" }, "hybrid: --m must be from 1 to" },
    { "03-openmp", "hybrid", { "--bogus" }, "hybrid: unknown flag '--bogus'" },
    { "05-data-parallel", "train", { "--steps", "0" }, "train: --steps must be from 1 to" },
    { "05-data-parallel", "train", { "--optimizer", "lbfgs" }, "train: --optimizer must be adamw or sgd" },
    { "05-data-parallel", "train", { "--mnist-images", "/nonexistent" }, "train: --mnist-images and --mnist-labels go together" },
    { "05-data-parallel", "train", { "--allreduce", "tree" }, "train: --allreduce must be mpi, ring or overlap" },
    { "05-data-parallel", "ring_check", { "--counts", "1,x" }, "ring_check: --counts needs lengths" },
    { "05-data-parallel", "train", { "--mnist-images=/nonexistent/images", "--mnist-labels=/nonexistent/labels" }, "train: cannot open images file '/nonexistent/images'" },
    { "06-zero", "train_zero", { "--stage", "4" }, "train_zero: --stage must be from 0 to 3, got '4'" },
    { "06-zero", "train_zero", { "--width", "0" }, "train_zero: --width must be from 1 to" },
    { "06-zero", "train_zero", { "--prefetch" }, "train_zero: --prefetch is for stage 3" },
    { "06-zero", "train_zero", { "--find-batch" }, "train_zero: --find-batch needs --memory-cap" },
    { "06-zero", "train_zero", { "--memory-cap", "100000" }, "train_zero: --memory-cap 100000 bytes is too small even for stage 3 on 2 ranks" },
    { "07-offload", "train_offload", { "--device-memory", "0" }, "train_offload: --device-memory must be from 1 to" },
    { "07-offload", "train_offload", { "--device-memory", "999999999999999" }, "train_offload: --device-memory 999999999999999 bytes is more than this machine's memory" },
    { "07-offload", "train_offload", { "--backend", "gpu" }, "train_offload: unknown backend 'gpu': say cpu or cuda" },
    { "07-offload", "train_offload", { "--backend", "cuda" }, "train_offload: cuda: " },
    { "07-offload", "train_offload", { "--no-offload", "--dpu=2" }, "train_offload: --dpu delays the host's update: it needs offload" },
    { "07-offload", "train_offload", { "--device-memory", "1000" }, "train_offload: the activations do not fit the device: rank 0: device out of memory: asked " },
    { "08-tensor-parallel", "train_tp", { "--tp", "3" }, "train_tp: --tp 3 does not divide the 2 ranks" },
    { "08-tensor-parallel", "train_tp", { "--width", "0" }, "train_tp: --width must be from 1 to" },
    { "08-tensor-parallel", "train_tp", { "--classes", "1" }, "train_tp: --classes must be from 2 to" },
    { "08-tensor-parallel", "train_tp", { "--hidden", "17" }, "train_tp: --hidden 17: at most 16 hidden layers" },
    { "08-tensor-parallel", "train_tp", { "--sequence-parallel", "--local-batch=3" }, "train_tp: --sequence-parallel splits the batch's rows among the t ranks: --local-batch 3 is not a multiple of 2" },
    { "08-tensor-parallel", "train_tp", { "--parallel-loss", "--hidden=3" }, "train_tp: --parallel-loss splits the output layer by class: it must be the layer left over after the pairs, so an even --hidden (got 3)" },
    { "09-pipeline-parallel", "train_pp", { "--hidden", "0" }, "train_pp: 2 stages of 1 chunk need 2 layers at least; the model has 1 (--hidden 0)" },
    { "09-pipeline-parallel", "train_pp", { "--micro-batches", "0" }, "train_pp: --micro-batches must be from 1 to" },
    { "09-pipeline-parallel", "train_pp", { "--micro-batches", "3" }, "train_pp: --local-batch 32 is not a multiple of --micro-batches 3" },
    { "09-pipeline-parallel", "train_pp", { "--chunks", "2" }, "train_pp: --chunks 2 is for --schedule interleaved" },
    { "09-pipeline-parallel", "train_pp", { "--schedule", "zigzag" }, "train_pp: --schedule zigzag: gpipe, 1f1b or interleaved" },
    { "09-pipeline-parallel", "train_pp", { "--stages", "3" }, "train_pp: --stages 3: a pipeline of every rank, so 2 here" },
    { "09-pipeline-parallel", "train_pp", { "--schedule=interleaved", "--micro-batches=1" }, "train_pp: --schedule interleaved takes micro-batches in groups of the stages: --micro-batches 1 is not a multiple of 2" },
};
enum { other_mpi_case_count = sizeof other_mpi_cases / sizeof other_mpi_cases[0] };
enum { mpi_case_count = sizeof mpi_cases / sizeof mpi_cases[0] };

START_TEST(mpi_driver_rejects_bad_input)
{
    char *args[5] = { NULL };
    for (int k = 0; k < 4 && mpi_cases[_i].args[k] != NULL; k++)
        args[k] = (char *)mpi_cases[_i].args[k];
    run_result r = harness_run_mpi("02-mpi-matvec", "matvec_mpi",
                                   mpi_cases[_i].ranks, args, NULL, 30);
    ck_assert_msg(!r.timed_out && r.signal == 0, "matvec_mpi hung or crashed");
    ck_assert_msg(r.exit_status == 2, "exit status %d, expected 2: %s",
                  r.exit_status, r.err);
    ck_assert_msg(harness_occurrences(r.err, mpi_cases[_i].says) == 1, "expected "
                  "\"%s\" once, from rank 0: %s", mpi_cases[_i].says, r.err);
    run_result_free(&r);
}
END_TEST

START_TEST(other_mpi_rejects_bad_input)
{
    char *args[3] = { NULL };
    for (int k = 0; k < 2 && other_mpi_cases[_i].args[k] != NULL; k++)
        args[k] = (char *)other_mpi_cases[_i].args[k];
    run_result r = harness_run_mpi(other_mpi_cases[_i].lesson,
                                   other_mpi_cases[_i].program, 2, args, NULL,
                                   30);
    ck_assert_msg(!r.timed_out && r.signal == 0, "%s hung or crashed",
                  other_mpi_cases[_i].program);
    ck_assert_msg(r.exit_status == 2, "exit status %d, expected 2: %s",
                  r.exit_status, r.err);
    ck_assert_msg(harness_occurrences(r.err, other_mpi_cases[_i].says) == 1,
                  "expected \"%s\" once, from rank 0: %s",
                  other_mpi_cases[_i].says, r.err);
    run_result_free(&r);
}
END_TEST

/* Lesson 06's --find-batch on 2 ranks, a model of 3 hidden layers of 192
 * under a cap of 1.5 MB a rank: each stage's row must give the stage's
 * model state and buffers by the formulas, and the largest local batch
 * whose bytes fit the cap (one sample more must not), or "none" when not
 * even one sample fits. The formulas are written out here: the model state
 * by the ZeRO paper with rank 0's block of the partition, a gradient
 * bucket of the largest layer (stages 2-3) and a gathered one (stage 3),
 * the collectives' 2(P-1) fp32 slots; the activations a batch holds are
 * what the model (common/mlp.h, tested on its own) allocates for it, plus
 * its inputs. The samples per second are printed, never judged. */
enum { FIND_RANKS = 2, FIND_HIDDEN = 3, FIND_WIDTH = 192,
       FIND_FEATURES = 64, FIND_CLASSES = 10, FIND_CHUNK = 8192 };
static const uint64_t find_cap = 1500000;

/* Bytes the model allocates for local batches of `batch`, and their
 * inputs (the training loop's buffer, batch x features floats). */
static uint64_t activation_bytes(size_t batch)
{
    const mlp_config shape = { FIND_FEATURES, FIND_CLASSES, FIND_HIDDEN,
                               FIND_WIDTH, ACTIVATION_RELU };
    mlp model;
    char error[256];
    size_t before = memory_ledger_current_total();
    ck_assert_msg(mlp_create_without_storage(&model, &shape, batch, error,
                                             sizeof error) == 0, "%s", error);
    uint64_t bytes = memory_ledger_current_total() - before;
    mlp_free(&model);
    return bytes + (uint64_t)batch * FIND_FEATURES * sizeof(float);
}

START_TEST(find_batch_fits_the_cap)
{
    /* Ψ and the largest layer, layer by layer: W (out x in) and b (out). */
    const uint64_t sizes[] = { FIND_FEATURES, FIND_WIDTH, FIND_WIDTH,
                               FIND_WIDTH, FIND_CLASSES };
    uint64_t psi = 0, largest = 0;
    for (int l = 0; l < FIND_HIDDEN + 1; l++) {
        uint64_t layer = sizes[l] * sizes[l + 1] + sizes[l + 1];
        psi += layer;
        largest = layer > largest ? layer : largest;
    }
    const uint64_t own = (psi + FIND_RANKS - 1) / FIND_RANKS;   /* rank 0 */
    const uint64_t slot = own < FIND_CHUNK ? own : FIND_CHUNK;
    char *args[] = { "--find-batch", "--memory-cap", "1500000", "--hidden",
                     "3", "--width", "192", NULL };
    run_result r = harness_run_mpi("06-zero", "train_zero", FIND_RANKS, args,
                                   NULL, 60);
    harness_expect_success(&r, "train_zero --find-batch");
    const char *line = strstr(r.out, "  stage |");
    ck_assert_msg(line != NULL, "no table: %s", r.out);
    for (int stage = 0; stage <= 3; stage++) {
        line = strchr(line, '\n');
        ck_assert_msg(line != NULL, "no row for stage %d: %s", stage, r.out);
        line++;
        char row[256];
        snprintf(row, sizeof row, "%.*s", (int)strcspn(line, "\n"), line);
        int got_stage = -1;
        unsigned long long state = 0, buffers = 0, activations = 0,
                           total = 0, batch = 0;
        int fields = sscanf(row, " %d | %llu | %llu | %llu | %llu | %llu",
                            &got_stage, &state, &buffers, &activations,
                            &total, &batch);
        const bool none = fields == 3 && strstr(row, " none |") != NULL;
        ck_assert_msg(got_stage == stage && (fields == 6 || none),
                      "stage %d's row is not \"stage | model state | "
                      "buffers | activations | total | local batch | "
                      "samples/s\": %s", stage, row);
        const uint64_t want_state =
            (stage == 3 ? 2 * own : 2 * psi) + (stage >= 2 ? 2 * own : 2 * psi) +
            (stage >= 1 ? 12 * own : 12 * psi);
        const uint64_t want_buffers = 8 * (FIND_RANKS - 1) * slot +
                                      (stage >= 2 ? 2 * largest : 0) +
                                      (stage == 3 ? 2 * largest : 0);
        ck_assert_msg(state == want_state && buffers == want_buffers,
                      "stage %d: model state %llu and buffers %llu bytes, "
                      "expected %llu and %llu (Ψ = %llu, rank 0's block %llu,"
                      " the largest layer %llu)", stage, state, buffers,
                      (unsigned long long)want_state,
                      (unsigned long long)want_buffers,
                      (unsigned long long)psi, (unsigned long long)own,
                      (unsigned long long)largest);
        const uint64_t fixed = want_state + want_buffers;
        if (none) {
            ck_assert_msg(fixed + activation_bytes(1) > find_cap,
                          "stage %d: \"none\", but one sample needs %llu "
                          "bytes, within the cap %llu", stage,
                          (unsigned long long)(fixed + activation_bytes(1)),
                          (unsigned long long)find_cap);
            continue;
        }
        const uint64_t need = fixed + activation_bytes(batch);
        const uint64_t one_more = fixed + activation_bytes(batch + 1);
        ck_assert_msg(activations == need - fixed && total == need,
                      "stage %d, local batch %llu: activations %llu and total "
                      "%llu bytes, expected %llu and %llu", stage, batch,
                      activations, total,
                      (unsigned long long)(need - fixed),
                      (unsigned long long)need);
        ck_assert_msg(need <= find_cap && one_more > find_cap,
                      "stage %d: local batch %llu needs %llu bytes, %llu "
                      "needs %llu, under a cap of %llu: not the largest "
                      "batch that fits", stage, batch,
                      (unsigned long long)need, batch + 1,
                      (unsigned long long)one_more,
                      (unsigned long long)find_cap);
    }
    run_result_free(&r);
}
END_TEST

/* Lesson 07's driver without offload keeps 16 bytes a parameter on the
 * device: a device that ZeRO-Offload trains on (lesson 07's tests) refuses
 * it at once, on every rank, with the device's line naming what did not
 * fit. 5 hidden layers of 192: Ψ = 162634, 16Ψ = 2.6 MB against 1.1 MB. */
START_TEST(no_offload_refused_on_a_small_device)
{
    char *args[] = { "--hidden", "5", "--width", "192", "--local-batch", "8",
                     "--device-memory", "1100000", "--no-offload", NULL };
    run_result r = harness_run_mpi("07-offload", "train_offload", 2, args,
                                   NULL, 30);
    ck_assert_msg(!r.timed_out && r.signal == 0, "train_offload "
                  "--no-offload on a small device: hung or crashed: %s",
                  r.err);
    ck_assert_msg(r.exit_status == 2, "train_offload --no-offload on a "
                  "device of 1100000 bytes: exit status %d, expected 2: %s",
                  r.exit_status, r.err);
    for (int rank = 0; rank < 2; rank++) {
        char line[160];
        snprintf(line, sizeof line, "train_offload: without offload, the "
                 "model state does not fit the device: rank %d: device out "
                 "of memory: asked ", rank);
        ck_assert_msg(harness_occurrences(r.err, line) == 1, "expected "
                      "\"%s...\" once, from rank %d: %s", line, rank, r.err);
    }
    ck_assert_msg(strstr(r.out, "step ") == NULL, "train_offload "
                  "--no-offload trained before it was refused: %s", r.out);
    run_result_free(&r);
}
END_TEST

/* Lesson 07's driver splits a step's time (its summary line, which
 * bench/bench_07.sh tabulates): the phases forward, backward and update,
 * and inside the update the time in MPI (the communication ledger's
 * clock), the waits for copies (the device layer's) and for the delayed
 * update's task (host_task_wait's), and the CPU Adam. Each is a time, so
 * none is negative; the parts measured inside the update fit inside it;
 * without the delay the CPU Adam is what is left of the update, and no
 * task was waited for. Beyond that, checked only where a clock must have
 * ticked: on 2 ranks the update's allgather (offload) or reduce (without)
 * moves Ψ = 150,794 elements, and a CPU Adam with the delay updates a
 * slice of 75,397, neither of which can take under the 0.5 µs a step
 * that the summary's 0.001 ms rounds to 0 (that would be hundreds of
 * GB/s). Times are never compared with a speed. 2 ranks of 3 hidden
 * layers of 256. */
static const char *const split_keys[] = {
    "forward_ms", "backward_ms", "update_ms", "wait_down_ms", "wait_up_ms",
    "mpi_ms", "adam_ms", "task_wait_ms",
};
enum { split_key_count = sizeof split_keys / sizeof split_keys[0] };

static const struct {
    const char *what;
    const char *args[3];
    bool offload, delayed;
} split_runs[] = {
    { "offload", { NULL }, true, false },
    { "offload --dpu 3", { "--dpu", "3" }, true, true },
    { "--no-offload", { "--no-offload" }, false, false },
};

/* Rounding of three printed values, 0.0005 ms each. */
#define PRINTED_MS 0.0015

START_TEST(offload_summary_splits_the_step)
{
    char *args[16] = { "--hidden", "3", "--width", "256", "--steps", "8",
                       "--held-out", "64" };
    int count = 8;
    for (int k = 0; k < 3 && split_runs[_i].args[k] != NULL; k++)
        args[count++] = (char *)split_runs[_i].args[k];
    args[count] = NULL;
    const char *what = split_runs[_i].what;
    run_result r = harness_run_mpi("07-offload", "train_offload", 2, args,
                                   NULL, 40);
    harness_expect_success(&r, what);
    const char *summary = strstr(r.out, "summary: ");
    ck_assert_msg(summary != NULL, "train_offload %s: no summary line: %s",
                  what, r.out);
    double ms[split_key_count];
    for (int k = 0; k < split_key_count; k++) {
        char key[32];
        snprintf(key, sizeof key, " %s=", split_keys[k]);
        const char *at = strstr(summary, key);
        ck_assert_msg(at != NULL && sscanf(at + strlen(key), "%lf",
                                           &ms[k]) == 1 && ms[k] >= 0,
                      "train_offload %s: no \"%s\" of at least 0 in its "
                      "summary: %s", what, key + 1, summary);
    }
    const double update = ms[2], mpi = ms[5], adam = ms[6],
                 task_wait = ms[7];
    ck_assert_msg(mpi + task_wait <= update + PRINTED_MS, "train_offload %s:"
                  " inside the update, %.3f ms in MPI and %.3f ms waiting "
                  "for the task, yet the update took %.3f ms: %s", what, mpi,
                  task_wait, update, summary);
    ck_assert_msg(mpi > 0, "train_offload %s on 2 ranks: no time in MPI "
                  "during the update, whose collective moves every "
                  "parameter: %s", what, summary);
    if (split_runs[_i].delayed)
        ck_assert_msg(adam > 0, "train_offload %s: no time for the CPU "
                      "Adam, which the task ran: %s", what, summary);
    else {
        ck_assert_msg(task_wait == 0, "train_offload %s: %.3f ms waiting "
                      "for a task that never ran: %s", what, task_wait,
                      summary);
        ck_assert_msg(adam + mpi <= update + PRINTED_MS, "train_offload %s: "
                      "the CPU Adam (%.3f ms) and MPI (%.3f ms) are parts "
                      "of the update (%.3f ms): %s", what, adam, mpi, update,
                      summary);
    }
    run_result_free(&r);
}
END_TEST

Suite *lesson_suite(void)
{
    static char names[case_count][128];
    Suite *suite = suite_create("drivers");
    for (int k = 0; k < case_count; k++) {
        char what[96];
        describe(what, sizeof what, &cases[k]);
        snprintf(names[k], sizeof names[k], "bad input: %s", what);
        harness_add(suite, names[k], driver_rejects_bad_input, k, 20);
    }
    harness_add(suite, "help: matvec --help", driver_help_exits_0, 0, 20);
    harness_add(suite, "mpi bad input: pingpong --reps zero on 2 ranks",
                pingpong_bad_flag_ends_every_rank, 0, 40);
    harness_add(suite, "help: hello_omp --help", hello_omp_help_exits_0, 0,
                20);
    harness_add(suite, "mpi bad input: hello_mpi --ranks 4 on 2 ranks",
                hello_mpi_flag_ends_every_rank, 0, 40);
    harness_add(suite, "help: hello_mpi --help on 2 ranks",
                hello_mpi_help_exits_0, 0, 40);
    harness_add(suite, "mpi bad input: pingpong on 3 ranks",
                pingpong_wrong_rank_count_ends_every_rank, 0, 40);
    harness_add(suite, "pingpong measures latency and bandwidth",
                pingpong_measures, 0, 40);
    harness_add(suite, "train_offload --no-offload on a device that offload "
                "trains on: refused at once on every rank",
                no_offload_refused_on_a_small_device, 0, 40);
    static char split_names[3][128];
    for (int k = 0; k < 3; k++) {
        snprintf(split_names[k], sizeof split_names[k], "train_offload %s "
                 "on 2 ranks: its summary splits the step", split_runs[k].what);
        harness_add(suite, split_names[k], offload_summary_splits_the_step, k,
                    40);
    }
    harness_add(suite, "train_zero --find-batch on 2 ranks: each stage's "
                "batch is the largest whose bytes fit the cap",
                find_batch_fits_the_cap, 0, 60);
    static char mpi_names[mpi_case_count][128];
    for (int k = 0; k < mpi_case_count; k++) {
        int used = snprintf(mpi_names[k], sizeof mpi_names[k],
                            "mpi bad input: matvec_mpi on %d ranks",
                            mpi_cases[k].ranks);
        for (int a = 0; a < 4 && mpi_cases[k].args[a] != NULL; a++)
            used += snprintf(mpi_names[k] + used,
                             sizeof mpi_names[k] - (size_t)used, " %s",
                             mpi_cases[k].args[a][0] ? mpi_cases[k].args[a]
                                                     : "''");
        harness_add(suite, mpi_names[k], mpi_driver_rejects_bad_input, k, 40);
    }
    static char other_names[other_mpi_case_count][128];
    for (int k = 0; k < other_mpi_case_count; k++) {
        int used = snprintf(other_names[k], sizeof other_names[k],
                            "mpi bad input: %s on 2 ranks",
                            other_mpi_cases[k].program);
        for (int a = 0; a < 2 && other_mpi_cases[k].args[a] != NULL; a++)
            used += snprintf(other_names[k] + used,
                             sizeof other_names[k] - (size_t)used, " %s",
                             other_mpi_cases[k].args[a]);
        harness_add(suite, other_names[k], other_mpi_rejects_bad_input, k, 40);
    }
    return suite;
}
