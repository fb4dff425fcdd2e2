/* Lesson 06's memory calculator (lessons/06-zero/memory_calculator.c), a
 * given program: its table against the ZeRO paper's formulas evaluated
 * here, in whole numbers, for random models (so no table can be written in
 * by hand), against every figure the paper prints (Table 1 and Figure 1),
 * the talk's opening arithmetic, --offload's table against ZeRO-Offload's
 * formulas, and lesson 08's tables: --mlp against the lesson's model on
 * random shapes, --transformer against Megatron-LM's authors' formula;
 * lesson 09's --pipeline, and lesson 10's planner (--plan) against its
 * description evaluated here. Its bad input is in test_drivers.c. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "rng.h"

/* What the paper's formulas give per rank, in bytes: replicated +
 * sharded / nd, the replicated part being the kinds the stage keeps whole
 * (stage 1 divides the optimizer's state by Nd, stage 2 also the
 * gradients, stage 3 also the parameters). */
static void formula(uint64_t psi, uint64_t precision, uint64_t k, int stage,
                    uint64_t *replicated, uint64_t *sharded)
{
    const uint64_t kinds[3] = { precision * psi, precision * psi, k * psi };
    *replicated = *sharded = 0;
    for (int kind = 0; kind < 3; kind++) {
        bool divided = stage >= 3 - kind;  /* kind 2 from stage 1 on, ... */
        if (divided)
            *sharded += kinds[kind];
        else
            *replicated += kinds[kind];
    }
}

/* Runs the calculator with `args` (NULL-terminated); its output. */
static run_result calculator(char **args)
{
    char *argv[16] = { (char *)harness_program("06-zero",
                                               "memory_calculator") };
    for (int k = 0; args[k] != NULL && k < 14; k++)
        argv[k + 1] = args[k];
    run_result r = harness_run(argv, NULL, 20);
    harness_expect_success(&r, "memory_calculator");
    return r;
}

/* The table's row for `nd`: its four values in GB, as printed. */
static void table_row(const char *out, uint64_t nd, double gb[4])
{
    char start[32];
    snprintf(start, sizeof start, "\n %8" PRIu64 " |", nd);
    const char *row = strstr(out, start);
    ck_assert_msg(row != NULL, "no row for Nd = %" PRIu64 " in:\n%s", nd,
                  out);
    ck_assert_msg(sscanf(row + strlen(start), " %lfGB | %lfGB | %lfGB | "
                         "%lfGB", &gb[0], &gb[1], &gb[2], &gb[3]) == 4,
                  "the row for Nd = %" PRIu64 " does not read as four "
                  "values: %.80s", nd, row + 1);
}

/* The devices line of a stage: the count, or 0 for "none". */
static uint64_t devices_line(const char *out, int stage)
{
    char start[32];
    snprintf(start, sizeof start, "\n  stage %d ", stage);
    const char *line = strstr(out, start);
    ck_assert_msg(line != NULL, "no devices line for stage %d in:\n%s",
                  stage, out);
    line += strlen(start);
    line += strcspn(line, " \n"); /* the stage's name, one word */
    line += strspn(line, " ");
    if (strncmp(line, "none", 4) == 0)
        return 0;
    uint64_t devices = 0;
    ck_assert_msg(sscanf(line, "%" SCNu64, &devices) == 1, "stage %d's "
                  "devices line does not start with a count: %.60s", stage,
                  line);
    return devices;
}

/* (a) 40 random models: Ψ from 1 to 10^13, written out or as "7.5B"-like
 * counts, 2 or 4 bytes a parameter, K = 0..32, 1 to 4 rank counts up to
 * 2^20, a device of 0.5-200 GB. Each cell must be the formula's bytes
 * over 10^9, to the two decimals printed (within half their unit); each
 * stage's device count the smallest Nd whose bytes fit, found here by
 * whole-number arithmetic: R + S/Nd <= C exactly when Nd >= S/(C - R). */
START_TEST(table_matches_the_formulas)
{
    rng_t rng = rng_seeded(1006);
    for (int c = 0; c < 40; c++) {
        uint64_t psi;
        char params[40];
        if (c % 4 == 0) {
            /* A count with a suffix: 1..999 tenths of a billion. */
            uint64_t tenths = rng_next_u64(&rng) % 999 + 1;
            psi = tenths * 100000000u;
            snprintf(params, sizeof params, "%" PRIu64 ".%" PRIu64 "B",
                     tenths / 10, tenths % 10);
        } else {
            psi = rng_next_u64(&rng) % 10000000000000u + 1;
            snprintf(params, sizeof params, "%" PRIu64, psi);
        }
        const char *precisions[] = { "fp16", "bf16", "fp32" };
        const char *precision = precisions[rng_next_u64(&rng) % 3];
        uint64_t bytes = strcmp(precision, "fp32") == 0 ? 4 : 2;
        uint64_t k = rng_next_u64(&rng) % 33;
        int rank_counts = (int)(rng_next_u64(&rng) % 4) + 1;
        uint64_t nd[4];
        char ranks[128] = "";
        for (int n = 0; n < rank_counts; n++) {
            nd[n] = rng_next_u64(&rng) % (n == 0 ? 64 : (1u << 20)) + 1;
            /* Distinct counts: a row is found by its Nd. */
            for (int m = 0; m < n; m++)
                if (nd[m] == nd[n])
                    nd[n] += 1u << 21;
            snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks),
                     "%s%" PRIu64, n ? "," : "", nd[n]);
        }
        char device[32], k_text[16];
        snprintf(device, sizeof device, "%.3f",
                 0.5 + (double)(rng_next_u64(&rng) % 199500) / 1000.0);
        snprintf(k_text, sizeof k_text, "%" PRIu64, k);
        char *args[] = { "--params", params, "--ranks", ranks, "--k", k_text,
                         "--precision", (char *)precision, "--device-gb",
                         device, NULL };
        run_result r = calculator(args);
        for (int n = 0; n < rank_counts; n++) {
            double gb[4];
            table_row(r.out, nd[n], gb);
            for (int stage = 0; stage < 4; stage++) {
                uint64_t replicated, sharded;
                formula(psi, bytes, k, stage, &replicated, &sharded);
                double want = ((double)replicated + (double)sharded /
                               (double)nd[n]) / 1e9;
                ck_assert_msg(fabs(gb[stage] - want) <= 0.005 + 1e-9 * want,
                              "--params %s --ranks %s --k %s --precision %s: "
                              "Nd = %" PRIu64 ", stage %d: printed %.2f GB, "
                              "the formula gives %.6f", params, ranks,
                              k_text, precision, nd[n], stage, gb[stage],
                              want);
            }
        }
        const uint64_t capacity = (uint64_t)llround(strtod(device, NULL) *
                                                    1e9);
        for (int stage = 0; stage < 4; stage++) {
            uint64_t replicated, sharded, want;
            formula(psi, bytes, k, stage, &replicated, &sharded);
            if (replicated > capacity ||
                (replicated == capacity && sharded > 0))
                want = 0;
            else if (sharded == 0)
                want = 1;
            else {
                uint64_t room = capacity - replicated;
                want = sharded / room + (sharded % room != 0);
                if (want == 0)
                    want = 1;
            }
            uint64_t got = devices_line(r.out, stage);
            ck_assert_msg(got == want, "--params %s --k %s --precision %s "
                          "--device-gb %s: stage %d needs %" PRIu64 " "
                          "devices, the calculator says %" PRIu64 " (0: "
                          "none)", params, k_text, precision, device, stage,
                          want, got);
        }
        run_result_free(&r);
    }
}
END_TEST

