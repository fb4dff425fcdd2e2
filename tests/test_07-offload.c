/* Lesson 07's tests. The CPU Adam runs in the lesson's producer
 * (tests/producer/07-offload.c), never in this program, which computes
 * every reference itself and decides:
 *   - cpu_adam_tile (TODO 1) and cpu_adam_update (TODO 2) give, bitwise,
 *     the master weights, moments and bf16 parameters of common/'s
 *     adamw_step_mixed, over three steps, for lengths 0, 1, 15, 16, 17 at
 *     every start 0-15 elements past a 64-byte boundary and 10^7 + 3 at
 *     one, and write nothing outside their elements;
 *   - cpu_adam_tile is compiled to vector instructions: this program reads
 *     the compiled cpu_adam.o (objdump) and looks for packed square roots
 *     and divisions in it;
 *   - cpu_adam_update's tiles cover every element once, are at most
 *     CPU_ADAM_TILE long, hold their final outputs when their callback
 *     runs, are handed over as they finish (not all at the end), and come
 *     from two threads that both did real work, as their CPU time shows
 *     (the producer's given callback measures it).
 * And training with ZeRO-Offload (TODOs 3-6) under mpirun, on 1 to 4
 * ranks, against what this program computes itself:
 *   - the weights: bitwise those of lesson 06's stage 2 at the same P,
 *     that is of plain data parallelism, simulated here rank by rank
 *     (tests/harness/training_reference.h); with the delayed parameter
 *     update, of the same simulation with the same delay (and when they
 *     differ, the failure says if they are those of a slip: no warm-up,
 *     no delay, the delay a step early or late);
 *   - where the memory lives: the device's peak per category (the memory
 *     ledger, through the device layer) and the host's, per rank, equal
 *     the lesson's formulas; nothing allocated behind the ledger's back
 *     (every formula a run misses is said in one failure, with the bus);
 *   - what crosses the bus: the device layer's counters, 2S bytes down and
 *     2S up a step per rank (S its slice; 4Ψ in all on one rank);
 *   - a device too small for 16Ψ: offload trains and learns under it, and
 *     without offload the run is refused at once with the device's line. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bf16.h"
#include "collectives.h"
#include "cpu_adam.h"
#include "harness.h"
#include "mlp.h"
#include "optimizer.h"
#include "producer.h"
#include "producer/07-offload.h"
#include "training_reference.h"

/* 126 whole tiles and a short one: producer/07-offload.h says why. */
_Static_assert(THREADS_CASE_LENGTH / CPU_ADAM_TILE == 126 &&
               THREADS_CASE_LENGTH % CPU_ADAM_TILE != 0,
               "the threads case is 127 tiles");

#define LESSON "07-offload"

static const char *const tile_hint =
    "TODO 1: adamw_element's operations in its order (common/adamw.c), "
    "one rounding each, every element of [begin, end) and no other";
static const char *const update_hint =
    "TODO 2: tiles that cover [0, count) once each, each updated by "
    "cpu_adam_tile (TODO 1, whose own tests say whether it is right); if "
    "your tile arithmetic is right, are a tile's bounds shared by the "
    "threads (declared outside the parallel loop)? That is a data race, "
    "and make tsan L=07 T=2 names its line";

/* ---- The reference --------------------------------------------------------- */

/* A case's buffers (producer/07-offload.h), from the judge's own heap. */
static buffers buffers_alloc(size_t room)
{
    buffers b = { room, malloc(room * sizeof(float) + 1),
                  malloc(room * sizeof(float) + 1),
                  malloc(room * sizeof(float) + 1),
                  malloc(room * sizeof(bf16) + 1),
                  malloc(room * sizeof(bf16) + 1) };
    ck_assert_msg(b.master && b.m && b.v && b.grads && b.params,
                  "the tests are out of memory");
    return b;
}

/* What CASE_STEPS steps of adamw_step_mixed make of case k's buffers on
 * elements [offset, offset + n). */
static void reference_case(int k, size_t offset, buffers *b)
{
    const size_t n = case_lengths[k];
    const uint64_t seed = case_seed(k);
    case_fill_state(seed, b->room, b->master, b->m, b->v, b->params);
    for (int step = 1; step <= CASE_STEPS; step++) {
        case_fill_grads(seed, step, b->room, b->grads);
        adamw_step_mixed(&case_config, step, b->master + offset,
                         b->m + offset, b->v + offset, b->grads + offset,
                         CASE_SCALE, b->params + offset, n);
    }
}

/* The first element whose bits differ, or `count`. */
static size_t first_difference(const void *expected, const void *got,
                               size_t size, size_t count)
{
    const unsigned char *a = expected, *b = got;
    /* Whole blocks first: ten million elements, compared in a blink. */
    size_t block = 4096 / size, i = 0;
    while (i + block <= count &&
           memcmp(a + i * size, b + i * size, block * size) == 0)
        i += block;
    for (; i < count; i++)
        if (memcmp(a + i * size, b + i * size, size) != 0)
            return i;
    return count;
}

static uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* Fails the test at the first element of `name` whose bits differ from
 * the reference's after `steps` steps: which element, where it is in the
 * range, expected and got, with their bits. `element_size` is 4 (fp32) or
 * 2 (bf16). Elements [first, first + n) of the buffer are the range; `what`
 * says what ran. */
static void expect_same_bits(const char *name, const void *expected,
                             const void *got, size_t element_size,
                             size_t room, size_t first, size_t n, int steps,
                             const char *what, const char *hint)
{
    size_t i = first_difference(expected, got, element_size, room);
    if (i == room)
        return;
    double want, have;
    unsigned want_bits, have_bits;
    if (element_size == sizeof(float)) {
        float a, b;
        memcpy(&a, (const char *)expected + i * element_size, sizeof a);
        memcpy(&b, (const char *)got + i * element_size, sizeof b);
        want = a, have = b;
        want_bits = float_bits(a), have_bits = float_bits(b);
    } else {
        bf16 a, b;
        memcpy(&a, (const char *)expected + i * element_size, sizeof a);
        memcpy(&b, (const char *)got + i * element_size, sizeof b);
        want = bf16_to_float(a), have = bf16_to_float(b);
        want_bits = a, have_bits = b;
    }
    int digits = element_size == sizeof(float) ? 8 : 4;
    if (i < first || i >= first + n)
        ck_abort_msg("%s: %s[%zd] (relative to the range's start) is outside "
                     "the %zu elements updated, and changed: it was %.9g "
                     "(0x%0*x) and is %.9g (0x%0*x). Hint: %s", what, name,
                     (ptrdiff_t)i - (ptrdiff_t)first, n, want, digits,
                     want_bits, have, digits, have_bits, hint);
    /* A few units in the last place apart: the right operations rounded
     * in another order or grouping. Further apart, a wrong moment is a
     * wrong gradient term (the moments come from the gradient alone),
     * most often the weight decay added to it. */
    const unsigned apart = have_bits > want_bits ? have_bits - want_bits
                                                 : want_bits - have_bits;
    const bool last_bits = element_size == sizeof(float) && apart <= 16;
    const bool moment = strcmp(name, "m") == 0 || strcmp(name, "v") == 0;
    /* The callers compare m and v before master: a wrong master with
     * right moments is wrong in the step from them to the weight. */
    const bool master = strcmp(name, "master") == 0;
    const char *why =
        last_bits ? " (they differ in the last bits only: the same "
                    "operations in another order or grouping, such as "
                    "(1 - beta2) * (g * g) for (1 - beta2) * g * g, a "
                    "division made a multiplication by the reciprocal, such "
                    "as m * (1 / correction1) for m / correction1, or some "
                    "of them in double, such as sqrt for sqrtf or 1e-8 for "
                    "1e-8f, round differently)"
        : moment && have == 0 && want != 0
            ? " (it is 0: the new moment was computed but never written "
              "back to the buffer?)"
        : moment ? " (m = beta1 m + (1 - beta1) g and v = beta2 v + "
                   "(1 - beta2) g g, written back: the gradient alone, beta1 "
                   "for m and beta2 for v; AdamW's weight decay is "
                   "decoupled, applied to the weight, and never enters them)"
        : master ? " (m and v are right: what differs is the step from them "
                   "to the weight: the bias corrections, epsilon added to "
                   "the square root of v's estimate, not under it, the "
                   "learning rate, the weight decay)"
        : "";
    ck_abort_msg("%s: %s[%zu] is %.9g (0x%0*x); adamw_step_mixed gives %.9g "
                 "(0x%0*x), after %d step%s. Hint: %s%s", what, name,
                 i - first, have, digits, have_bits, want, digits, want_bits,
                 steps, steps == 1 ? "" : "s", hint, why);
}

/* Whether element i of a case (seed) holds, in all of its state (master
 * weight, m and v), what the reference gives it after s of `steps` steps,
 * s < steps: s, the element left out of every step after s; -1 if no
 * such s. Each element's update is its own, so it is replayed alone. */
static int steps_in_element(uint64_t seed, size_t i, int steps,
                            const buffers *got)
{
    float master = case_master(seed, i), m = 0.0f, v = 0.0f;
    bf16 param = bf16_from_float(master);
    for (int s = 0; s < steps; s++) {
        if (float_bits(master) == float_bits(got->master[i]) &&
            float_bits(m) == float_bits(got->m[i]) &&
            float_bits(v) == float_bits(got->v[i]))
            return s;
        bf16 grad = case_grad(seed, s + 1, i);
        adamw_step_mixed(&case_config, s + 1, &master, &m, &v, &grad,
                         CASE_SCALE, &param, 1);
    }
    return -1;
}

/* Before the element-by-element comparisons of a case (seed): the first
 * element whose state differs, if all of it stopped at an earlier step's
 * values, was left out of the steps after (a tile missed), and is said to
 * be; any other difference is left to expect_same_bits. */
static void expect_none_left_out(const buffers *want, const buffers *got,
                                 size_t room, size_t first, size_t n,
                                 int steps, uint64_t seed, const char *what,
                                 const char *hint)
{
    size_t i = first_difference(want->m, got->m, sizeof(float), room);
    size_t in_v = first_difference(want->v, got->v, sizeof(float), room);
    size_t in_master = first_difference(want->master, got->master,
                                        sizeof(float), room);
    i = in_v < i ? in_v : i;
    i = in_master < i ? in_master : i;
    if (i < first || i >= first + n)
        return;
    int s = steps_in_element(seed, i, steps, got);
    if (s < 0)
        return;
    char left_out[64];
    if (s == 0)
        snprintf(left_out, sizeof left_out, "was never updated");
    else
        snprintf(left_out, sizeof left_out, "was not updated after step %d",
                 s);
    ck_abort_msg("%s: element %zu's master weight, m and v are %.9g, %.9g "
                 "and %.9g, their values after %d of the %d step%s "
                 "(adamw_step_mixed gives %.9g, %.9g and %.9g after all of "
                 "them): the element %s. Hint: %s (each element is updated "
                 "once at every step, in its tile)", what, i - first,
                 (double)got->master[i], (double)got->m[i],
                 (double)got->v[i], s, steps, steps == 1 ? "" : "s",
                 (double)want->master[i], (double)want->m[i],
                 (double)want->v[i], left_out, hint);
}

/* ---- TODO 1 and 2: the same bits as adamw_step_mixed ----------------------- */

enum { EXACT_TIMEOUT_S = 15 };
/* The cases of 10^7 elements under the sanitizers, which run threaded code
 * 5 to 15 times slower: a case stopped at its limit there, on a busy
 * machine, would hide the very report the sanitized pass exists for (a
 * race found nowhere else), and count as passed. */
#ifdef HARNESS_SHADOW_MEMORY
enum { EXACT_LARGE_TIMEOUT_S = 60, EXACT_LARGE_RUN_S = 55 };
#else
enum { EXACT_LARGE_TIMEOUT_S = EXACT_TIMEOUT_S,
       EXACT_LARGE_RUN_S = EXACT_TIMEOUT_S };
