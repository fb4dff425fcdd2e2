/* Unit tests of the mixed-precision AdamW (common/optimizer.h): bitwise the
 * fp32 AdamW on the same numbers. adamw_step itself is checked against
 * arithmetic in double in test_model.c; here the question is only whether
 * the mixed form does exactly that step with bf16 gradients in and bf16
 * parameters out. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "harness.h"
#include "optimizer.h"
#include "rng.h"

/* A float of random sign and mantissa, exponent 2^-20 .. 2^3: gradients
 * and weights of every size a model has, none so large that v overflows. */
static float random_float(rng_t *rng)
{
    uint64_t bits = rng_next_u64(rng);
    uint32_t word = (uint32_t)(bits >> 63) << 31 |
                    (uint32_t)(127 - 20 + (bits >> 32) % 24) << 23 |
                    ((uint32_t)bits & 0x7FFFFFu);
    float value;
    memcpy(&value, &word, sizeof value);
    return value;
}

static void expect_same_bits(const float *want, const float *got, size_t n,
                             const char *what, long step, size_t count,
                             float scale)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&want[i], &got[i], sizeof(float)) == 0,
                      "%s[%zu] after step %ld (count %zu, scale %g): %.9g, "
                      "adamw_step gives %.9g", what, i, step, count, scale,
                      got[i], want[i]);
}

/* Five steps on slices short and long (past the length at which the loops
 * go parallel, so both paths are taken), with the scales a ZeRO step uses
 * (1/P for P = 1..4) and weight decay on: master, m and v bitwise what
 * adamw_step leaves on fp32 gradients bf16_to_float(g) * scale, and the
 * bf16 parameters those masters rounded to nearest even. Some gradients
 * are +-0, and the first step starts from master weights that are bf16
 * values, as a model's first step does. */
START_TEST(mixed_adamw_is_bitwise_adamw)
{
    static const size_t counts[] = { 1, 7, 1000, 65536 + 129 };
    static const float scales[] = { 1.0f, 0.5f, 1.0f / 3.0f, 0.25f };
    const adamw_config config = { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f };
    rng_t rng = rng_seeded(606);
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
        const size_t n = counts[c];
        const float scale = scales[c % (sizeof scales / sizeof *scales)];
        float *master = malloc(n * sizeof *master);
        float *m = calloc(n, sizeof *m), *v = calloc(n, sizeof *v);
        float *ref = malloc(n * sizeof *ref);
        float *ref_m = calloc(n, sizeof *ref_m), *ref_v = calloc(n, sizeof *ref_v);
        float *ref_grads = malloc(n * sizeof *ref_grads);
        bf16 *grads = malloc(n * sizeof *grads);
        bf16 *params = malloc(n * sizeof *params);
        ck_assert(master && m && v && ref && ref_m && ref_v && ref_grads &&
                  grads && params);
        for (size_t i = 0; i < n; i++) {
            ref[i] = master[i] = bf16_to_float(bf16_from_float(
                random_float(&rng)));
            params[i] = 0xFFFF; /* a NaN: unwritten shows */
        }
        for (long step = 1; step <= 5; step++) {
            for (size_t i = 0; i < n; i++) {
                grads[i] = i % 97 == 5   ? 0x0000
                         : i % 97 == 11 ? 0x8000
                                        : bf16_from_float(random_float(&rng));
                ref_grads[i] = bf16_to_float(grads[i]) * scale;
            }
            adamw_step_mixed(&config, step, master, m, v, grads, scale,
                             params, n);
            adamw_step(&config, step, ref, ref_grads, ref_m, ref_v, n);
            expect_same_bits(ref, master, n, "master", step, n, scale);
            expect_same_bits(ref_m, m, n, "m", step, n, scale);
            expect_same_bits(ref_v, v, n, "v", step, n, scale);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(params[i] == bf16_from_float(master[i]),
                              "params[%zu] after step %ld: 0x%04x, the "
                              "master %.9g rounds to 0x%04x", i, step,
                              params[i], master[i],
                              bf16_from_float(master[i]));
        }
        free(master), free(m), free(v), free(ref), free(ref_m), free(ref_v);
        free(ref_grads), free(grads), free(params);
    }
}
END_TEST

/* A slice of nothing writes nothing (a rank whose slice of a small layer
 * is empty calls it so). */
START_TEST(mixed_adamw_on_an_empty_slice)
{
    const adamw_config config = { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f };
    float master = 1.0f, m = 0.0f, v = 0.0f;
    bf16 grad = bf16_from_float(1.0f), param = 0x1234;
    adamw_step_mixed(&config, 1, &master, &m, &v, &grad, 1.0f, &param, 0);
    ck_assert(master == 1.0f && m == 0.0f && v == 0.0f && param == 0x1234);
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("optimizer");
    harness_add(suite, "mixed-precision AdamW: bitwise the fp32 AdamW on the "
                "same numbers", mixed_adamw_is_bitwise_adamw, 0, 20);
    harness_add(suite, "mixed-precision AdamW: an empty slice is left alone",
                mixed_adamw_on_an_empty_slice, 0, 10);
    return suite;
}