/* (b) The paper's Table 1 (Ψ = 7.5B, 128B, 1T; Nd = 1 .. 1024, the
 * calculator's default rank counts) and Figure 1 (7.5B on 64), cell by
 * cell, within one unit of the paper's last printed digit (the paper cuts
 * some cells down and rounds others half up: 4187.5 -> 4187, 41.25 ->
 * 41.3), plus the calculator's own rounding to two decimals. */
static const struct {
    const char *params;
    uint64_t nd;
    const char *printed[4];
} paper[] = {
    { "7.5B", 1, { "120", "120", "120", "120" } },
    { "7.5B", 4, { "120", "52.5", "41.3", "30" } },
    { "7.5B", 16, { "120", "35.6", "21.6", "7.5" } },
    { "7.5B", 64, { "120", "31.4", "16.6", "1.88" } },
    { "7.5B", 256, { "120", "30.4", "15.4", "0.47" } },
    { "7.5B", 1024, { "120", "30.1", "15.1", "0.12" } },
    { "128B", 1, { "2048", "2048", "2048", "2048" } },
    { "128B", 4, { "2048", "896", "704", "512" } },
    { "128B", 16, { "2048", "608", "368", "128" } },
    { "128B", 64, { "2048", "536", "284", "32" } },
    { "128B", 256, { "2048", "518", "263", "8" } },
    { "128B", 1024, { "2048", "513", "257", "2" } },
    { "1T", 1, { "16000", "16000", "16000", "16000" } },
    { "1T", 4, { "16000", "7000", "5500", "4000" } },
    { "1T", 16, { "16000", "4750", "2875", "1000" } },
    { "1T", 64, { "16000", "4187", "2218", "250" } },
    { "1T", 256, { "16000", "4046", "2054", "62.5" } },
    { "1T", 1024, { "16000", "4011", "2013", "15.6" } },
    /* Figure 1: the same model on 64 ranks, printed to one decimal. */
    { "7.5B", 64, { "120", "31.4", "16.6", "1.9" } },
};

START_TEST(paper_table_1_and_figure_1)
{
    const char *models[] = { "7.5B", "128B", "1T" };
    for (int m = 0; m < 3; m++) {
        char *args[] = { "--params", (char *)models[m], NULL };
        run_result r = calculator(args);
        for (size_t c = 0; c < sizeof paper / sizeof paper[0]; c++) {
            if (strcmp(paper[c].params, models[m]) != 0)
                continue;
            double gb[4];
            table_row(r.out, paper[c].nd, gb);
            for (int stage = 0; stage < 4; stage++) {
                const char *printed = paper[c].printed[stage];
                const char *point = strchr(printed, '.');
                double unit = point ? pow(10.0, -(double)strlen(point + 1))
                                    : 1.0;
                ck_assert_msg(fabs(gb[stage] - atof(printed)) <=
                              unit + 0.005 + 1e-9, "Ψ = %s, Nd = %" PRIu64
                              ", stage %d: the calculator prints %.2f GB, "
                              "the paper %s", models[m], paper[c].nd, stage,
                              gb[stage], printed);
            }
        }
        run_result_free(&r);
    }
}
END_TEST

/* (c) The talk's opening: 10B, 100B and 1T parameters in fp32 weigh 40,
 * 400 and 4000 GB, against one 141 GB H200. */
START_TEST(talk_arithmetic)
{
    char *args[] = { "--talk", NULL };
    run_result r = calculator(args);
    const char *lines[] = { ("10B parameters are    40GB: they fit on one "
                             "H200"),
                            "100B parameters are   400GB: more than one H200",
                            "1T parameters are  4000GB: more than one H200",
                            "One H200 holds 141GB" };
    for (size_t k = 0; k < sizeof lines / sizeof *lines; k++)
        ck_assert_msg(strstr(r.out, lines[k]) != NULL, "memory_calculator "
                      "--talk does not say \"%s\":\n%s", lines[k], r.out);
    run_result_free(&r);
}
END_TEST

/* --offload's row for `nd`, after its header: five values in GB. */
static void offload_row(const char *out, uint64_t nd, double gb[5])
{
    const char *table = strstr(out, " total, DPU |\n");
    ck_assert_msg(table != NULL, "no offload table (its header ends "
                  "\" total, DPU |\") in:\n%s", out);
    char start[32];
    snprintf(start, sizeof start, "\n %8" PRIu64 " |", nd);
    const char *row = strstr(table, start);
    ck_assert_msg(row != NULL, "no offload row for Nd = %" PRIu64 " in:\n%s",
                  nd, table);
    ck_assert_msg(sscanf(row + strlen(start), " %lfGB | %lfGB | %lfGB | "
                         "%lfGB | %lfGB", &gb[0], &gb[1], &gb[2], &gb[3],
                         &gb[4]) == 5, "the offload row for Nd = %" PRIu64
                  " does not read as five values: %.90s", nd, row + 1);
}