#endif

static char *const two_threads[] = { "OMP_NUM_THREADS=2", NULL };

/* The tiles of one step of update (producer: tiles-o): each non-empty,
 * at most CPU_ADAM_TILE, inside [0, n), and together every element once;
 * no tile at all for n = 0. */
static void expect_tiles_cover(const uint64_t *tiles, size_t count, int step,
                               size_t n, const char *what)
{
    size_t covered = 0, calls = 0;
    unsigned char *times = calloc(n + 1, 1);
    ck_assert_msg(times != NULL, "the tests are out of memory");
    for (size_t t = 0; t < count; t++) {
        const uint64_t *tile = &tiles[3 * t];
        if (tile[0] != (uint64_t)step)
            continue;
        calls++;
        uint64_t begin = tile[1], end = tile[2];
        ck_assert_msg(begin < end && end <= n, "%s, step %d: tile_done was "
                      "called for [%" PRIu64 ", %" PRIu64 "), which is %s "
                      "of the %zu elements. Hint: %s", what, step, begin, end,
                      begin >= end ? "empty: a tile holds at least one"
                                   : "not inside [0, count)",
                      n, update_hint);
        ck_assert_msg(end - begin <= CPU_ADAM_TILE, "%s, step %d: the tile "
                      "[%" PRIu64 ", %" PRIu64 ") holds %" PRIu64 " elements, "
                      "more than CPU_ADAM_TILE (%d). Hint: %s", what, step,
                      begin, end, end - begin, CPU_ADAM_TILE, update_hint);
        /* Tile k is [k TILE, (k+1) TILE), the last one shorter: the
         * offload driver keeps one copy up per tile, found by begin / TILE. */
        const uint64_t expected_end = begin + CPU_ADAM_TILE < n
                                          ? begin + CPU_ADAM_TILE : n;
        ck_assert_msg(begin % CPU_ADAM_TILE == 0 && end == expected_end,
                      "%s, step %d: the tile [%" PRIu64 ", %" PRIu64 ") is "
                      "not one of the tiles [k CPU_ADAM_TILE, (k+1) "
                      "CPU_ADAM_TILE) (the last one ending at %zu): the "
                      "offload driver sends tile k up with copy k. Hint: %s",
                      what, step, begin, end, n, update_hint);
        /* (No ck_assert per element: each one costs Check a write to
         * its pipe.) */
        for (uint64_t i = begin; i < end; i++) {
            if (times[i] != 0)
                ck_abort_msg("%s, step %d: element %" PRIu64 " is in two "
                             "tiles (tile_done was called for a range that "
                             "overlaps another, [%" PRIu64 ", %" PRIu64
                             ")). Hint: %s", what, step, i, begin, end,
                             update_hint);
            times[i] = 1;
        }
        covered += end - begin;
    }
    if (covered != n) {
        size_t missing = 0;
        while (missing < n && times[missing])
            missing++;
        free(times);
        ck_abort_msg("%s, step %d: element %zu of %zu is in no tile "
                     "(tile_done was called %zu time%s). Hint: %s", what,
                     step, missing, n, calls, calls == 1 ? "" : "s",
                     n == 0 ? "" : update_hint);
    }
    free(times);
}

/* Case _i: length case_lengths[_i / 2]; even _i cpu_adam_tile, odd
 * cpu_adam_update. The producer's outputs, for each offset, against the
 * reference computed here. */
/* DIR/NAME.bin's tiles, (step, begin, end) each, into fresh memory. */
static uint64_t *read_tiles(const char *dir, const char *name,
                            const char *where, size_t *count)
{
    char path[HARNESS_PATH + 64];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *file = fopen(path, "rb");
    ck_assert_msg(file != NULL, "%s: the producer wrote no %s", where, name);
    fseek(file, 0, SEEK_END);
    long bytes = ftell(file);
    fclose(file);
    *count = (size_t)bytes / (3 * sizeof(uint64_t));
    uint64_t *tiles = malloc(3 * *count * sizeof *tiles + 1);
    ck_assert_msg(tiles != NULL, "the tests are out of memory");
    harness_read_output(dir, name, tiles, 3 * sizeof *tiles, *count);
    return tiles;
}

START_TEST(exact_case)
{
    const int k = _i / 2;
    const bool update = _i % 2 == 1;
    const size_t n = case_lengths[k];
    const bool every = n <= CASE_EVERY_OFFSET;
    const size_t first = every ? 0 : LARGE_OFFSET;
    const size_t last = every ? CASE_MAX_OFFSET : LARGE_OFFSET;
    char dir[HARNESS_PATH], args[64], what[192];
    snprintf(args, sizeof args, "%d %zu %zu", k, first, last);
    snprintf(what, sizeof what, "%s on %zu element%s, %d steps%s",
             update ? "cpu_adam_update" : "cpu_adam_tile", n,
             n == 1 ? "" : "s", CASE_STEPS,
             update ? " on 2 threads (step 2 with tile_done NULL)" : "");
    harness_out_dir(dir);
    harness_produce_case(LESSON, update ? "update" : "tile", dir, args,
                         update ? two_threads : NULL,
                         every ? EXACT_TIMEOUT_S : EXACT_LARGE_RUN_S,
                         what);

    const size_t room = CASE_ROOM + n + CASE_ROOM;
    buffers want = buffers_alloc(room), got = buffers_alloc(room);
    for (size_t o = first; o <= last; o++) {
        char name[48], where[256];
        snprintf(where, sizeof where, "%s, starting %zu element%s past a "
                 "64-byte boundary", what, o, o == 1 ? "" : "s");
        reference_case(k, o, &want);
        snprintf(name, sizeof name, "master-%zu", o);
        harness_read_output(dir, name, got.master, sizeof(float), room);
        snprintf(name, sizeof name, "m-%zu", o);
        harness_read_output(dir, name, got.m, sizeof(float), room);
        snprintf(name, sizeof name, "v-%zu", o);
        harness_read_output(dir, name, got.v, sizeof(float), room);
        snprintf(name, sizeof name, "grads-%zu", o);
        harness_read_output(dir, name, got.grads, sizeof(bf16), room);
        snprintf(name, sizeof name, "params-%zu", o);
        harness_read_output(dir, name, got.params, sizeof(bf16), room);
        const char *hint = update ? update_hint : tile_hint;
        /* The moments first: the master weight and the parameter follow
         * from them, so the first of these to differ is nearest the
         * mistake. */
        expect_none_left_out(&want, &got, room, o, n, CASE_STEPS,
                             case_seed(k), where, hint);
        expect_same_bits("m", want.m, got.m, sizeof(float), room, o, n,
                         CASE_STEPS, where, hint);
        expect_same_bits("v", want.v, got.v, sizeof(float), room, o, n,
                         CASE_STEPS, where, hint);
        expect_same_bits("master", want.master, got.master, sizeof(float),
                         room, o, n, CASE_STEPS, where, hint);
        expect_same_bits("params", want.params, got.params, sizeof(bf16),
                         room, o, n, CASE_STEPS, where, update ? hint
                         : "TODO 1: the new parameter is bf16_from_float of "
                           "the new master weight, stored in the same pass");
        expect_same_bits("grads", want.grads, got.grads, sizeof(bf16), room,
                         o, n, CASE_STEPS, where, "the gradients are only "
                         "read");
        if (update) {
            snprintf(name, sizeof name, "tiles-%zu", o);
            size_t count;
            uint64_t *tiles = read_tiles(dir, name, where, &count);
            for (size_t t = 0; t < count; t++)
                ck_assert_msg(tiles[3 * t] != 2, "%s: tile_done was NULL at "
                              "step 2, and something was called in its place."
                              " Hint: %s", where, update_hint);
            expect_tiles_cover(tiles, count, 1, n, where);
            expect_tiles_cover(tiles, count, 3, n, where);
            free(tiles);
        }
    }
    if (update && n > CASE_EVERY_OFFSET) {
        /* A whole number of tiles (the producer's update on WHOLE_TILES
         * tiles): a tile count rounded up one too far adds an empty one,
         * which no length above shows. */
        char where[160];
        snprintf(where, sizeof where, "cpu_adam_update on %d elements, %d "
                 "whole tiles", WHOLE_TILES * CPU_ADAM_TILE, WHOLE_TILES);
        size_t count;
        uint64_t *tiles = read_tiles(dir, "tiles-whole", where, &count);
        expect_tiles_cover(tiles, count, 1,
                           (size_t)WHOLE_TILES * CPU_ADAM_TILE, where);
        free(tiles);
    }
    buffers_free(&want);
    buffers_free(&got);
    harness_remove_out_dir(dir);
}
END_TEST

/* ---- TODO 1: the vector unit ---------------------------------------------- */

/* The instructions of `function` in objdump's text, one line each, into a
 * fresh string; NULL when the function is not there. */
static char *function_text(const char *disassembly, const char *function)
{
    char header[128];
    snprintf(header, sizeof header, "<%s>:\n", function);
    const char *start = strstr(disassembly, header);
    if (start == NULL)
        return NULL;
    start += strlen(header);
    /* The function ends at the next symbol's header, after a blank line. */
    const char *end = strstr(start, "\n\n");
    size_t length = end != NULL ? (size_t)(end - start) : strlen(start);
    char *text = malloc(length + 1);
    ck_assert_msg(text != NULL, "the tests are out of memory");
    memcpy(text, start, length);
    text[length] = '\0';
    return text;
}

/* How many instruction lines of `text` have one of `mnemonics` as their
 * instruction and an operand holding one of `operands` (NULL-terminated
 * lists); the widest register seen is noted in `widest` (x86: 'x', 'y',
 * 'z'; aarch64: 'v', 'z'). */
static int count_packed(const char *text, const char *const mnemonics[],
                        const char *const operands[], char *widest)
{
    int count = 0;
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *next = strchr(line, '\n');
        size_t length = next != NULL ? (size_t)(next - line) : strlen(line);
        char buffer[256];
        if (length >= sizeof buffer)
            length = sizeof buffer - 1;
        memcpy(buffer, line, length);
        buffer[length] = '\0';
        /* "  addr:\tmnemonic operands": the instruction after the tab. */
        char *instruction = strchr(buffer, '\t');
        if (instruction != NULL) {
            instruction++;
            char *space = instruction + strcspn(instruction, " \t");
            size_t word = (size_t)(space - instruction);
            for (int k = 0; mnemonics[k] != NULL; k++) {
                if (strlen(mnemonics[k]) != word ||
                    strncmp(instruction, mnemonics[k], word) != 0)
                    continue;
                for (int o = 0; operands[o] != NULL; o++)
                    if (strstr(space, operands[o]) != NULL) {
                        count++;
                        char kind = operands[o][1] == 'v' ? 'v'
                                                          : operands[o][1];
                        if (kind == 'z' || (kind == 'y' && *widest != 'z') ||
                            (kind == 'x' && *widest == '\0') ||
                            (kind == 'v' && *widest == '\0'))
                            *widest = kind;
                        break;
                    }
            }
        }
        line = next != NULL ? next + 1 : NULL;
    }
    return count;
}

/* Looks for objdump on PATH. */
static bool have_objdump(void)
{
    const char *path = getenv("PATH");
    char *copy = strdup(path != NULL ? path : "/usr/bin:/bin");
    ck_assert(copy != NULL);
    bool found = false;
    for (char *dir = strtok(copy, ":"); dir != NULL && !found;
         dir = strtok(NULL, ":")) {
        char candidate[HARNESS_PATH];
        snprintf(candidate, sizeof candidate, "%s/objdump", dir);
        found = access(candidate, X_OK) == 0;
    }
    free(copy);
    return found;
}