/* (d) --offload, for 30 random models: each row's device, host optimizer,
 * host staging, host total and host total with DPU against ZeRO-Offload's
 * formulas evaluated here (device pΨ; host KΨ/Nd + (g + p)Ψ/Nd, the
 * gradients twice with DPU: p = g = the precision's bytes), the offload
 * devices line (one device if pΨ fits it, else none), and the stage table
 * and its devices lines exactly as without --offload. Then the paper's
 * Ψ = 7.5B on one device: 15 GB on it, 90 + 30 = 120 GB on the host. */
START_TEST(offload_table_matches_the_formulas)
{
    rng_t rng = rng_seeded(1007);
    for (int c = 0; c < 30; c++) {
        /* A third of them small enough that the parameters may fit. */
        uint64_t psi = rng_next_u64(&rng) % (c % 3 == 0 ? 100000000000u
                                                        : 10000000000000u) +
                       1;
        char params[40];
        snprintf(params, sizeof params, "%" PRIu64, psi);
        const char *precision = rng_next_u64(&rng) % 2 ? "bf16" : "fp32";
        uint64_t bytes = strcmp(precision, "fp32") == 0 ? 4 : 2;
        uint64_t k = rng_next_u64(&rng) % 33;
        uint64_t nd[3];
        char ranks[96] = "";
        for (int n = 0; n < 3; n++) {
            nd[n] = rng_next_u64(&rng) % (n == 0 ? 64 : (1u << 20)) + 1;
            for (int m = 0; m < n; m++)
                if (nd[m] == nd[n])
                    nd[n] += 1u << 21;
            snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks),
                     "%s%" PRIu64, n ? "," : "", nd[n]);
        }
        char device[32], k_text[16];
        snprintf(device, sizeof device, "%.3f",
                 0.5 + (double)(rng_next_u64(&rng) % 199500) / 1000.0);
        snprintf(k_text, sizeof k_text, "%" PRIu64, k);
        char *plain_args[] = { "--params", params, "--ranks", ranks, "--k",
                               k_text, "--precision", (char *)precision,
                               "--device-gb", device, NULL };
        char *offload_args[] = { "--params", params, "--ranks", ranks, "--k",
                                 k_text, "--precision", (char *)precision,
                                 "--device-gb", device, "--offload", NULL };
        run_result plain = calculator(plain_args);
        run_result r = calculator(offload_args);
        for (int n = 0; n < 3; n++) {
            double gb[5];
            offload_row(r.out, nd[n], gb);
            const double whole = (double)(bytes * psi);
            const double per_rank = (double)psi / (double)nd[n];
            const double want[5] = {
                whole / 1e9, (double)k * per_rank / 1e9,
                (double)(2 * bytes) * per_rank / 1e9,
                (double)(k + 2 * bytes) * per_rank / 1e9,
                (double)(k + 3 * bytes) * per_rank / 1e9,
            };
            const char *what[5] = { "device", "host optimizer",
                                    "host staging", "host total",
                                    "host total with DPU" };
            for (int col = 0; col < 5; col++)
                ck_assert_msg(fabs(gb[col] - want[col]) <=
                                  0.005 + 1e-9 * want[col],
                              "--params %s --k %s --precision %s --offload: "
                              "Nd = %" PRIu64 ", %s: printed %.2f GB, the "
                              "formula gives %.6f", params, k_text, precision,
                              nd[n], what[col], gb[col], want[col]);
        }
        const uint64_t capacity = (uint64_t)llround(strtod(device, NULL) *
                                                    1e9);
        const char *line = strstr(r.out, "\n  offload to host ");
        ck_assert_msg(line != NULL, "no devices line for offload in:\n%s",
                      r.out);
        line += strlen("\n  offload to host ");
        line += strspn(line, " ");
        bool fits = bytes * psi <= capacity;
        ck_assert_msg(fits ? strncmp(line, "1  (", 4) == 0
                           : strncmp(line, "none", 4) == 0,
                      "--params %s --precision %s --device-gb %s: %" PRIu64
                      " bytes of parameters on a %" PRIu64 "-byte device "
                      "%s, the calculator says: %.60s", params, precision,
                      device, bytes * psi, capacity,
                      fits ? "fit on one" : "never fit", line);
        /* Everything else as without --offload. */
        const char *table_end = strstr(plain.out, "\n\nDevices of");
        ck_assert(table_end != NULL);
        size_t table_len = (size_t)(table_end - plain.out) + 1;
        const char *devices = strstr(r.out, "\n\nDevices of");
        const char *offload_line = strstr(r.out, "\n  offload to host ");
        ck_assert_msg(strncmp(r.out, plain.out, table_len) == 0 &&
                          devices != NULL &&
                          strncmp(devices, table_end,
                                  (size_t)(offload_line - devices)) == 0 &&
                          offload_line - devices ==
                              (ptrdiff_t)strlen(table_end) - 1,
                      "--offload changed the stage table or its devices "
                      "lines:\n%s\nwithout it:\n%s", r.out, plain.out);
        run_result_free(&plain);
        run_result_free(&r);
    }
    char *args[] = { "--ranks", "1", "--offload", NULL };
    run_result r = calculator(args);
    const char *lines[] = {
        "        1 |    15.00GB |    90.00GB |    30.00GB |   120.00GB |   "
        "135.00GB |",
        "  offload to host         1  (15.00GB each, and 120.00GB on the "
        "host)" };
    for (size_t k = 0; k < sizeof lines / sizeof *lines; k++)
        ck_assert_msg(strstr(r.out, lines[k]) != NULL, "memory_calculator "
                      "--ranks 1 --offload does not say \"%s\":\n%s",
                      lines[k], r.out);
    run_result_free(&r);
}
END_TEST

/* ---- Lesson 08: --mlp, --transformer, --tp ---- */

/* Rank 0's bytes of lesson 08's model (64 features, 10 classes) on t
 * ranks, from the lesson's description, evaluated here: pairs of layers
 * from layer 0, the first split by output rows and the second by the
 * first's rows as its columns, the balanced partition giving rank 0
 * ceil(n / t) of n; a last layer left over whole (or split by class with
 * the parallel loss). 16 bytes a held parameter (fp32 parameter, gradient,
 * two AdamW moments); activations, 4 bytes each: every layer's two
 * outputs for the samples it keeps, the gathered inputs of sequence
 * parallelism, two gradient buffers of the widest layer, the inputs. */
static void mlp_bytes(uint64_t hidden, uint64_t width, uint64_t batch,
                      uint64_t t, bool sp, bool pl, uint64_t *held,
                      uint64_t *activations)
{
    uint64_t widest = 64, rows = 0, floats = 0;
    *held = 0;
    for (uint64_t l = 0; l <= hidden; l++) {
        uint64_t in = l == 0 ? 64 : width, out = l == hidden ? 10 : width;
        if (out > widest)
            widest = out;
        if (l % 2 == 1) {                 /* by columns, the rows before */
            *held += out * rows + out;
            floats += 2 * out * (sp && l != hidden ? batch / t : batch);
        } else if (l < hidden || pl) {    /* by rows */
            rows = (out + t - 1) / t;
            *held += rows * (in + 1);
            floats += 2 * rows * batch + (sp && l > 0 ? batch * in : 0);
        } else {                          /* whole */
            *held += out * (in + 1);
            floats += 2 * out * batch + (sp && l > 0 ? batch * in : 0);
        }
    }
    *activations = 4 * (floats + 2 * batch * widest + batch * 64);
}

/* --mlp on random shapes and t = 1..8: every row's five numbers as the
 * description above gives them (the sequence-parallel column "-" where
 * the batch is not a multiple of t). */
START_TEST(mlp_table_matches_the_lesson)
{
    rng_t rng = rng_seeded(1008);
    for (int c = 0; c < 30; c++) {
        uint64_t hidden = rng_next_u64(&rng) % 7;
        uint64_t width = rng_next_u64(&rng) % 3000 + 1;
        uint64_t batch = rng_next_u64(&rng) % 96 + 1;
        bool pl = hidden % 2 == 0 && rng_next_u64(&rng) % 2;
        char shape[64];
        snprintf(shape, sizeof shape, "%" PRIu64 ",%" PRIu64 ",%" PRIu64,
                 hidden, width, batch);
        char *args[] = { "--mlp", shape, "--tp", "1,2,3,4,5,6,7,8",
                         pl ? "--parallel-loss" : NULL, NULL };
        run_result r = calculator(args);
        for (uint64_t t = 1; t <= 8; t++) {
            char start[32];
            snprintf(start, sizeof start, "\n %8" PRIu64 " |", t);
            const char *row = strstr(r.out, start);
            ck_assert_msg(row != NULL, "--mlp %s: no row for t = %" PRIu64
                          ":\n%s", shape, t, r.out);
            unsigned long long got[4], sp_got = 0;
            char sp_text[32] = "";
            ck_assert_msg(sscanf(row + strlen(start), " %llu | %llu | %llu "
                                 "| %llu | %31s", &got[0], &got[1], &got[2],
                                 &got[3], sp_text) == 5,
                          "--mlp %s: the row for t = %" PRIu64 " does not "
                          "read as five values: %.100s", shape, t, row + 1);
            uint64_t held, activations, sp_activations;
            mlp_bytes(hidden, width, batch, t, false, pl, &held,
                      &activations);
            const unsigned long long want[4] = { 4 * held, 4 * held,
                                                 8 * held, activations };
            for (int k = 0; k < 4; k++)
                ck_assert_msg(got[k] == want[k], "memory_calculator --mlp %s"
                              "%s, t = %" PRIu64 ", column %d: %llu; lesson "
                              "08's formula gives %llu", shape,
                              pl ? " --parallel-loss" : "", t, k + 1, got[k],
                              want[k]);
            if (batch % t != 0) {
                ck_assert_msg(strcmp(sp_text, "-") == 0, "--mlp %s, t = %"
                              PRIu64 ": the batch is not a multiple of t, "
                              "so no sequence-parallel figure; printed %s",
                              shape, t, sp_text);
                continue;
            }
            mlp_bytes(hidden, width, batch, t, true, pl, &held,
                      &sp_activations);
            sp_got = strtoull(sp_text, NULL, 10);
            ck_assert_msg(sp_got == sp_activations, "memory_calculator --mlp "
                          "%s%s, t = %" PRIu64 ": sequence-parallel "
                          "activations %llu; lesson 08's formula gives %"
                          PRIu64, shape, pl ? " --parallel-loss" : "", t,
                          sp_got, sp_activations);
        }
        run_result_free(&r);
    }
}
END_TEST

/* ---- Lesson 09: --pipeline ---- */

/* Rank r's row of lesson 09's pipeline on lesson 08's model, from the
 * lesson's description, evaluated here: the boundaries by the rule of
 * TODO 1 (each the candidate layer whose parameters before it are the
 * nearest to s / S of all, the first of equals); 16 bytes a parameter;
 * the micro-batches in flight at the worst moment of the schedule's order
 * on rank r, walked (GPipe: every forward first; 1F1B: p - r - 1 of them,
 * then one of each in turn), each its input and every layer's two
 * outputs; the step's batch and two buffers of the widest layer. */