/* What cpu_adam_tile executes, not only what its binary holds: packed
 * instructions in a loop that does no work (beside a loop that does it
 * one element at a time) are in the binary too. The producer
 * single-steps cpu_adam_tile on 64 and on 192 elements (producer.h,
 * counted cases) and counts the instructions each call executes; the
 * difference over the 128 elements between is what one more element
 * costs, free of what a call costs anyway.
 * The bound: a loop one element at a time executes, for each element, at
 * least one instruction for each operation of the update: the gradient
 * widened and scaled (2), m (3), v (4), the two bias corrections (2), the
 * square root, its epsilon and the division (3), the decay and the
 * learning rate (4), the bf16 rounding (3 or more), and the four stores:
 * 25 or more, even with every load folded into an operand. A vector loop
 * does each for 4 elements or more at once (SSE and NEON hold 4 floats,
 * AVX 8, AVX-512 16), so at most a quarter of that and the loop's own
 * few instructions: measured 3.0 here with AVX-512, 56 for the same
 * operations in a function called for each element, and 15.9 for a loop a
 * walkthrough unrolled by hand, eight elements a pass, which GCC
 * vectorised in part (packed square roots among scalar work). 20 lies
 * between that and 25. */
enum { INSTRUCTIONS_PER_ELEMENT_MAX = 20 };

static void expect_vector_work(char *executed, size_t size)
{
    char dir[HARNESS_PATH];
    harness_out_dir(dir);
    run_result r = harness_produce(LESSON, "instructions", dir, NULL, NULL,
                                   15);
    if (r.started && !r.timed_out && r.signal == 0 &&
        r.exit_status == PRODUCER_NOT_COUNTED) {
        char line[160] = "";
        sscanf(r.err, "%159[^\n]", line);
        snprintf(executed, size, "the instructions it executes not counted "
                 "here (%s)", line);
        run_result_free(&r);
        harness_remove_out_dir(dir);
        return;
    }
    ck_assert_msg(r.started && !r.timed_out && r.signal == 0 &&
                  r.exit_status == 0, "cpu_adam_tile on 64 and 192 "
                  "elements, single-stepped to count its instructions, did "
                  "not run to its end (%s, exit status %d): %s",
                  r.timed_out ? "timed out" : "stopped", r.exit_status,
                  r.err != NULL ? r.err : "");
    run_result_free(&r);
    /* The producer stops the code at the start and the end of each call:
     * any other stop is code that stopped itself, splitting the count. */
    uint64_t stops, counts[INSTRUCTION_LENGTH_COUNT];
    harness_read_output(dir, "stops", &stops, sizeof stops, 1);
    ck_assert_msg(stops == 2 * INSTRUCTION_LENGTH_COUNT, "cpu_adam_tile "
                  "stopped its own process (SIGSTOP) while its instructions "
                  "were counted: %" PRIu64 " stops, where the producer makes "
                  "%d", stops, 2 * INSTRUCTION_LENGTH_COUNT);
    harness_read_output(dir, "instructions", counts, sizeof counts[0],
                        INSTRUCTION_LENGTH_COUNT);
    harness_remove_out_dir(dir);
    const size_t lengths[] = INSTRUCTION_LENGTHS;
    const size_t more = lengths[1] - lengths[0];
    const double each = counts[1] > counts[0]
                            ? (double)(counts[1] - counts[0]) / (double)more
                            : 0.0;
    ck_assert_msg(counts[1] > counts[0] &&
                  each <= INSTRUCTIONS_PER_ELEMENT_MAX,
                  "cpu_adam_tile executed %.1f instructions for each element "
                  "(single-stepped: %" PRIu64 " instructions on %zu elements, "
                  "%" PRIu64 " on %zu), more than %d: the work of a loop "
                  "one element at a time, which needs 25 or more, whatever "
                  "packed instructions the function also holds (a vector "
                  "loop needs a few: 3 for the reference here). Hint: TODO "
                  "1: the update's own loop under #pragma omp simd, with no "
                  "call it cannot inline",
                  each, counts[0], lengths[0], counts[1], lengths[1],
                  INSTRUCTIONS_PER_ELEMENT_MAX);
    snprintf(executed, size, "%.1f instructions an element, single-stepped",
             each);
}

START_TEST(vector_instructions)
{
#if defined(__x86_64__) || defined(__aarch64__)
    if (!have_objdump())
        HARNESS_SKIP("objdump (GNU binutils) is not installed, so the "
                     "compiled cpu_adam_tile cannot be read");
    /* A sanitizer build (make test-full) is compiled at -O1 for the
     * sanitizers' sake, and its instrumented loops stay scalar: the check
     * is for the optimised builds. The build folder says how it was made
     * (flags.txt, beside the lesson's folder). */
    char flags_path[HARNESS_PATH];
    snprintf(flags_path, sizeof flags_path, "%s/../flags.txt",
             harness_program(LESSON, ""));
    FILE *flags_file = fopen(flags_path, "r");
    if (flags_file != NULL) {
        char flags[4096];
        size_t length = fread(flags, 1, sizeof flags - 1, flags_file);
        fclose(flags_file);
        flags[length] = '\0';
        if (strstr(flags, "-fsanitize") != NULL)
            HARNESS_SKIP("this build is instrumented by sanitizers, which "
                         "keep its loops scalar; the optimised builds are "
                         "checked for vector instructions");
    }
    /* harness_program names a file of the lesson's build folder. */
    char object[HARNESS_PATH];
    snprintf(object, sizeof object, "%s",
             harness_program(LESSON, "cpu_adam.o"));
    ck_assert_msg(access(object, R_OK) == 0, "%s is missing: build the "
                  "lesson first (make check L=07 does)", object);
    char *argv[] = { "objdump", "-d", "-r", "--no-show-raw-insn", object,
                     NULL };
    run_result r = harness_run(argv, NULL, 20);
    ck_assert_msg(r.started && !r.timed_out && r.exit_status == 0,
                  "objdump -d %s failed: %s", object,
                  r.err != NULL ? r.err : "");
    char *text = function_text(r.out, "cpu_adam_tile");
    run_result_free(&r);
    ck_assert_msg(text != NULL, "cpu_adam.o has no function cpu_adam_tile: "
                  "it must be defined in cpu_adam.c (TODO 1)");
    if (strstr(text, "not_done_at") != NULL) {
        free(text);
        ck_abort_msg("not started: lessons/" LESSON "/cpu_adam.c: "
                     "cpu_adam_tile still calls NOT_DONE() (TODO 1)");
    }
    char widest = '\0';
#if defined(__x86_64__)
    static const char *const sqrts[] = { "sqrtps", "vsqrtps", NULL };
    static const char *const divisions[] = { "divps", "vdivps", NULL };
    static const char *const registers[] = { "%zmm", "%ymm", "%xmm", NULL };
    int sqrt_count = count_packed(text, sqrts, registers, &widest);
    char ignored = '\0';
    int division_count = count_packed(text, divisions, registers, &ignored);
    const char *width = widest == 'z' ? "AVX-512 (zmm, 16 floats)"
                        : widest == 'y' ? "AVX (ymm, 8 floats)"
                                        : "SSE (xmm, 4 floats)";
#else
    static const char *const sqrts[] = { "fsqrt", NULL };
    static const char *const divisions[] = { "fdiv", NULL };
    static const char *const registers[] = { "\tv", " v", "\tz", " z",
                                             NULL };
    int sqrt_count = count_packed(text, sqrts, registers, &widest);
    char ignored = '\0';
    int division_count = count_packed(text, divisions, registers, &ignored);
    const char *width = widest == 'z' ? "SVE (z registers)"
                                      : "NEON (v registers, 4 floats)";
#endif
    free(text);
    ck_assert_msg(sqrt_count > 0 && division_count > 0, "cpu_adam_tile "
                  "(%s) has %d packed square root%s and %d packed "
                  "division%s: its loop runs one element at a time, not a "
                  "vector of them. Hint: TODO 1: #pragma omp simd on the "
                  "loop, and no parallel region (the threads are TODO 2's: "
                  "#pragma omp parallel moves the loop out of cpu_adam_tile "
                  "into a function of OpenMP's); the constants in local "
                  "variables; no call the "
                  "compiler cannot inline (sqrtf is fine: lesson.mk gives "
                  "-fno-math-errno), no if in the loop (a ternary "
                  "is fine); GCC's -fopt-info-vec-missed and Clang's "
                  "-Rpass-missed=loop-vectorize say why not", object,
                  sqrt_count, sqrt_count == 1 ? "" : "s", division_count,
                  division_count == 1 ? "" : "s");
    char executed[256];
    expect_vector_work(executed, sizeof executed);
    /* Passed: what it found, for the record (make check shows it). */
    printf("  cpu_adam_tile: %d packed square root%s, %d packed division%s; "
           "widest: %s; %s\n", sqrt_count, sqrt_count == 1 ? "" : "s",
           division_count, division_count == 1 ? "" : "s", width, executed);
#else
    HARNESS_SKIP("the packed instructions are known here for x86-64 and "
                 "aarch64 only, not for this machine's architecture");
#endif
}
END_TEST

/* ---- TODO 2: the threads ---------------------------------------------------- */

enum { THREADS_TIMEOUT_S = 20 };