static void pipeline_row(uint64_t hidden, uint64_t width, uint64_t batch,
                         int p, int m, bool one_f_one_b, int r,
                         int *first, int *last, uint64_t *state,
                         int *in_flight, uint64_t *activations)
{
    const int layers = (int)hidden + 1;
    uint64_t size[66], before[67] = { 0 };
    for (int l = 0; l < layers; l++) {
        size[l] = (l == layers - 1 ? 10 : width) *
                  ((l == 0 ? 64 : width) + 1);
        before[l + 1] = before[l] + size[l];
    }
    int bound[66] = { 0 };
    bound[p] = layers;
    for (int s = 1; s < p; s++) {
        uint64_t best_distance = UINT64_MAX;
        for (int l = bound[s - 1] + 1; l <= layers - (p - s); l++) {
            const uint64_t a = before[l] * (uint64_t)p;
            const uint64_t b = before[layers] * (uint64_t)s;
            const uint64_t d = a > b ? a - b : b - a;
            if (d < best_distance) {
                best_distance = d;
                bound[s] = l;
            }
        }
    }
    *first = bound[r];
    *last = bound[r + 1] - 1;
    const uint64_t rows = batch / (uint64_t)m;
    uint64_t saved = rows * (bound[r] == 0 ? 64 : width), widest = 0;
    *state = 0;
    for (int l = bound[r]; l < bound[r + 1]; l++) {
        const uint64_t in = l == 0 ? 64 : width;
        const uint64_t out = l == layers - 1 ? 10 : width;
        *state += 16 * size[l];
        saved += 2 * rows * out;
        widest = in > widest ? in : widest;
        widest = out > widest ? out : widest;
    }
    /* The walk through the order: the warm-up's forwards, then a forward
     * and a backward in turn, then the backwards left (GPipe: every
     * forward is warm-up). */
    const int warm = one_f_one_b ? (p - r - 1 < m ? p - r - 1 : m) : m;
    int live = 0, most = 0;
    for (int k = 0; k < m; k++) {
        live++;                            /* forward k */
        most = live > most ? live : most;
        if (k >= warm)
            live--;                        /* backward k - warm */
    }
    *in_flight = most;
    *activations = 4 * (batch * 64 + 2 * rows * widest + (uint64_t)most *
                        saved);
}

/* --pipeline on random shapes, 1-4 stages, GPipe and 1F1B: every row's
 * layers, model state, micro-batches in flight and activations as the
 * description above gives them. */
START_TEST(pipeline_table_matches_the_lesson)
{
    rng_t rng = rng_seeded(1009);
    for (int c = 0; c < 30; c++) {
        const uint64_t hidden = rng_next_u64(&rng) % 8 + 3;
        const uint64_t width = rng_next_u64(&rng) % 2000 + 1;
        const int p = (int)(rng_next_u64(&rng) % 4) + 1;
        const int m = (int)(rng_next_u64(&rng) % 8) + 1;
        const uint64_t batch = (uint64_t)m * (rng_next_u64(&rng) % 9 + 1);
        const bool one_f_one_b = rng_next_u64(&rng) % 2;
        char shape[64], stages[16], micro[16];
        snprintf(shape, sizeof shape, "%" PRIu64 ",%" PRIu64 ",%" PRIu64,
                 hidden, width, batch);
        snprintf(stages, sizeof stages, "%d", p);
        snprintf(micro, sizeof micro, "%d", m);
        char *args[] = { "--mlp", shape, "--pipeline", stages,
                         "--micro-batches", micro, "--schedule",
                         one_f_one_b ? "1f1b" : "gpipe", NULL };
        run_result r = calculator(args);
        for (int rank = 0; rank < p; rank++) {
            char start[32];
            snprintf(start, sizeof start, "\n %8d |", rank);
            const char *row = strstr(r.out, start);
            ck_assert_msg(row != NULL, "--mlp %s --pipeline %d: no row for "
                          "rank %d:\n%s", shape, p, rank, r.out);
            int first, last, in_flight, got_first, got_last, got_flight;
            uint64_t state, activations;
            unsigned long long got_state, got_activations;
            ck_assert_msg(sscanf(row + strlen(start), " %d-%d | %llu | %d | "
                                 "%llu", &got_first, &got_last, &got_state,
                                 &got_flight, &got_activations) == 5,
                          "--mlp %s --pipeline %d: rank %d's row does not "
                          "read as five values: %.100s", shape, p, rank,
                          row + 1);
            pipeline_row(hidden, width, batch, p, m, one_f_one_b, rank,
                         &first, &last, &state, &in_flight, &activations);
            ck_assert_msg(got_first == first && got_last == last &&
                          got_state == state && got_flight == in_flight &&
                          got_activations == activations,
                          "memory_calculator --mlp %s --pipeline %d "
                          "--micro-batches %d --schedule %s, rank %d: layers "
                          "%d-%d, %llu, %d, %llu; lesson 09's description "
                          "gives %d-%d, %" PRIu64 ", %d, %" PRIu64, shape, p,
                          m, one_f_one_b ? "1f1b" : "gpipe", rank, got_first,
                          got_last, got_state, got_flight, got_activations,
                          first, last, state, in_flight, activations);
        }
        run_result_free(&r);
    }
}
END_TEST

/* Korthikanti et al. 2022 (arXiv 2205.05198, section 4.2) per layer:
 * sbh(34 + 5as/h), sbh(10 + 24/t + 5as/(ht)), sbh(34/t + 5as/(ht)),
 * evaluated here in double, against the printed bytes (rounded to a
 * whole byte: within 0.5 of the formula); on GPT-3 175B's layer (s 2048,
 * b 1, h 12288, a 96) and a small one, at t = 1, 2, 3, 8. */
START_TEST(transformer_table_matches_the_paper)
{
    static const double cells[][4] = { { 2048, 1, 12288, 96 },
                                       { 512, 4, 1024, 16 } };
    for (size_t c = 0; c < sizeof cells / sizeof cells[0]; c++) {
        const double s = cells[c][0], b = cells[c][1], h = cells[c][2],
                     a = cells[c][3];
        char shape[64];
        snprintf(shape, sizeof shape, "%.0f,%.0f,%.0f,%.0f", s, b, h, a);
        char *args[] = { "--transformer", shape, "--tp", "1,2,3,8", NULL };
        run_result r = calculator(args);
        static const double ts[] = { 1, 2, 3, 8 };
        for (size_t k = 0; k < 4; k++) {
            const double t = ts[k], sbh = s * b * h;
            const double want[3] = {
                sbh * (34 + 5 * a * s / h),
                sbh * (10 + 24 / t + 5 * a * s / (h * t)),
                sbh * (34 / t + 5 * a * s / (h * t)) };
            char start[32];
            snprintf(start, sizeof start, "\n %8.0f |", t);
            const char *row = strstr(r.out, start);
            ck_assert_msg(row != NULL, "--transformer %s: no row for t = "
                          "%.0f:\n%s", shape, t, r.out);
            double got[3];
            ck_assert_msg(sscanf(row + strlen(start), " %lf | %lf | %lf",
                                 &got[0], &got[1], &got[2]) == 3,
                          "--transformer %s, t = %.0f: %.80s", shape, t,
                          row + 1);
            for (int j = 0; j < 3; j++)
                ck_assert_msg(fabs(got[j] - want[j]) <= 0.5, "memory_"
                              "calculator --transformer %s, t = %.0f, "
                              "column %d: %.0f; the paper's formula gives "
                              "%.1f", shape, t, j + 1, got[j], want[j]);
        }
        run_result_free(&r);
    }
}
END_TEST

/* --tp T with the ZeRO tables: the model ZeRO divides is each rank's
 * share, ceil(Psi / t) parameters. */
START_TEST(tp_divides_the_zero_table)
{
    char *args[] = { "--params", "175B", "--tp", "8", "--ranks", "1,8",
                     NULL };
    run_result r = calculator(args);
    const uint64_t share = (UINT64_C(175000000000) + 7) / 8;
    for (uint64_t nd = 1; nd <= 8; nd += 7) {
        double gb[4];
        table_row(r.out, nd, gb);
        for (int stage = 0; stage < 4; stage++) {
            uint64_t replicated, sharded;
            formula(share, 2, 12, stage, &replicated, &sharded);
            double want = ((double)replicated + (double)sharded /
                           (double)nd) / 1e9;
            ck_assert_msg(fabs(gb[stage] - want) <= 0.005 + 1e-9 * want,
                          "--params 175B --tp 8, Nd = %" PRIu64 ", stage "
                          "%d: %.2f GB; a rank's eighth under ZeRO gives "
                          "%.4f", nd, stage, gb[stage], want);
        }
    }
    run_result_free(&r);
}
END_TEST

/* ---- --plan: lesson 10's planner ----
 *
 * The layouts evaluated here from the description in
 * common/parallel_plan.h, by other means than the calculator: the grid's
 * ranks counted out coordinate by coordinate and each group's hosts
 * compared, every partition's blocks listed and the ring's bytes taken as
 * the largest "all but its own block" over the ranks. In whole bytes
 * (--bytes), exactly: a slip of one element is a few bytes. */
typedef struct {
    uint64_t tp, pp, dp;
    int stage;
    uint64_t held[3];           /* state, activations, the two */
    uint64_t sent[3];           /* tp, pp, dp */
    bool crosses[3];
    uint64_t crossing;
} plan_expected;

typedef struct {
    uint64_t parameters, layers, s, b, h, a, m, devices, per_host, capacity;
    bool gpipe;
} plan_case;

/* The most one rank of `ranks` sends in a ring over `items`: all the
 * blocks but its own, the first items % ranks of them one larger. */
static uint64_t ring_most(uint64_t items, uint64_t ranks)
{
    uint64_t most = 0;
    for (uint64_t r = 0; r < ranks && ranks > 1; r++) {
        const uint64_t own = items / ranks + (r < items % ranks);
        most = items - own > most ? items - own : most;
    }
    return most;
}

/* Whether some group of `axis` (0 tp, 1 pp, 2 dp) has ranks on two hosts,
 * the ranks numbered with t fastest, then p, then d. */
static bool groups_cross(int axis, uint64_t tp, uint64_t pp, uint64_t dp,
                         uint64_t per_host)
{
    for (uint64_t d = 0; d < dp; d++)
        for (uint64_t p = 0; p < pp; p++)
            for (uint64_t t = 0; t < tp; t++) {
                uint64_t at[3] = { t, p, d }, first[3] = { t, p, d };
                first[axis] = 0;
                const uint64_t rank = (at[2] * pp + at[1]) * tp + at[0];
                const uint64_t leader = (first[2] * pp + first[1]) * tp +
                                        first[0];
                if (rank / per_host != leader / per_host)
                    return true;
            }
    return false;
}

static plan_expected plan_evaluate(const plan_case *c, uint64_t tp,
                                   uint64_t pp, int stage)
{
    plan_expected e = { tp, pp, c->devices / (tp * pp), stage, { 0 },
                        { 0 }, { false }, 0 };
    uint64_t lp = 0;  /* the most layers a stage gets */
    for (uint64_t k = 0; k < pp; k++) {
        const uint64_t layers = c->layers / pp + (k < c->layers % pp);
        lp = layers > lp ? layers : lp;
    }
    const uint64_t psi = (c->parameters * lp + c->layers * tp - 1) /
                         (c->layers * tp);
    /* ZeRO: 2 + 2 + 12 bytes, the stage's kinds divided over dp. */
    const uint64_t kinds[3] = { 2 * psi, 2 * psi, 12 * psi };
    uint64_t whole = 0, divided = 0;
    for (int kind = 0; kind < 3; kind++)
        if (stage >= 3 - kind)
            divided += kinds[kind];
        else
            whole += kinds[kind];
    e.held[0] = whole + (divided + e.dp - 1) / e.dp;
    const uint64_t layer = (34 * c->s * c->b * c->h +
                            5 * c->a * c->s * c->s * c->b + tp - 1) / tp;
    const uint64_t in_flight = c->gpipe ? c->m : c->m < pp ? c->m : pp;
    e.held[1] = lp * in_flight * layer;
    e.held[2] = e.held[0] + e.held[1];
    const uint64_t rows = c->s * c->b;
    e.sent[0] = 8 * c->m * lp * ring_most(rows, tp) * c->h * 2;
    uint64_t most_messages = 0;
    for (uint64_t k = 0; k < pp; k++) {
        const uint64_t messages = (k + 1 < pp) + (k > 0);
        most_messages = messages > most_messages ? messages : most_messages;
    }
    const uint64_t block = rows / tp + (rows % tp != 0);
    e.sent[1] = c->m * most_messages * block * c->h * 2;
    const uint64_t per_parameter = stage == 0 ? 4 : stage < 3 ? 4 : 6;
    e.sent[2] = ring_most(psi, e.dp) * per_parameter;
    for (int axis = 0; axis < 3; axis++) {
        e.crosses[axis] = groups_cross(axis, tp, pp, e.dp, c->per_host);
        if (e.crosses[axis])
            e.crossing += e.sent[axis];
    }
    return e;
}