/* For qsort: tile notes by where their tiles begin. */
static int by_begin(const void *a, const void *b)
{
    const tile_note *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The samples (every SAMPLE_STRIDE-th element) in [begin, end). */
static uint64_t samples_in(uint64_t begin, uint64_t end)
{
    uint64_t s = SAMPLE_STRIDE;
    return (end + s - 1) / s - (begin + s - 1) / s;
}

START_TEST(threads_case)
{
    const size_t n = THREADS_CASE_LENGTH;
    char dir[HARNESS_PATH];
    const char *what = "cpu_adam_update on 2 threads (OMP_NUM_THREADS=2)";
    static char *env[] = { "OMP_NUM_THREADS=2", "OMP_WAIT_POLICY=passive",
                           NULL };
    harness_out_dir(dir);
    harness_produce_case(LESSON, "threads", dir, NULL, env,
                         THREADS_TIMEOUT_S, what);

    uint64_t count;
    harness_read_output(dir, "count", &count, sizeof count, 1);
    ck_assert_msg(count > 0, "%s: tile_done was never called. Hint: TODO 2: "
                  "call it after each tile", what);
    ck_assert_msg(count <= TILE_LOG_CAPACITY, "%s: tile_done was called %"
                  PRIu64 " times, for tiles of %.0f elements on average: "
                  "far smaller than CPU_ADAM_TILE (%d). Hint: TODO 2: tiles "
                  "of CPU_ADAM_TILE elements", what, count,
                  (double)n / (double)count, CPU_ADAM_TILE);
    tile_note *notes = malloc(count * sizeof *notes);
    thread_start starts[THREADS_CASE_THREADS];
    buffers want = buffers_alloc(n), seen = buffers_alloc(n);
    bf16 *params = malloc(n * sizeof *params);
    ck_assert_msg(notes != NULL && params != NULL, "the tests are out of "
                  "memory");
    harness_read_output(dir, "notes", notes, sizeof *notes, count);
    harness_read_output(dir, "starts", starts, sizeof starts[0],
                        THREADS_CASE_THREADS);
    harness_read_output(dir, "seen-master", seen.master, sizeof(float), n);
    harness_read_output(dir, "seen-m", seen.m, sizeof(float), n);
    harness_read_output(dir, "seen-v", seen.v, sizeof(float), n);
    harness_read_output(dir, "seen-params", seen.params, sizeof(bf16), n);
    harness_read_output(dir, "params", params, sizeof(bf16), n);
    rendezvous_note side_by_side;
    harness_read_output(dir, "rendezvous", &side_by_side,
                        sizeof side_by_side, 1);
    harness_remove_out_dir(dir);

    /* Every element in one tile, at most CPU_ADAM_TILE long. */
    tile_note *sorted = malloc(count * sizeof *sorted);
    ck_assert_msg(sorted != NULL, "the tests are out of memory");
    memcpy(sorted, notes, count * sizeof *sorted);
    qsort(sorted, count, sizeof *sorted, by_begin);
    /* (Checked with if, not ck_assert: each ck_assert costs Check a write
     * to its pipe, and there may be tens of thousands of tiles.) */
    uint64_t expected_begin = 0;
    for (uint64_t k = 0; k < count; k++) {
        const tile_note *tile = &sorted[k];
        if (tile->begin < expected_begin)
            ck_abort_msg("%s: element %" PRIu64 " was handed over twice "
                         "(tile_done was called for [%" PRIu64 ", %" PRIu64
                         ") after a call whose tile ends at %" PRIu64 ": the "
                         "same tile twice, or two that overlap). Hint: %s%s",
                         what, tile->begin, tile->begin, tile->end,
                         expected_begin, update_hint,
                         tile->begin == 0 && k > 0
                             ? ". Tile 0 more than once: did every thread "
                               "run the whole loop (#pragma omp parallel "
                               "without for: each thread runs every "
                               "iteration)?"
                             : "");
        if (tile->begin > expected_begin)
            ck_abort_msg("%s: elements [%" PRIu64 ", %" PRIu64 ") are in no "
                         "tile (tile_done was never called for them). Hint: "
                         "%s", what, expected_begin, tile->begin,
                         update_hint);
        if (tile->end <= tile->begin || tile->end > n)
            ck_abort_msg("%s: tile_done was called for [%" PRIu64 ", %"
                         PRIu64 "), which is %s. Hint: %s", what,
                         tile->begin, tile->end, tile->end <= tile->begin
                         ? "empty" : "beyond the last element",
                         update_hint);
        if (tile->end - tile->begin > CPU_ADAM_TILE)
            ck_abort_msg("%s: the tile [%" PRIu64 ", %" PRIu64 ") holds %"
                         PRIu64 " elements, more than CPU_ADAM_TILE (%d). "
                         "Hint: %s", what, tile->begin, tile->end,
                         tile->end - tile->begin, CPU_ADAM_TILE,
                         update_hint);
        expected_begin = tile->end;
    }
    free(sorted);
    ck_assert_msg(expected_begin == n, "%s: elements [%" PRIu64 ", %zu) are "
                  "in no tile (tile_done was never called for them). Hint: "
                  "%s", what, expected_begin, n, update_hint);

    /* Handed over as they finish. In the order the callbacks began, each
     * saw how many sampled parameters had been written, and how many
     * callbacks had begun by the end of its look. Besides the tiles of
     * those callbacks, a thread can have written at most the tile it is
     * working on, or the one it has just finished and not yet handed
     * over: some tiles, never all of them. */
    uint64_t *handed = calloc(count + 1, sizeof *handed);
    ck_assert(handed != NULL);
    for (uint64_t k = 0; k < count; k++) {
        if (notes[k].order != k)
            ck_abort_msg("the producer's notes are out of order");
        handed[k + 1] = handed[k] + samples_in(notes[k].begin,
                                               notes[k].end);
    }
    const uint64_t slack = 2 * THREADS_CASE_THREADS *
                           (CPU_ADAM_TILE / SAMPLE_STRIDE + 1);
    for (uint64_t k = 0; k < count; k++) {
        uint64_t after = notes[k].begun_after < count ? notes[k].begun_after
                                                      : count;
        uint64_t early = notes[k].written_samples > handed[after]
                         ? notes[k].written_samples - handed[after] : 0;
        if (early > slack)
            ck_abort_msg("%s: when tile_done was called for [%" PRIu64 ", %"
                         PRIu64 ") (call %" PRIu64 " of %" PRIu64 "), about "
                         "%" PRIu64 " parameters were already written that "
                         "no call had handed over yet: the tiles are handed "
                         "over long after they are done. Hint: TODO 2: call "
                         "tile_done right after each tile, in the loop, not "
                         "in a second pass", what, notes[k].begin,
                         notes[k].end, k + 1, count, early * SAMPLE_STRIDE);
    }
    free(handed);

    /* What the driver would have copied at each callback: the final,
     * right values. */
    case_fill_state(THREADS_CASE_SEED, n, want.master, want.m, want.v, NULL);
    case_fill_grads(THREADS_CASE_SEED, 1, n, want.grads);
    adamw_step_mixed(&case_config, 1, want.master, want.m, want.v,
                     want.grads, CASE_SCALE, want.params, n);
    char where[160];
    snprintf(where, sizeof where, "%s, when tile_done was called for its "
             "tile", what);
    const char *final_hint = "TODO 1 first, if cpu_adam_tile's own tests "
                             "fail (a wrong tile shows here too); else "
                             "TODO 2: call tile_done after the tile is "
                             "updated, never before";
    expect_none_left_out(&want, &seen, n, 0, n, 1, THREADS_CASE_SEED, where,
                         final_hint);
    expect_same_bits("m", want.m, seen.m, sizeof(float), n, 0, n, 1, where,
                     final_hint);
    expect_same_bits("v", want.v, seen.v, sizeof(float), n, 0, n, 1, where,
                     final_hint);
    expect_same_bits("master", want.master, seen.master, sizeof(float), n, 0,
                     n, 1, where, final_hint);
    expect_same_bits("params", want.params, seen.params, sizeof(bf16), n, 0,
                     n, 1, where, final_hint);
    expect_same_bits("params", want.params, params, sizeof(bf16), n, 0, n, 1,
                     "cpu_adam_update, when it returned", "TODO 2: each "
                     "element is updated once, in its tile");

    /* Who worked: each thread's CPU time from before the update to the
     * start of its last callback, less the producer's own work in its
     * earlier callbacks (the copy and the look, timed apart). With
     * OMP_WAIT_POLICY=passive a waiting thread sleeps: a thread that only
     * called tile_done, for work another thread did, has next to none. */
    enum { MAX_SEEN = 64 };
    struct {
        int64_t id;
        int omp;
        uint64_t tiles, elements, before_ns, last_in_ns, work_ns;
    } seen_threads[MAX_SEEN];
    int threads = 0;
    for (uint64_t k = 0; k < count; k++) {
        int t = 0;
        while (t < threads && seen_threads[t].id != notes[k].system_thread)
            t++;
        if (t == threads) {
            ck_assert_msg(threads < MAX_SEEN, "%s: tile_done was called from "
                          "more than %d threads; 2 were asked for. Hint: "
                          "TODO 2: one parallel region, with the threads "
                          "OpenMP gives it", what, MAX_SEEN);
            /* A thread the producer's region did not have started within
             * the update: all its time counts. */
            uint64_t before = 0;
            for (int s = 0; s < THREADS_CASE_THREADS; s++)
                if (starts[s].system_thread == notes[k].system_thread)
                    before = starts[s].cpu_ns;
            seen_threads[t].id = notes[k].system_thread;
            seen_threads[t].omp = (int)notes[k].omp_thread;
            seen_threads[t].tiles = seen_threads[t].elements = 0;
            seen_threads[t].before_ns = before;
            seen_threads[t].last_in_ns = 0;
            threads++;
        }
        seen_threads[t].tiles++;
        seen_threads[t].elements += notes[k].end - notes[k].begin;
        if (notes[k].cpu_in_ns > seen_threads[t].last_in_ns)
            seen_threads[t].last_in_ns = notes[k].cpu_in_ns;
    }
    char summary[512] = "";
    uint64_t total_ns = 0;
    for (int t = 0; t < threads; t++) {
        uint64_t spent = seen_threads[t].last_in_ns - seen_threads[t].before_ns;
        uint64_t producer = 0;
        for (uint64_t k = 0; k < count; k++)
            if (notes[k].system_thread == seen_threads[t].id &&
                notes[k].cpu_in_ns < seen_threads[t].last_in_ns)
                producer += notes[k].cpu_out_ns - notes[k].cpu_in_ns;
        seen_threads[t].work_ns = spent > producer ? spent - producer : 0;
        total_ns += seen_threads[t].work_ns;
        size_t used = strlen(summary);
        snprintf(summary + used, sizeof summary - used, "%sOpenMP thread %d: "
                 "%" PRIu64 " tiles, %" PRIu64 " elements, %.1f ms of CPU",
                 t ? "; " : "", seen_threads[t].omp, seen_threads[t].tiles,
                 seen_threads[t].elements, seen_threads[t].work_ns / 1e6);
    }
    ck_assert_msg(threads >= THREADS_CASE_THREADS, "%s: every tile_done "
                  "came from one thread (%s). Hint: TODO 2: the tiles go "
                  "to the threads of a parallel region (#pragma omp "
                  "parallel for), each tile's tile_done from the thread "
                  "that updated it; a schedule's chunk counts iterations, "
                  "here tiles (schedule(dynamic, CPU_ADAM_TILE) hands one "
                  "thread 4096 tiles at once)", what, summary);
    /* Side by side (07-offload.h): one thread held inside its tile's
     * work, as it read the gradients, and no other thread reached them. */
    ck_assert_msg(side_by_side.outcome != RENDEZVOUS_OUTCOME_ALONE, "%s: "
                  "the threads never updated two tiles at the same time. "
                  "The tests held OpenMP thread %" PRId64 " for %.0f s as "
                  "it read a gradient in its tile's work, and in that time "
                  "no other thread read one: each tile waited for the one "
                  "before it to finish (what each thread did: %s). "
                  "Hint: TODO 2: the threads update their tiles side by "
                  "side; a #pragma omp "
                  "critical, ordered or single, or a lock, around the "
                  "update makes them take turns. The tiles share no "
                  "element, and tile_done is safe to call from several "
                  "threads at once: neither needs one", what,
                  side_by_side.held_omp_thread, side_by_side.held_ms / 1e3,
                  summary);
    int working = 0;
    for (int t = 0; t < threads; t++)
        working += seen_threads[t].work_ns * 10 >= total_ns;
    ck_assert_msg(working >= THREADS_CASE_THREADS, "%s: tile_done came from "
                  "%d threads, but fewer did the work (%s; a thread that did "
                  "a fair share has at least a tenth of the CPU time). "
                  "Hint: TODO 2: each thread updates its own tiles and "
                  "hands over those, and only those", what, threads,
                  summary);
    printf("  cpu_adam_update: %s\n", summary);
    free(notes);
    free(params);
    buffers_free(&want);
    buffers_free(&seen);
}
END_TEST

/* ---- The runs ---- */

/* The tests' model and run, lesson 06's: 3 hidden layers of 149 (Ψ =
 * 55885, not a multiple of 2, 3 or 4, so the slices differ by one
 * element; the layers cross the slices' edges), 3 steps of 4 samples a
 * rank from 40 samples, 8 held out. */
static const run_shape test_run = { 3, 149, 3, 4, 40, 8, 1e-3, 0.1 };
/* For the delayed update: 6 steps, the delay from step 2 on, so that
 * steps 3-5 take their gradients on parameters one update old. */
static const run_shape delayed_run = { 3, 149, 6, 4, 40, 8, 1e-3, 0.1 };
enum { DELAY_FROM = 2 };

/* Runs the driver on `ranks` ranks with `extra` flags (NULL-terminated,
 * may be NULL); its report in `out` (NULL: none). */
static run_result run_offload(int ranks, const run_shape *shape,
                              const char *const *extra, const char *out,
                              double timeout_s)
{
    return training_run(LESSON, "train_offload", ranks, shape, extra, out,
                        timeout_s);
}

/* ---- The weights ---- */

/* Every rank's parameters (all Ψ, read back from its device) and its
 * slice of the master weights against the reference's, bitwise: at the
 * first that differs, says where, what it is and what `source` gives (as
 * "rank R's parameter i ... is X; SOURCE Y") into `difference`, and
 * returns false. */
static bool weights_match(const char *out, int ranks,
                          const training_reference *ref, const char *source,
                          char *difference, size_t size)
{
    double *values = malloc(ref->total * sizeof *values);
    ck_assert(values != NULL);
    for (int rank = 0; rank < ranks; rank++) {
        size_t begin, end;
        training_block_of(ref->total, ranks, rank, &begin, &end);
        harness_read_doubles(out, "params", rank, values, ref->total);
        for (size_t i = 0; i < ref->total; i++) {
            double want = bf16_to_float(ref->params[i]);
            if (values[i] == want && signbit(values[i]) == signbit(want))
                continue;
            int owner = 0;
            while (owner + 1 < ranks) {
                size_t b, e;
                training_block_of(ref->total, ranks, owner, &b, &e);
                if (i < e)
                    break;
                owner++;
            }
            /* Another rank's slice reaches this device only through the
             * allgather: said, as that is where to look. */
            snprintf(difference, size, "rank %d's parameter %zu on its "
                     "device (layer %d, in rank %d's slice) is %.9g; %s "
                     "%.9g%s", rank, i, training_layer_of(ref, i), owner, values[i],
                     source, want,
                     owner != rank ? " (another rank's slice: it reaches "
                                     "this device only through the "
                                     "allgather, TODO 5's "
                                     "gather_parameters)" : "");
            free(values);
            return false;
        }
        harness_read_doubles(out, "master", rank, values, end - begin);
        for (size_t k = 0; k < end - begin; k++) {
            double want = ref->master[begin + k];
            if (values[k] == want)
                continue;
            snprintf(difference, size, "rank %d's fp32 master weight %zu "
                     "(layer %d, its slice, in host memory) is %.9g; %s "
                     "%.9g", rank, begin + k, training_layer_of(ref, begin + k),
                     values[k], source, want);
            free(values);
            return false;
        }
    }
    free(values);
    return true;
}

/* The weights, bitwise the reference's; `what` says what ran. */
static void expect_reference_weights(const char *out, int ranks,
                                     const training_reference *ref,
                                     const char *what, const char *source,
                                     const char *hint)
{
    char difference[512];
    if (!weights_match(out, ranks, ref, source, difference,
                       sizeof difference))
        ck_abort_msg("%s: %s. Hint: %s", what, difference, hint);
}

/* The weights of a run with the delayed update from step `delay_from`,
 * bitwise the simulation's with the same delay. When they differ, and are
 * those of another schedule that a slip in TODO 6 gives (no warm-up, no
 * delay at all, the delay a step early or late), the failure names it. */
static void expect_delayed_weights(const char *out, int ranks,
                                   const run_shape *shape, long delay_from,
                                   const training_reference *ref,
                                   const char *what)
{
    static const char *const source = "the reference with the same delay "
                                      "gives";
    char difference[512];
    if (weights_match(out, ranks, ref, source, difference,
                      sizeof difference))
        return;
    const struct {
        long delay_from;
        const char *schedule, *hint;
    } slips[] = {
        { 0, "the delayed update from step 0 on, with no warm-up",
          "the first --dpu steps are the warm-up, undelayed: the delay "
          "begins at step >= o->delay_from" },
        { -1, "no delayed update at all",
          "from step --dpu on, start the step's CPU Adam on "
          "o->update_task and return at once; its parameters go up when "
          "the next update begins" },
        { delay_from - 1, "the delayed update a step early",
          "the delay begins at step o->delay_from itself, not before" },
        { delay_from + 1, "the delayed update a step late",
          "the delay begins at step o->delay_from itself (step >= "
          "o->delay_from), not after it" },
    };
    for (size_t k = 0; k < sizeof slips / sizeof slips[0]; k++) {
        if (slips[k].delay_from == delay_from || slips[k].delay_from < -1 ||
            (k >= 2 && (slips[k].delay_from == 0 ||
                        slips[k].delay_from == -1)))
            continue;
        training_reference other = training_reference_run(
            ranks, shape->batch, shape, slips[k].delay_from);
        char ignored[512];
        bool same = weights_match(out, ranks, &other, "", ignored,
                                  sizeof ignored);
        training_reference_free(&other);
        if (same)
            ck_abort_msg("%s (--dpu %ld): %s. They are bitwise the weights "
                         "of %s. Hint: TODO 6: %s", what, delay_from,
                         difference, slips[k].schedule, slips[k].hint);
    }
    /* The test runs 1 rank before 2 (delayed_update): on more, the run
     * on 1 rank matched, and what differs is what crosses ranks. */
    ck_abort_msg("%s (--dpu %ld): %s. Hint: TODO 6: step s's update runs "
                 "while step s+1 computes on the parameters of update s-1, "
                 "as step s: offload_adam_step(o, o->update_step), whose "
                 "bias corrections count that step; its parameters go up "
                 "when step s+1's update begins, after host_task_wait says "
                 "the task is done, and the last in offload_finish%s; the "
                 "task's function "
                 "reads the context host_task_start was given (o itself, "
                 "if it casts it to offload_state *); step s+1's "
                 "gradients come down into the other set of host_grads "
                 "(o->grads_set) "
                 "while the task reads step s's, "
                 "o->host_grads[o->update_set], the set it was started "
                 "with", what, delay_from,
                 difference,
                 ranks > 1 ? ", each followed by the allgather that gives "
                             "every rank the others' slices (as in TODO 5: "
                             "on 1 rank the weights matched, and the "
                             "allgather is what 2 ranks add)" : "");
}

/* The delayed update overlaps the next step, as observed by given code
 * (offload_state.c's host_task_start, host_task_wait and the task's own
 * thread, main.c's check at the start of each step; the report's
 * host_tasks, host_task_runs_changing_master, host_task_caller_changes
 * and overlap_in_flight lines):
 *   - one host task a delayed update: steps - delay_from started, each
 *     waited for;
 *   - each step after the first delayed one begins with exactly one task
 *     in flight: the previous update, running beside this step's forward
 *     and backward (not waited for within its own update, nor done by the
 *     caller before the step);
 *   - each task changed the master weights while its function ran, seen
 *     on its own thread, on a rank that has some;
 *   - the caller's thread changed them neither before it started the task
 *     (in the same step) nor while the task was in flight: the CPU Adam
 *     ran on the task, not on the caller beside a stand-in.
 * The right weights alone do not show this: the same delay applied
 * synchronously gives the same bits, and no overlap. */
static void expect_overlap(const char *report, int rank, long steps,
                           long delay_from, const char *what)
{
    static const char *const hint =
        "TODO 6: from step o->delay_from on, offload_update starts the "
        "step's CPU Adam with host_task_start(o, &o->update_task, ...) and "
        "returns while it runs; the next offload_update (or offload_finish) "
        "waits for it with host_task_wait, then sends its parameters up";
    unsigned long long tasks[2] = { 0, 0 }, changed[2] = { 0, 0 };
    unsigned long long caller[3] = { 0, 0, 0 }, overlap[2] = { 0, 0 };
    ck_assert_msg(harness_report_values(report, "host_tasks", tasks, 2) == 2 &&
                  harness_report_values(report,
                                        "host_task_runs_changing_master",
                                        changed, 2) == 2 &&
                  harness_report_values(report, "host_task_caller_changes",
                                        caller, 3) == 3 &&
                  harness_report_values(report, "overlap_in_flight",
                                        overlap, 2) == 2,
                  "%s: rank %d's report lacks the host tasks' lines", what,
                  rank);
    const unsigned long long delayed = (unsigned long long)(steps -
                                                            delay_from);
    ck_assert_msg(tasks[0] == delayed && tasks[1] == delayed,
                  "%s, rank %d: %llu host tasks started and %llu waited for "
                  "in %ld steps with the delay from step %ld, where each of "
                  "the %llu delayed updates runs on one. Hint: %s", what,
                  rank, tasks[0], tasks[1], steps, delay_from, delayed,
                  hint);
    ck_assert_msg(overlap[1] == delayed - 1 && overlap[0] == overlap[1],
                  "%s, rank %d: of the %llu steps that begin while the "
                  "previous step's delayed update should be running, %llu "
                  "found its host task still in flight: the update did not "
                  "overlap the next step's forward and backward. Hint: %s",
                  what, rank, overlap[1], overlap[0], hint);
    ck_assert_msg(caller[0] == 0, "%s, rank %d: in %llu of the %llu delayed "
                  "updates the caller's thread changed the master weights "
                  "before it started the host task: the CPU Adam (or a part "
                  "of it) ran on the caller, not on the task. Hint: %s",
                  what, rank, caller[0], caller[2], hint);
    ck_assert_msg(caller[1] == 0, "%s, rank %d: in %llu of the %llu delayed "
                  "updates the caller's thread changed the master weights "
                  "while the host task was in flight, between "
                  "host_task_start and host_task_wait: the CPU Adam ran on "
                  "the caller beside the task, not on it. Hint: %s", what,
                  rank, caller[1], caller[2], hint);
    ck_assert_msg(changed[0] == changed[1],
                  "%s, rank %d: %llu of the %llu host tasks left the master "
                  "weights as they found them while their function ran (seen "
                  "on the task's own thread): the CPU Adam ran outside the "
                  "task. Hint: %s", what, rank, changed[1] - changed[0],
                  changed[1], hint);
}

/* ---- Where the memory lives, and what crosses ---- */

/* Rank `rank`'s own part of layer l, in elements. */
static size_t own_in_layer(const training_reference *ref, int ranks,
                           int rank, int l)
{
    size_t begin, end;
    training_block_of(ref->total, ranks, rank, &begin, &end);
    size_t first = ref->layer_begin[l];
    size_t last = l + 1 < ref->layer_count ? ref->layer_begin[l + 1]
                                           : ref->total;
    size_t from = first > begin ? first : begin, to = last < end ? last : end;
    return to > from ? to - from : 0;
}

/* The largest layer, in elements. */
static size_t largest_layer(const training_reference *ref)
{
    size_t largest = 0;
    for (int l = 0; l < ref->layer_count; l++) {
        size_t last = l + 1 < ref->layer_count ? ref->layer_begin[l + 1]
                                               : ref->total;
        if (last - ref->layer_begin[l] > largest)
            largest = last - ref->layer_begin[l];
    }
    return largest;
}

/* Appends one failure to `failures` (size FAILURES_SIZE), after a "; " when
 * there is one already: every formula a run misses is said at once, so a
 * buffer too many on the device and the bytes it costs on the bus show
 * together. */
enum { FAILURES_SIZE = 4096 };

static void note_failure(char *failures, const char *format, ...)
{
    size_t used = strlen(failures);
    if (used > 0 && used + 2 < FAILURES_SIZE) {
        strcpy(failures + used, "; ");
        used += 2;
    }
    va_list args;
    va_start(args, format);
    vsnprintf(failures + used, FAILURES_SIZE - used, format, args);
    va_end(args);
}

/* What a category's peak must be on rank `rank` (bytes), the formulas of
 * the lesson's README:
 *   device parameters  2Ψ                 all bf16 parameters
 *   device buckets     2 max|layer|       lesson 06's stage 2 bucket
 *   device gradients   2 max(|own ∩ l| + |own ∩ l+1|)
 *                                         the own parts of the layer being
 *                                         reduced and of the one above,
 *                                         still on its way down
 *   host optimizer     12S                master, m, v of the slice
 *   host staging       4S (6S with DPU)   the slice's gradients down (two
 *                                         sets with DPU), parameters up */
static void expect_memory(const char *report, const training_reference *ref,
                          int ranks, int rank, bool delayed, char *failures)
{
    size_t begin, end;
    training_block_of(ref->total, ranks, rank, &begin, &end);
    const unsigned long long slice = end - begin;
    unsigned long long in_flight = 0, one_layer = 0;
    for (int l = 0; l < ref->layer_count; l++) {
        if (own_in_layer(ref, ranks, rank, l) > one_layer)
            one_layer = own_in_layer(ref, ranks, rank, l);
        unsigned long long pair = own_in_layer(ref, ranks, rank, l) +
                                  (l + 1 < ref->layer_count
                                       ? own_in_layer(ref, ranks, rank, l + 1)
                                       : 0);
        if (pair > in_flight)
            in_flight = pair;
    }
    const struct {
        const char *key;
        unsigned long long want;
        const char *hint, *fewer_hint;   /* for a peak below the formula
                                            (NULL: hint) */
    } expected[] = {
        { "peak parameters", 2ull * ref->total,
          "TODO 3: the device holds every bf16 parameter, 2 bytes each, "
          "and nothing else of the model state: no fp32 copy (TODO 5 "
          "sends the slice's bf16 parameters up, ready to use)", NULL },
        { "peak host_optimizer", 12ull * slice,
          "TODO 3: master, m and v of this rank's slice only, fp32, in "
          "host memory (device_host_alloc, MEMORY_HOST_OPTIMIZER); the "
          "CPU Adam updates those own_count elements and no others", NULL },
        { "peak host_staging", (delayed ? 6ull : 4ull) * slice,
          delayed ? "TODOs 3 and 6: the slice's bf16 gradients, two sets "
                    "with the delayed update, and its bf16 parameters"
                  : "TODO 3: the slice's bf16 gradients and its bf16 "
                    "parameters, one set each without the delayed update",
          NULL },
        { "peak buckets", 2ull * largest_layer(ref),
          "lesson 06's stage 2: one layer's gradient at a time, the bucket "
          "stage2_bucket allocates and stage2_backward_done frees once "
          "it is reduced (TODO 3)", NULL },
        { "peak gradients", 2ull * in_flight,
          "TODO 4: a layer's own part waits on the device until its copy "
          "down has landed, at most two layers at once: finish the layer "
          "above's copy once this layer's has started, and free its part "
          "(device_free) once that copy has landed (more than two layers' "
          "parts held: one never freed?)",
          "TODO 4: a copy waited for as soon as it starts is on backward's "
          "critical path; start layer l's copy, then wait for layer l+1's, "
          "which travelled during layer l's backward: two layers' parts "
          "on the device at the peak" },
    };
    for (size_t k = 0; k < sizeof expected / sizeof expected[0]; k++) {
        unsigned long long got =
            harness_report_value(report, rank, expected[k].key);
        if (got == expected[k].want)
            continue;
        /* Fewer parts in flight than the pair is no waste: the layer
         * above's copy finished before this layer's part landed, having
         * travelled during this layer's backward. Whether the copies hid
         * behind backward at all, the device's count of copies waited for
         * at once says (expect_copies_down_overlap). */
        if (strcmp(expected[k].key, "peak gradients") == 0 &&
            got < expected[k].want && got >= 2 * one_layer)
            continue;
        /* Whole bytes a parameter of the model where the formula counts
         * the slice, or a difference of whole bytes a parameter of the
         * slice, names the buffer. */
        char per[128] = "";
        unsigned long long more = got > expected[k].want
                                      ? got - expected[k].want
                                      : expected[k].want - got;
        const char *sign = got > expected[k].want ? "many" : "few";
        if (slice < ref->total && got % ref->total == 0 &&
            expected[k].want % slice == 0)
            snprintf(per, sizeof per, ": %llu bytes a parameter of the "
                     "whole model (Ψ = %zu), for a slice of %llu",
                     got / ref->total, ref->total, slice);
        else if (slice > 0 && more % slice == 0)
            snprintf(per, sizeof per, ": %llu bytes a parameter of its "
                     "slice of %llu too %s", more / slice, slice, sign);
        else if (strcmp(expected[k].key, "peak gradients") == 0 &&
                 got == 2 * one_layer)
            snprintf(per, sizeof per, ": one layer's own part at a time");
        const char *hint = got < expected[k].want &&
                                   expected[k].fewer_hint != NULL
                               ? expected[k].fewer_hint
                               : expected[k].hint;
        note_failure(failures, "rank %d's %s is %llu bytes, expected %llu%s."
                     " Hint: %s", rank, expected[k].key + 5, got,
                     expected[k].want, per, hint);
    }
    /* Memory behind the ledger's back: the process's heap may not grow
     * beyond what the ledger holds by more than the libraries' own
     * bookkeeping (lesson 06's slack: MPI's first-contact buffers, about
     * 56 KiB under MPICH), while a copy of the slice's gradients alone is
     * 2S >= 2 * 55885/4 = 27 KiB and of its fp32 masters 4S >= 54 KiB. */
    enum { HEAP_SLACK = 96 * 1024 };
    unsigned long long heap = harness_report_value(report, rank, "heap_growth");
    unsigned long long held =
        harness_report_value(report, rank, "ledger_growth");
    /* Where the kernel measures the rank from outside (expect_outside),
     * that decides; elsewhere the allocator's count, in the process. */
    if (!harness_outside_measures() && heap > held + HEAP_SLACK)
        note_failure(failures, "rank %d's heap grew by %llu bytes during "
                     "training, but the device and host ledgers by %llu: "
                     "memory allocated behind their backs (malloc?). Hint: "
                     "TODO 3: every buffer through device_alloc or "
                     "device_host_alloc", rank, heap, held);
}

/* The costs as the kernel counts them outside the rank's process (the
 * watch, tests/harness/rank_watch.c): its sockets' bytes against what its
 * MPI calls counted, and how far its memory rose against what ZeRO-Offload
 * lets it hold after its boundary (the driver enters it before
 * offload_create): the device's parameters, bucket and gradients in
 * flight, the host's optimizer state and staging, the collectives'
 * buffers ((P-1) receive and (P-1) send slots of fp32, each at most a
 * chunk or a block) and the loop's batch of inputs. Under a sanitizer,
 * whose shadow memory the kernel counts too, memory is left to the
 * ledgers. */
/* What ZeRO-Offload lets a rank hold after its boundary (the driver
 * enters it before offload_create), in bytes: the device's bf16
 * parameters, bucket and gradients in flight (two layers' own parts), the
 * host's optimizer state (master, m, v) and staging for the slice (two
 * sets of gradients with the delayed update), the collectives' buffers
 * ((P-1) receive and (P-1) send slots of fp32, each at most a chunk or a
 * block) and the loop's batch of inputs. `layout` needs only the model's
 * layers (total, layer_count, layer_begin). */
static unsigned long long offload_allowed(const training_reference *layout,
                                          int ranks, int rank, bool delayed,
                                          const run_shape *shape)
{
    size_t begin, end;
    training_block_of(layout->total, ranks, rank, &begin, &end);
    const unsigned long long slice = end - begin;
    unsigned long long in_flight = 0;
    for (int l = 0; l < layout->layer_count; l++) {
        unsigned long long pair =
            own_in_layer(layout, ranks, rank, l) +
            (l + 1 < layout->layer_count
                 ? own_in_layer(layout, ranks, rank, l + 1)
                 : 0);
        if (pair > in_flight)
            in_flight = pair;
    }
    size_t slot = (layout->total + (size_t)ranks - 1) / (size_t)ranks;
    if (slot > COLLECTIVES_CHUNK_ELEMENTS)
        slot = COLLECTIVES_CHUNK_ELEMENTS;
    return 2ull * layout->total + 12 * slice + (delayed ? 6 : 4) * slice +
           2ull * largest_layer(layout) + 2 * in_flight +
           8ull * (unsigned long long)(ranks - 1) * slot +
           (unsigned long long)shape->batch *
               (unsigned long long)shape_of(shape).inputs * sizeof(float);
}

static const char *const todo_hint_of_traffic =
    "TODOs 4-5 and lesson 06's stage 2: every byte between the ranks goes "
    "through the lesson's MPI calls (the reduce-scatter, the allgather)";

static void expect_outside(const run_result *r, const char *report,
                           const training_reference *ref, int ranks, int rank,
                           bool delayed, const run_shape *shape,
                           const char *what)
{
    watch_report w = harness_read_watch(r, rank);
    ledger_traffic counted = harness_ledger_traffic(report, ranks);
    harness_expect_sent(&w, rank, &counted, what, todo_hint_of_traffic);
    harness_expect_received(&w, rank, &counted, what, todo_hint_of_traffic);
#ifndef HARNESS_SHADOW_MEMORY
    unsigned long long allowed = offload_allowed(ref, ranks, rank, delayed,
                                                 shape);
    harness_expect_memory(&w, rank, allowed, what,
                          "TODO 3: the device holds the bf16 parameters, "
                          "the host the slice's optimizer state and "
                          "staging, nothing else, however allocated; and "
                          "nothing kept from layer to layer (lesson 06's "
                          "buckets, freed by its stage2_backward_done; "
                          "this lesson's landing buffers, by "
                          "finish_landing)");
#endif
}

/* The bytes across the bus, from the device layer's counters: each step
 * the slice's bf16 gradients down and its bf16 parameters up, 2S each. */
static void expect_traffic(const char *report, const training_reference *ref,
                           int ranks, int rank, int steps, bool delayed,
                           char *failures)
{
    size_t begin, end;
    training_block_of(ref->total, ranks, rank, &begin, &end);
    const unsigned long long want = 2ull * (end - begin) * (unsigned)steps;
    unsigned long long down = harness_report_value(report, rank, "to_host");
    unsigned long long up = harness_report_value(report, rank, "to_device");
    /* Fewer bytes than the slice: a part left behind, most often a count
     * of elements where the copy takes bytes. */
    /* The bytes missing up are the bytes too many down: a copy meant to
     * go up went down (its function, or its two ends, the wrong way). */
    if (down > want && up < want && down - want == want - up) {
        note_failure(failures, "rank %d copied %llu bytes down and %llu up "
                     "in %d steps, expected %llu each way: %llu bytes that "
                     "should have gone up went down. Hint: TODO%s: the new "
                     "parameters go up with device_copy_to_device (or its "
                     "_async form), device destination first, host source "
                     "second; device_copy_to_host copies the other way",
                     rank, down, up, steps, want, want - up,
                     delayed ? "s 5-6" : " 5");
        return;
    }
    const char *whole = "every layer's own part whole, each step (a copy's "
                        "count is in bytes: elements times sizeof(bf16))";
    if (down != want)
        note_failure(failures, "rank %d copied %llu bytes down in %d steps, "
                     "expected %llu (2 bytes a gradient of its slice of %zu, "
                     "each step). Hint: TODO 4: %s", rank, down, steps, want,
                     end - begin, down < want ? whole
                     : "only this rank's part of each layer, after the "
                       "reduce-scatter, goes down");
    /* Up, the slice goes after each update: tile by tile (TODO 5), or,
     * with the delayed update, whole when the next update begins and
     * after the last (TODO 6). */
    const char *up_whole =
        delayed
            ? "every step's slice goes up, tile by tile before the delay "
              "begins (TODO 5), then whole in finish_delayed_update, for "
              "each delayed update, the last included (TODO 6)"
            : "the slice's parameters, each tile whole, every step (a "
              "copy's count is in bytes: elements times sizeof(bf16))";
    if (up != want)
        note_failure(failures, "rank %d copied %llu bytes up in %d steps, "
                     "expected %llu (2 bytes a bf16 parameter of its slice of "
                     "%zu, each step). Hint: TODO%s: %s", rank, up, steps,
                     want, end - begin, delayed ? "s 5-6" : " 5",
                     up < want ? up_whole
                     : "send the slice's bf16 parameters, not fp32 masters "
                       "nor the whole model; the allgather gives the rest");
}

/* Weights that differ from the reference's, and bytes across the bus that
 * differ from the formula's: the bytes say what went wrong (a copy of the
 * wrong length or part) more plainly than the weights, so they are said
 * first. */
static void expect_traffic_explains(const char *out,
                                    const training_reference *ref, int ranks,
                                    int steps, bool delayed, const char *what,
                                    const char *difference)
{
    char failures[FAILURES_SIZE] = "";
    for (int rank = 0; rank < ranks; rank++) {
        char *report = harness_read_report(out, rank);
        expect_traffic(report, ref, ranks, rank, steps, delayed, failures);
        free(report);
    }
    ck_assert_msg(failures[0] == '\0', "%s: its weights differ from the "
                  "reference's (%s), and %s", what, difference, failures);
}

/* ---- The tests ---- */

static const char *const todo_hint =
    "TODOs 4-5: each layer's own part down after your stage 2 "
    "reduce-scatter, device_wait before the update reads it, your CPU "
    "Adam with offload_adam_step(o, step) (the loop's step as it is: it "
    "adds AdamW's 1 itself), the slice up, then the allgather "
    "(if the cpu_adam tests fail, TODOs 1-2 first: a wrong CPU Adam shows "
    "here too)";

/* The copies up hide behind the CPU Adam, as observed by the device layer
 * (given code): a copy up waited for at once (by the thread that started
 * it, before that thread started another copy up, or with under
 * DEVICE_AT_ONCE_S of its own work between) hid behind no other tile. A thread's last copy of a step may be so, with no tile left to
 * hide it behind (one a thread a step is allowed); beyond that, at most a
 * quarter of the copies, where the lesson's way waits for none at once. */
static void expect_copies_up_overlap(const char *report, int rank,
                                     long steps, const char *what)
{
    unsigned long long copies =
        harness_report_value(report, rank, "copies_to_device");
    unsigned long long at_once =
        harness_report_value(report, rank, "copies_to_device_waited_at_once");
    unsigned long long threads =
        harness_report_value(report, rank, "threads_copying_to_device");
    ck_assert_msg(at_once <= (unsigned long long)steps * threads + copies / 4,
                  "%s: rank %d waited for %llu of its %llu copies up at "
                  "once, each by the thread that started it before that "
                  "thread started another tile's copy, or with next to no "
                  "work of its own in between (the device layer's count): "
                  "those parameters travelled while no other tile was "
                  "computed. Hint: TODO 5: start each tile's copy up as the tile "
                  "is done (send_tile_up) and wait for them after "
                  "cpu_adam_update returns, so that they travel while the "
                  "CPU Adam computes the other tiles (if the cpu_adam tests "
                  "fail, TODO 2 first: a tile_done called after the whole "
                  "update, not right after each tile, shows here too)",
                  what, rank, at_once, copies);
}

/* The copies down hide behind backward, as observed by the device layer
 * (given code): a copy down waited for in the same call of the student's
 * hook that started it (busy work of its own in between or not) hid
 * behind no layer's backward, which runs between the calls. The last layer's of a step (layer 0's, waited for
 * as the update begins, with no backward left) may be so; beyond that, at
 * most a quarter of the copies. */
static void expect_copies_down_overlap(const char *report, int rank,
                                       long steps, const char *what)
{
    unsigned long long copies =
        harness_report_value(report, rank, "copies_to_host");
    unsigned long long at_once =
        harness_report_value(report, rank, "copies_to_host_waited_at_once");
    ck_assert_msg(at_once <= (unsigned long long)steps + copies / 4,
                  "%s: rank %d waited for %llu of its %llu copies down at "
                  "once, each in the very call of offload_backward_done that "
                  "started it, whatever it did in between (the device "
                  "layer's count): no layer's backward ran while those "
                  "gradients travelled. Hint: "
                  "TODO 4: a copy waited for as soon as it starts (a "
                  "blocking device_copy_to_host is one) is on backward's "
                  "critical path; start layer l's copy, and wait "
                  "for it only after the next layer's backward (the layer "
                  "below's offload_backward_done, or the update for layer 0)",
                  what, rank, at_once, copies);
}

/* Without the delayed update the new parameters go up tile by tile, each
 * as its tile is done (send_tile_up): no copy up carries more than one
 * tile's bf16 parameters, as the device layer (given code) saw them. A
 * copy of the whole slice after the CPU Adam hides behind nothing, even
 * where it is one copy a step, which the count of copies waited for at
 * once allows (a thread's last). */
static void expect_copies_up_by_tile(const char *report, int rank,
                                     const char *what)
{
    const unsigned long long tile_bytes = CPU_ADAM_TILE * sizeof(bf16);
    unsigned long long largest =
        harness_report_value(report, rank, "largest_copy_to_device");
    ck_assert_msg(largest <= tile_bytes, "%s: rank %d copied %llu bytes up "
                  "in one copy, more than one tile's parameters "
                  "(CPU_ADAM_TILE x 2 bytes = %llu): the slice went up after "
                  "the CPU Adam, not tile by tile while it computed. Hint: "
                  "TODO 5: pass send_tile_up to cpu_adam_update and start "
                  "each tile's own copy up there, as the tile is done; wait "
                  "for them after cpu_adam_update returns", what, rank,
                  largest, tile_bytes);
}

/* ---- The student's lesson 06, which this lesson runs on ---- */

static bool run_ok(const run_result *r)
{
    char why[2048];
    bool not_started;
    return !harness_run_failure(r, "", why, sizeof why, &not_started);
}

/* train_offload runs the student's own lesson 06 (zero_owned_part and
 * stage 2): a mistake there shows here, often only on 2 ranks or more, and
 * looks like one in this lesson's TODOs. So when a run of this lesson
 * fails, lesson 06's driver runs stage 2 on the tests' model on `ranks`
 * ranks (at least 2) against the same plain data-parallel reference; when
 * that fails too, the test stops on it first, with what it gave. Only on
 * a failure: a passing lesson costs nothing. */
static void expect_lesson06_right(int ranks, const char *what)
{
    if (ranks < 2)
        ranks = 2;
    char out[HARNESS_PATH], problem[2048] = "";
    harness_out_dir(out);
    const char *const stage2[] = { "--stage", "2", NULL };
    run_result r = training_run("06-zero", "train_zero", ranks, &test_run,
                                stage2, out, 12);
    /* Where lesson 06's driver cannot even start here, this says nothing:
     * the test's own failure follows. */
    if (r.err != NULL && strstr(r.err, "rank_watch: cannot run") != NULL) {
        run_result_free(&r);
        harness_remove_out_dir(out);
        return;
    }
    char run[64];
    snprintf(run, sizeof run, "its train_zero --stage 2 on %d ranks", ranks);
    bool not_started;
    if (!harness_run_failure(&r, run, problem, sizeof problem,
                             &not_started)) {
        training_reference ref = training_reference_run(ranks, test_run.batch,
                                                        &test_run, -1);
        double *values = malloc(ref.total * sizeof *values);
        ck_assert(values != NULL);
        for (int rank = 0; rank < ranks && problem[0] == '\0'; rank++) {
            harness_read_doubles(out, "params", rank, values, ref.total);
            for (size_t i = 0; i < ref.total; i++)
                if (values[i] != bf16_to_float(ref.params[i])) {
                    snprintf(problem, sizeof problem, "%s: rank %d's "
                             "parameter %zu (layer %d) is %.9g where plain "
                             "data parallel gives %.9g", run, rank, i,
                             training_layer_of(&ref, i), values[i],
                             bf16_to_float(ref.params[i]));
                    break;
                }
        }
        /* Right weights can hide a bucket that outlives its layer: stage 2
         * holds one layer's bf16 gradient at a time (lesson 06's formula,
         * 2 bytes x the largest layer), and this lesson's small device has
         * room for no more. */
        size_t largest = 0;
        for (int l = 0; l < ref.layer_count; l++) {
            size_t end = l + 1 < ref.layer_count ? ref.layer_begin[l + 1]
                                                 : ref.total;
            if (end - ref.layer_begin[l] > largest)
                largest = end - ref.layer_begin[l];
        }
        for (int rank = 0; rank < ranks && problem[0] == '\0'; rank++) {
            char *report = harness_read_report(out, rank);
            unsigned long long buckets =
                harness_report_value(report, rank, "peak buckets");
            if (buckets > 2 * largest)
                snprintf(problem, sizeof problem, "%s: rank %d's gradient "
                         "buckets peaked at %llu bytes, where stage 2 holds "
                         "one layer's bf16 gradient at a time (%zu bytes at "
                         "the most): a bucket outlives its layer (freed "
                         "after the reduce-scatter?)", run, rank, buckets,
                         2 * largest);
            free(report);
        }
        free(values);
        training_reference_free(&ref);
    }
    run_result_free(&r);
    harness_remove_out_dir(out);
    ck_assert_msg(problem[0] == '\0', "%s: your lesson 06, which this lesson "
                  "runs on (its zero_owned_part and stage 2), is wrong on "
                  "its own, on the offload tests' small model: %s. Fix "
                  "lesson 06 first (make check L=06 T=3), then check this "
                  "lesson again", what, problem);
}

/* ZeRO-Offload on `ranks` ranks: weights, memory, traffic. */
/* Where the first update of a run on `ranks` ranks went wrong, once the
 * whole run's weights differ: after many steps every parameter differs,
 * and the first one that does says little. A run of one step shows which
 * part did: a rank's master weights (its update, TODOs 1-5's gradients
 * down), its own slice on its own device (its copies up), or another
 * rank's slice there (the allgather). Into `hint`, or "" when the one step
 * matches. Called only after a failure: it costs a run. */
static void diagnose_first_update(int ranks, const run_shape *shape,
                                  char *hint, size_t size)
{
    hint[0] = '\0';
    run_shape one = *shape;
    one.steps = 1;
    char out[HARNESS_PATH];
    harness_out_dir(out);
    run_result r = run_offload(ranks, &one, NULL, out, 15);
    if (!run_ok(&r)) {
        run_result_free(&r);
        harness_remove_out_dir(out);
        return;
    }
    run_result_free(&r);
    training_reference ref = training_reference_run(ranks, one.batch, &one,
                                                    -1);
    double *values = malloc(ref.total * sizeof *values);
    ck_assert(values != NULL);
    /* Each rank's own part first, then the others'. */
    for (int pass = 0; pass < 3 && hint[0] == '\0'; pass++)
        for (int rank = 0; rank < ranks && hint[0] == '\0'; rank++) {
            size_t begin, end;
            training_block_of(ref.total, ranks, rank, &begin, &end);
            if (pass == 0) {
                harness_read_doubles(out, "master", rank, values,
                                     end - begin);
                for (size_t k = 0; k < end - begin; k++)
                    if (values[k] != ref.master[begin + k]) {
                        snprintf(hint, size, "TODOs 4-5: after the first "
                                 "update, rank %d's fp32 master weight %zu "
                                 "(its slice, "
                                 "in host memory) is already wrong: its "
                                 "gradients down (TODO 4: each layer's own "
                                 "part at its place in the slice) or its "
                                 "update (TODO 5, and the CPU Adam of TODOs "
                                 "1-2)", rank, begin + k);
                        break;
                    }
                continue;
            }
            harness_read_doubles(out, "params", rank, values, ref.total);
            for (size_t i = 0; i < ref.total; i++) {
                const bool own = i >= begin && i < end;
                if ((pass == 1) != own ||
                    values[i] == bf16_to_float(ref.params[i]))
                    continue;
                /* The value it had before any update, rounded to bf16. */
                const bool stale =
                    values[i] == bf16_to_float(bf16_from_float(ref.initial[i]));
                const char *what = stale ? "its value before the update"
                                         : "not the update's value";
                if (own)
                    snprintf(hint, size, "TODO 5: after the first update, "
                             "rank %d's master weights are right, but its own "
                             "slice on its own device is not (parameter "
                             "%zu is %.9g, %s): its copies up did not land "
                             "at the slice's place. Each "
                             "tile [begin, end) of the slice goes to "
                             "o->device_params + o->zero.own.begin + begin "
                             "(the slice's place among all Ψ), from "
                             "o->host_params + begin, and every copy up has "
                             "landed before the allgather", rank, i,
                             values[i], what);
                else
                    snprintf(hint, size, "TODO 5: after the first "
                             "update, every rank's own slice on its own device is right, "
                             "but rank %d's copy of another rank's slice is "
                             "not (parameter %zu is %.9g, %s): the slices "
                             "never reached the other devices: "
                             "gather_parameters allgathers every rank's "
                             "slice into o->device_params, in place, after "
                             "the copies up (and in finish_delayed_update "
                             "too)", rank, i, values[i], what);
                break;
            }
        }
    free(values);
    training_reference_free(&ref);
    harness_remove_out_dir(out);
}

static void offload_on(int ranks, const run_shape *shape, long delay_from)
{
    char out[HARNESS_PATH], what[96], dpu[32];
    harness_out_dir(out);
    snprintf(dpu, sizeof dpu, "%ld", delay_from);
    snprintf(what, sizeof what, "offload%s on %d rank%s",
             delay_from >= 0 ? " with the delayed update" : "", ranks,
             ranks == 1 ? "" : "s");
    const char *const extra[] = { "--dpu", dpu, NULL };
    run_result r = run_offload(ranks, shape, delay_from >= 0 ? extra : NULL,
                               out, 15);
    if (!run_ok(&r))
        expect_lesson06_right(ranks, what);
    harness_expect_success(&r, what);
    training_reference ref = training_reference_run(ranks, shape->batch,
                                                    shape, delay_from);
    char difference[512];
    if (!weights_match(out, ranks, &ref, "the reference gives", difference,
                       sizeof difference)) {
        expect_lesson06_right(ranks, what);
        expect_traffic_explains(out, &ref, ranks, shape->steps,
                                delay_from >= 0, what, difference);
    }
    if (delay_from >= 0) {
        expect_delayed_weights(out, ranks, shape, delay_from, &ref, what);
    } else {
        char first[768] = "";
        if (ranks > 1 && !weights_match(out, ranks, &ref, "", difference,
                                        sizeof difference))
            diagnose_first_update(ranks, shape, first, sizeof first);
        expect_reference_weights(out, ranks, &ref, what,
                                 "lesson 06's stage 2 gives",
                                 first[0] ? first : todo_hint);
    }
    for (int rank = 0; rank < ranks; rank++) {
        char *report = harness_read_report(out, rank);
        char failures[FAILURES_SIZE] = "";
        /* What is held and what moves first: a copy of the wrong kind
         * (fp32 beside bf16, say) also breaks the overlap rules below,
         * which would only name a symptom. */
        expect_memory(report, &ref, ranks, rank, delay_from >= 0, failures);
        expect_traffic(report, &ref, ranks, rank, shape->steps,
                       delay_from >= 0, failures);
        ck_assert_msg(failures[0] == '\0', "%s: %s", what, failures);
        expect_copies_up_overlap(report, rank, (long)shape->steps, what);
        expect_copies_down_overlap(report, rank, (long)shape->steps, what);
        if (delay_from < 0)
            expect_copies_up_by_tile(report, rank, what);
        if (delay_from >= 0)
            expect_overlap(report, rank, (long)shape->steps, delay_from,
                           what);
        expect_outside(&r, report, &ref, ranks, rank, delay_from >= 0, shape,
                       what);
        free(report);
    }
    run_result_free(&r);
    training_reference_free(&ref);
    harness_remove_out_dir(out);
}

START_TEST(offload_on_one_rank)
{
    offload_on(1, &test_run, -1);
}
END_TEST

START_TEST(offload_on_ranks)
{
    for (int ranks = 2; ranks <= 4; ranks++)
        offload_on(ranks, &test_run, -1);
}
END_TEST

START_TEST(delayed_update)
{
    offload_on(1, &delayed_run, DELAY_FROM);
    offload_on(2, &delayed_run, DELAY_FROM);
}
END_TEST

/* ---- The model that does not fit ---- */

/* A model whose 16Ψ does not fit the device: 5 hidden layers of 192, Ψ =
 * 162634, on a device of 1,100,000 bytes. Batches of 8 samples hold
 * 372,864 bytes of activations and backward's scratch (the model's, as
 * the device's ledger counts them), so 16Ψ + activations = 2,975,008
 * bytes do not fit, and 4Ψ + activations = 1,023,400 do: the lesson's
 * bound for offload (2Ψ of parameters, and the layers in flight, each
 * under Ψ/4 here, at most three of them at once: a bucket and two own
 * parts). 200 steps at 3e-3 reach 0.857 on 512 held-out samples (measured
 * with the reference solution; chance is 0.1). */
static const run_shape big_run = { 5, 192, 200, 8, 8192, 512, 3e-3, 0.1 };
static const char *const small_device[] = { "--device-memory", "1100000",
                                            NULL };
enum { SMALL_DEVICE = 1100000, BIG_PSI = 162634 };

START_TEST(offload_fits_a_small_device_and_learns)
{
    char out[HARNESS_PATH];
    harness_out_dir(out);
    run_result r = run_offload(1, &big_run, small_device, out, 45);
    if (!run_ok(&r))
        expect_lesson06_right(1, "offload on a small device");
    harness_expect_success(&r, "offload on a device of 1100000 bytes, "
                           "room for the bf16 parameters, the activations "
                           "and the gradients on their way down, and "
                           "little more");
    run_result_free(&r);
    char *report = harness_read_report(out, 0);
    unsigned long long activations =
        harness_report_value(report, 0, "peak activations");
    ck_assert_msg(16ull * BIG_PSI + activations > SMALL_DEVICE &&
                  4ull * BIG_PSI + activations <= SMALL_DEVICE, "the test's "
                  "premise: 16Ψ + activations (%llu) exceeds the device, "
                  "4Ψ + activations (%llu) fits it", 16ull * BIG_PSI +
                  activations, 4ull * BIG_PSI + activations);
    expect_copies_up_overlap(report, 0, big_run.steps, "offload on a small "
                             "device");
    unsigned long long peak =
        harness_report_value(report, 0, "peak device_total");
    ck_assert_msg(peak <= SMALL_DEVICE, "the device held %llu bytes, over "
                  "its %d", peak, SMALL_DEVICE);
    unsigned long long ppm = harness_report_value(report, 0, "accuracy_ppm");
    if (ppm < 750000)
        expect_lesson06_right(1, "offload on a small device");
    ck_assert_msg(ppm >= 750000, "offload on a small device: held-out "
                  "accuracy %.4f after %d steps; the task reaches "
                  "0.857. Hint: %s", ppm / 1e6, big_run.steps, todo_hint);
    free(report);
    harness_remove_out_dir(out);
}
END_TEST


/* ---- Memory, measured outside on a model large enough to tell ---- */

/* 6 hidden layers of 900 units: Ψ = 4,122,010 parameters. On 2 ranks
 * the smallest thing a rank could keep whole instead of its slice, the
 * host's bf16 staging (4Ψ instead of 4S), is 8.2 MB more than
 * ZeRO-Offload lets it hold, the whole optimizer state 25 MB: eight and
 * twenty-four times HARNESS_MEMORY_SLACK; the test model above is too
 * small to tell such a copy from the libraries' own buffers. One step, no
 * report: what decides is the kernel's count alone. */
static const run_shape measured_run = { 6, 900, 1, 4, 16, 4, 1e-3, 0.1 };

/* The model's layers, as training_reference lays them out, without
 * running it: what offload_allowed needs. */
static training_reference layout_of(const run_shape *shape)
{
    training_reference layout;
    memset(&layout, 0, sizeof layout);
    const mlp_config c = shape_of(shape);
    int in = c.inputs;
    for (int l = 0; l <= c.hidden_layers; l++) {
        int out = l == c.hidden_layers ? c.classes : c.width;
        layout.layer_begin[l] = layout.total;
        layout.total += (size_t)out * (size_t)in + (size_t)out;
        in = out;
    }
    layout.layer_count = c.hidden_layers + 1;
    return layout;
}

START_TEST(offload_memory_measured)
{
    const int ranks = 2;
    if (!harness_outside_measures())
        HARNESS_SKIP("memory is measured outside the process only on Linux "
                     "(the watch reads /proc); the other tests check the "
                     "ledgers' count");
#ifdef HARNESS_SHADOW_MEMORY
    HARNESS_SKIP("under the sanitizers the kernel counts their shadow "
                 "memory too");
#endif
    const char *what = "offload on 2 ranks, Ψ = 4,122,010";
    run_result r = run_offload(ranks, &measured_run, NULL, NULL, 23);
    if (!run_ok(&r))
        expect_lesson06_right(ranks, what);
    harness_expect_success(&r, what);
    const training_reference layout = layout_of(&measured_run);
    for (int rank = 0; rank < ranks; rank++) {
        watch_report w = harness_read_watch(&r, rank);
        const unsigned long long allowed =
            offload_allowed(&layout, ranks, rank, false, &measured_run);
        /* Memory held past the formulas may be lesson 06's (a bucket that
         * outlives its layer): that is said first. */
        if (w.found && watch_memory_growth(&w) > allowed + HARNESS_MEMORY_SLACK)
            expect_lesson06_right(ranks, what);
        harness_expect_memory(&w, rank, allowed,
                              what, "TODO 3: the device holds the bf16 "
                              "parameters, the host only the slice's "
                              "optimizer state and staging, however "
                              "allocated");
    }
    run_result_free(&r);
}
END_TEST

Suite *lesson_suite(void)
{
    static char names[2 * case_length_count][160];
    Suite *suite = suite_create(LESSON);
    int k = 0;
    for (int c = 0; c < 2 * case_length_count; c++) {
        size_t n = case_lengths[c / 2];
        const bool update = c % 2 == 1;
        char length[48];
        if (n <= CASE_EVERY_OFFSET)
            snprintf(length, sizeof length, "%zu element%s at offsets 0-%d",
                     n, n == 1 ? "" : "s", CASE_MAX_OFFSET);
        else
            snprintf(length, sizeof length, "10^7 + 3 elements at offset %d",
                     LARGE_OFFSET);
        if (n == 0)
            snprintf(names[k], sizeof names[k], "%s, %s: nothing written%s",
                     update ? "cpu_adam_update" : "cpu_adam_tile", length,
                     update ? ", no tile" : "");
        else
            snprintf(names[k], sizeof names[k], "%s, %s: bitwise "
                     "adamw_step_mixed over %d steps%s",
                     update ? "cpu_adam_update" : "cpu_adam_tile", length,
                     CASE_STEPS, update ? ", tiles cover it once" : "");
        harness_add(suite, names[k++], exact_case, c,
                    n <= CASE_EVERY_OFFSET ? EXACT_TIMEOUT_S
                                           : EXACT_LARGE_TIMEOUT_S);
    }
    harness_add(suite, "cpu_adam_tile compiled to vector instructions: "
                "packed square roots and divisions, a few instructions an "
                "element", vector_instructions, 0, 25);
    harness_add(suite, "cpu_adam_update on 2 threads: tiles of at most "
                "CPU_ADAM_TILE cover every element once, each final when "
                "handed over, both threads working side by side", threads_case, 0,
                THREADS_TIMEOUT_S);
    harness_add(suite, "offload on 1 rank: weights bitwise stage 2's; device "
                "and host memory, and the bytes across the bus, as the "
                "formulas say", offload_on_one_rank, 0, 20);
    harness_add(suite, "offload on 2-4 ranks, on your lesson 06 stage 2: "
                "weights, memory and bytes across the bus",
                offload_on_ranks, 0, 50);
    harness_add(suite, "a device too small for 16 bytes a parameter: "
                "offload fits it and learns the default task",
                offload_fits_a_small_device_and_learns, 0, 50);
    harness_add(suite, "delayed parameter update from step 2 on 1 and 2 "
                "ranks: bitwise the reference with the same delay, each "
                "update on a host task beside the next step",
                delayed_update, 0, 35);
    harness_add(suite, "offload on 2 ranks, a model of 4.1 million "
                "parameters: the memory each rank holds, measured outside "
                "it, as the formulas say", offload_memory_measured, 0, 25);
    return suite;
}