static int plan_order(const void *a_, const void *b_)
{
    const plan_expected *a = a_, *b = b_;
    const uint64_t ka[5] = { a->crossing, a->held[2], a->tp, a->pp,
                             (uint64_t)a->stage };
    const uint64_t kb[5] = { b->crossing, b->held[2], b->tp, b->pp,
                             (uint64_t)b->stage };
    for (int k = 0; k < 5; k++)
        if (ka[k] != kb[k])
            return ka[k] < kb[k] ? -1 : 1;
    return 0;
}

/* Every layout of `c` that fits, in the planner's order; how many. */
static size_t plan_expect(const plan_case *c, plan_expected *out,
                          size_t room)
{
    size_t n = 0;
    for (uint64_t tp = 1; tp <= c->devices; tp++)
        for (uint64_t pp = 1; pp <= c->devices; pp++) {
            if (c->devices % (tp * pp) != 0 || c->a % tp != 0 ||
                pp > c->layers)
                continue;
            const int stages = c->devices / (tp * pp) == 1 ? 1 : 4;
            for (int stage = 0; stage < stages; stage++) {
                plan_expected e = plan_evaluate(c, tp, pp, stage);
                if (e.held[2] <= c->capacity) {
                    ck_assert(n < room);
                    out[n++] = e;
                }
            }
        }
    qsort(out, n, sizeof *out, plan_order);
    return n;
}

/* The planner's output for `c`, every layout shown. */
static run_result plan_run(const plan_case *c)
{
    char params[32], shape[96], layers[32], devices[32], per_host[32],
        micro[32], gb[48];
    snprintf(params, sizeof params, "%" PRIu64, c->parameters);
    snprintf(shape, sizeof shape, "%" PRIu64 ",%" PRIu64 ",%" PRIu64
             ",%" PRIu64, c->s, c->b, c->h, c->a);
    snprintf(layers, sizeof layers, "%" PRIu64, c->layers);
    snprintf(devices, sizeof devices, "%" PRIu64, c->devices);
    snprintf(per_host, sizeof per_host, "%" PRIu64, c->per_host);
    snprintf(micro, sizeof micro, "%" PRIu64, c->m);
    /* Whole megabytes: "%.3f" GB is then the capacity exactly. */
    snprintf(gb, sizeof gb, "%" PRIu64 ".%03" PRIu64, c->capacity / 1000000000,
             c->capacity / 1000000 % 1000);
    char *argv[] = { (char *)harness_program("06-zero", "memory_calculator"),
                     "--plan", "--params", params, "--transformer", shape,
                     "--layers", layers, "--devices", devices, "--per-host",
                     per_host, "--micro-batches", micro, "--schedule",
                     c->gpipe ? "gpipe" : "1f1b", "--device-gb", gb, "--top",
                     "10000", "--bytes", NULL };
    run_result r = harness_run(argv, NULL, 20);
    harness_expect_success(&r, "memory_calculator --plan");
    return r;
}

/* The printed rows against `want`, in order, and the closing count. */
static void plan_compare(const plan_case *c, const char *out,
                         const plan_expected *want, size_t n)
{
    const char *at = strstr(out, "| crossing\n");
    ck_assert_msg(at != NULL, "--plan printed no table header:\n%s", out);
    at = strchr(at, '\n') + 1;
    for (size_t k = 0; k < n; k++) {
        unsigned long long tp, pp, dp, held[3], sent[3], crossing;
        int stage;
        char mark[3];
        const int got = sscanf(at, " %llu %llu %llu %d | %llu %llu %llu | "
                               "%llu%c %llu%c %llu%c| %llu", &tp, &pp, &dp,
                               &stage, &held[0], &held[1], &held[2],
                               &sent[0], &mark[0], &sent[1], &mark[1],
                               &sent[2], &mark[2], &crossing);
        ck_assert_msg(got == 14, "--plan with %" PRIu64 " devices, %" PRIu64
                      " a host: row %zu does not read as a layout: %.90s",
                      c->devices, c->per_host, k + 1, at);
        const plan_expected *e = &want[k];
        ck_assert_msg(tp == e->tp && pp == e->pp && dp == e->dp &&
                      stage == e->stage, "--plan with %" PRIu64 " devices, "
                      "%" PRIu64 " a host, %" PRIu64 " bytes each: row %zu is tp %llu "
                      "pp %llu dp %llu ZeRO %d; the description's order gives "
                      "tp %" PRIu64 " pp %" PRIu64 " dp %" PRIu64 " ZeRO %d",
                      c->devices, c->per_host, c->capacity, k + 1, tp, pp, dp,
                      stage, e->tp, e->pp, e->dp, e->stage);
        static const char *const columns[7] = {
            "state", "activations", "held", "tp sent", "pp sent", "dp sent",
            "crossing" };
        for (int j = 0; j < 7; j++) {
            const unsigned long long value = j < 3   ? held[j]
                                             : j < 6 ? sent[j - 3]
                                                     : crossing;
            const uint64_t bytes = j < 3 ? e->held[j] : j < 6 ? e->sent[j - 3]
                                                              : e->crossing;
            ck_assert_msg(value == bytes, "--plan, layout tp %" PRIu64
                          " pp %" PRIu64 " ZeRO %d, %s: %llu bytes; the "
                          "description gives %" PRIu64, e->tp, e->pp,
                          e->stage, columns[j], value, bytes);
        }
        for (int axis = 0; axis < 3; axis++)
            ck_assert_msg((mark[axis] == '*') == e->crosses[axis], "--plan, "
                          "layout tp %" PRIu64 " pp %" PRIu64 " ZeRO %d: "
                          "axis %d %s marked as crossing hosts (%" PRIu64
                          " a host)", e->tp, e->pp, e->stage, axis,
                          e->crosses[axis] ? "not" : "wrongly",
                          c->per_host);
        at = strchr(at, '\n');
        ck_assert(at != NULL);
        at++;
    }
    char closing[64];
    if (n == 0)
        snprintf(closing, sizeof closing, "(none:");
    else
        snprintf(closing, sizeof closing, "%zu layout%s fit%s.", n,
                 n == 1 ? "" : "s", n == 1 ? "s" : "");
    ck_assert_msg(strncmp(at, closing, strlen(closing)) == 0, "--plan with "
                  "%" PRIu64 " devices: after the rows, '%.60s'; the "
                  "description gives %zu layouts", c->devices, at, n);
}

/* 30 random transformers and clusters, the devices' memory drawn around
 * what the model needs so that some layouts fit and some do not. */
START_TEST(plan_matches_the_description)
{
    static const uint64_t device_counts[] = { 1, 2, 4, 6, 8, 12, 16, 24,
                                              32, 64 };
    static const uint64_t head_counts[] = { 1, 2, 3, 4, 8, 12, 16 };
    rng_t rng = rng_seeded(1013);
    enum { ROOM = 4096 };
    plan_expected *want = malloc(ROOM * sizeof *want);
    ck_assert(want != NULL);
    size_t fitting = 0, refused = 0;
    for (int k = 0; k < 30; k++) {
        plan_case c;
        c.devices = device_counts[rng_next_u64(&rng) % 10];
        const uint64_t hosts_of[] = { 1, 2, 3, 4, 8, c.devices };
        c.per_host = hosts_of[rng_next_u64(&rng) % 6];
        c.a = head_counts[rng_next_u64(&rng) % 7];
        c.h = c.a * (64 << (rng_next_u64(&rng) % 4));
        c.s = 64 << (rng_next_u64(&rng) % 6);
        c.b = rng_next_u64(&rng) % 4 + 1;
        c.layers = rng_next_u64(&rng) % 48 + 1;
        c.m = rng_next_u64(&rng) % 16 + 1;
        c.gpipe = rng_next_u64(&rng) % 2;
        c.parameters = 12 * c.layers * c.h * c.h +
                       rng_next_u64(&rng) % 1000003;
        /* Between a quarter of and twice a device's share of the model
         * state, in whole megabytes, plus room for activations. */
        const uint64_t share = 16 * c.parameters / c.devices;
        c.capacity = (share / 4 + rng_next_u64(&rng) % (2 * share + 1) +
                      rng_next_u64(&rng) % (c.s * c.b * c.h * 64 + 1)) /
                     1000000 * 1000000;
        if (c.capacity == 0)
            c.capacity = 1000000; /* the least --device-gb takes */
        const size_t n = plan_expect(&c, want, ROOM);
        run_result r = plan_run(&c);
        plan_compare(&c, r.out, want, n);
        run_result_free(&r);
        fitting += n;
        refused += n == 0;
    }
    /* The draw must exercise both: layouts that fit, and cases with none. */
    ck_assert_msg(fitting > 30 && refused > 0 && refused < 30, "the random "
                  "cases gave %zu fitting layouts, %zu cases with none",
                  fitting, refused);
    free(want);
}
END_TEST

/* The worked cell of lesson 10's README: 100B parameters, 80 layers of
 * h = 10240 and 80 heads, micro-batches of 1 x 2048 tokens, 8 a step,
 * 1F1B, on 64 H200s (141 GB), 8 a host; tp 8, pp 8, dp 1, by hand:
 *   Ψd = 100e9 · 10 / (80 · 8) = 1.5625e9; state 16 Ψd = 25.00 GB
 *   a layer's activations (34 sbh + 5 a s² b) / 8 = (713031680 +
 *     1677721600) / 8 = 298844160; times 10 layers and 8 in flight:
 *     23.91 GB
 *   tp: 16 · 8 · 10 · 10240 · (2048 - 256) = 23.49 GB
 *   pp: 8 micro-batches · 2 messages · 2 bytes · 256 rows · 10240
 *     = 0.08 GB, across hosts (each stage is a host)
 * and it is the first row: nothing but pp crosses hosts. */
START_TEST(plan_worked_cell)
{
    char *argv[] = { (char *)harness_program("06-zero", "memory_calculator"),
                     "--plan", "--params", "100B", "--transformer",
                     "2048,1,10240,80", "--layers", "80", "--devices", "64",
                     "--per-host", "8", "--micro-batches", "8", NULL };
    run_result r = harness_run(argv, NULL, 20);
    harness_expect_success(&r, "memory_calculator --plan");
    const char *row = "\n   8   8   1    0 |   25.00   23.91   48.91 |  "
                      "23.49    0.08*   0.00 |     0.08\n";
    ck_assert_msg(strstr(r.out, "| crossing\n   8   8   1    0 |") != NULL &&
                  strstr(r.out, row) != NULL, "--plan on the worked cell: "
                  "the first row should read%s in:\n%s", row, r.out);
    run_result_free(&r);
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("memory_calculator");
    harness_add(suite, "memory calculator: 40 random models, as the "
                "formulas say", table_matches_the_formulas, 0, 30);
    harness_add(suite, "memory calculator: the paper's Table 1 and Figure 1",
                paper_table_1_and_figure_1, 0, 20);
    harness_add(suite, "memory calculator: the talk's opening arithmetic",
                talk_arithmetic, 0, 20);
    harness_add(suite, "memory calculator: --offload, as ZeRO-Offload's "
                "formulas say", offload_table_matches_the_formulas, 0, 30);
    harness_add(suite, "memory calculator: --mlp, lesson 08's model on 30 "
                "random shapes and t = 1-8", mlp_table_matches_the_lesson, 0,
                30);
    harness_add(suite, "memory calculator: --transformer, Korthikanti et "
                "al.'s formula on two layers", transformer_table_matches_the_paper,
                0, 20);
    harness_add(suite, "memory calculator: --pipeline, lesson 09's stages "
                "on 30 random models, GPipe and 1F1B",
                pipeline_table_matches_the_lesson, 0, 20);
    harness_add(suite, "memory calculator: --tp divides the model before "
                "ZeRO's table", tp_divides_the_zero_table, 0, 20);
    harness_add(suite, "memory calculator: --plan, every layout of 30 random "
                "transformers and clusters", plan_matches_the_description, 0,
                60);
    harness_add(suite, "memory calculator: --plan, the worked cell of 100B "
                "on 64 H200s", plan_worked_cell, 0, 20);
    return suite;
}
