/* Unit tests of common/bf16.h: every float bit pattern against a reference
 * built from the definition of rounding, every bf16 pattern there and back,
 * and named cases whose bits were worked out by hand. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "harness.h"
#include "bf16.h"

/* Under AddressSanitizer (make test-full's sanitize build, which sets
 * -fsanitize=address,undefined together) every access is instrumented and
 * the 2^32 loop would take minutes: that build checks every 97th pattern.
 * 97 is prime, so the sample's low bits still run through every value and
 * its chunks of 2^16 do not line up with the exponent's boundaries. gcc says
 * __SANITIZE_ADDRESS__, clang says __has_feature(address_sanitizer). */
#if defined(__SANITIZE_ADDRESS__)
#define BF16_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BF16_TEST_SANITIZED 1
#endif
#endif
#ifdef BF16_TEST_SANITIZED
#define PATTERN_STRIDE 97u
#define EVERY_FLOAT_NAME "bf16: every 97th float pattern (sanitizer build samples) rounds to nearest even"
#else
#define PATTERN_STRIDE 1u
#define EVERY_FLOAT_NAME "bf16: every one of the 2^32 float patterns rounds to nearest even"
#endif

static float float_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static uint32_t bits_of_float(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* The bf16 that round-to-nearest-even gives for a float that is not a NaN,
 * from the definition rather than from a bit trick: the two candidates are
 * the float's bits cut to 16 (the neighbour toward zero) and the next bf16
 * pattern up in magnitude; whichever is nearer wins, and an exact tie goes
 * to the one with an even last bit. Past the largest finite bf16 the upper
 * neighbour is infinity, which IEEE 754 rounds toward as if it were 2^128
 * (the next power of two, the value an unbounded exponent would give). An
 * infinity is its own answer.
 *
 * Both distances are exact in double: the input and both neighbours are
 * floats of one binade or two adjacent ones (or 2^128), so each difference
 * is a multiple of the input's unit in the last place smaller than 2^25 of
 * them, which 53 bits hold without rounding. The comparison is exact, and a
 * tie is a tie.
 *
 * Written without branches (selects only), so that the compiler can run it
 * over a chunk of inputs in vector registers: 2^32 calls must take seconds. */
static inline bf16 reference_bf16(uint32_t bits)
{
    uint32_t toward_zero = bits & 0xffff0000u;
    uint32_t away = toward_zero + 0x10000u; /* sign bit untouched */
    int input_is_finite = (bits & 0x7fffffffu) != 0x7f800000u;
    int away_is_infinite = (away & 0x7fffffffu) == 0x7f800000u;
    double value = (double)float_from_bits(bits);
    double lower = (double)float_from_bits(toward_zero);
    /* Past the largest finite, ±2^128, made as ±2^127 (a float) times 2:
     * selecting between two doubles, one converted from an infinity's
     * pattern, would keep the compiler from vectorising the loop. */
    uint32_t upper_bits = away_is_infinite
                              ? (away & 0x80000000u) | 0x7f000000u
                              : away;
    double upper = (double)float_from_bits(upper_bits) *
                   (1.0 + (double)away_is_infinite);
    double below = fabs(value - lower);
    double above = fabs(upper - value);
    int toward_zero_is_odd = (int)((toward_zero >> 16) & 1u);
    /* & and |, not && and ||: no branches, so the loop can vectorise. */
    int pick_away = input_is_finite &
                    ((above < below) | ((above == below) & toward_zero_is_odd));
    return (bf16)((pick_away ? away : toward_zero) >> 16);
}

/* What a NaN must become, checked field by field: a NaN (all-ones exponent,
 * nonzero mantissa), quiet (top mantissa bit set), the input's sign, and of
 * the 22 payload bits below the input's quiet bit, the top 6, in the 6
 * places below the bf16's quiet bit. */
static bool nan_converted_right(uint32_t input, bf16 got)
{
    uint32_t payload = input & 0x003fffffu;
    return ((got >> 7) & 0xffu) == 0xffu && (got & 0x0040u) != 0 &&
           (uint32_t)(got >> 15) == (input >> 31) &&
           (uint32_t)(got & 0x003fu) == (payload >> 16);
}

static bool is_nan_pattern(uint32_t bits)
{
    return (bits & 0x7fffffffu) > 0x7f800000u;
}

/* Whether the float with these bits converted right (both forms agreeing). */
static bool converted_right(uint32_t bits, bf16 array_form, bf16 scalar_form)
{
    if (array_form != scalar_form)
        return false;
    return is_nan_pattern(bits) ? nan_converted_right(bits, array_form)
                                : array_form == reference_bf16(bits);
}

enum { CHUNK = 1 << 16 };

/* One chunk of patterns, first*STRIDE, (first+1)*STRIDE, ...: converted by
 * the array form and by the scalar form, and compared with the reference.
 * Each pass is a plain loop over the chunk that the compiler vectorises
 * (the scalar form is inline); a wrong pattern shows as a count, and only
 * then is it looked for, one pattern at a time.
 * Returns how many are wrong, and the first of them in *first_wrong. */
static uint64_t check_chunk(uint64_t first, size_t count, float *in,
                            bf16 *array_form, bf16 *scalar_form,
                            bf16 *expected, uint32_t *first_wrong)
{
    for (size_t k = 0; k < count; k++)
        in[k] = float_from_bits((uint32_t)((first + k) * PATTERN_STRIDE));
    bf16_from_floats(array_form, in, count);
    for (size_t k = 0; k < count; k++)
        scalar_form[k] = bf16_from_float(in[k]);
    for (size_t k = 0; k < count; k++)
        expected[k] = reference_bf16((uint32_t)((first + k) * PATTERN_STRIDE));
    /* `expected` means nothing for a NaN, whose answer is checked by its
     * fields: a NaN is always a suspect (they are 1 in 256 of all patterns,
     * and sit in chunks of their own, so few chunks take the slow path). */
    uint64_t suspects = 0;
    for (size_t k = 0; k < count; k++)
        suspects += (array_form[k] != expected[k]) |
                    (scalar_form[k] != expected[k]) |
                    is_nan_pattern((uint32_t)((first + k) * PATTERN_STRIDE));
    if (suspects == 0)
        return 0;
    uint64_t wrong = 0;
    for (size_t k = 0; k < count; k++) {
        uint32_t bits = (uint32_t)((first + k) * PATTERN_STRIDE);
        if (!converted_right(bits, array_form[k], scalar_form[k])) {
            if (wrong == 0)
                *first_wrong = bits;
            wrong++;
        }
    }
    return wrong;
}

/* Every float pattern (every 97th under the sanitizers), in chunks of 2^16
 * shared out among the threads. The threads only count and remember their
 * first wrong pattern; the test fails afterwards, on the main thread, with
 * the first wrong one of all. */
START_TEST(every_float_rounds_to_nearest_even)
{
    const uint64_t patterns = ((UINT64_C(1) << 32) + PATTERN_STRIDE - 1) /
                              PATTERN_STRIDE;
    const uint64_t chunks = (patterns + CHUNK - 1) / CHUNK;
    uint64_t wrong = 0, checked = 0;
    uint64_t first_wrong = UINT64_MAX;
    int out_of_memory = 0;
    int threads = 1;

#pragma omp parallel reduction(+ : wrong, checked) reduction(| : out_of_memory)
    {
#ifdef _OPENMP
#pragma omp single
        threads = omp_get_num_threads();
#endif
        float *in = malloc(CHUNK * sizeof *in);
        bf16 *buffers = malloc(3 * CHUNK * sizeof *buffers);
        uint64_t my_first_wrong = UINT64_MAX;
        if (in == NULL || buffers == NULL)
            out_of_memory = 1;
        /* Chunks differ in cost (NaN chunks are looked at twice), so they
         * are handed out a few at a time as threads come free. */
#pragma omp for schedule(dynamic, 16)
        for (uint64_t chunk = 0; chunk < chunks; chunk++) {
            if (in == NULL || buffers == NULL)
                continue;
            uint64_t first = chunk * CHUNK;
            size_t count = (size_t)(patterns - first < CHUNK ? patterns - first
                                                             : CHUNK);
            uint32_t chunk_first_wrong = 0;
            uint64_t chunk_wrong = check_chunk(first, count, in, buffers,
                                               buffers + CHUNK,
                                               buffers + 2 * CHUNK,
                                               &chunk_first_wrong);
            if (chunk_wrong > 0 && chunk_first_wrong < my_first_wrong)
                my_first_wrong = chunk_first_wrong;
            wrong += chunk_wrong;
            checked += count;
        }
#pragma omp critical(bf16_first_wrong)
        if (my_first_wrong < first_wrong)
            first_wrong = my_first_wrong;
        free(in);
        free(buffers);
    }

    ck_assert_msg(!out_of_memory, "no memory for the buffers of 2^16 numbers");
    ck_assert_msg(checked == patterns, "checked %llu patterns of %llu: the "
                  "loop skipped some", (unsigned long long)checked,
                  (unsigned long long)patterns);
    if (wrong > 0) {
        uint32_t bits = (uint32_t)first_wrong;
        float value = float_from_bits(bits);
        bf16 array_form;
        bf16_from_floats(&array_form, &value, 1);
        ck_abort_msg("%llu of %llu float patterns (%d threads) convert "
                     "wrong; the first, 0x%08x (%.9g): array form 0x%04x, "
                     "scalar form 0x%04x, reference %s0x%04x",
                     (unsigned long long)wrong, (unsigned long long)patterns,
                     threads, (unsigned)bits, (double)value,
                     (unsigned)array_form, (unsigned)bf16_from_float(value),
                     is_nan_pattern(bits) ? "a quiet NaN like " : "",
                     is_nan_pattern(bits) ? (unsigned)((bits >> 16) | 0x40u)
                                          : (unsigned)reference_bf16(bits));
    }
}
END_TEST

/* The value of a bf16 pattern from its fields, by the format's definition:
 * (-1)^sign * 1.mantissa * 2^(exponent - 127) for a normal number,
 * 0.mantissa * 2^-126 for a subnormal or zero; infinity and NaN by name. */
static double bf16_value_by_definition(bf16 pattern)
{
    int sign = pattern >> 15, exponent = (pattern >> 7) & 0xff;
    int mantissa = pattern & 0x7f;
    double magnitude;
    if (exponent == 0xff)
        magnitude = mantissa == 0 ? INFINITY : NAN;
    else if (exponent == 0)
        magnitude = ldexp((double)mantissa, -126 - 7);
    else
        magnitude = ldexp((double)(128 + mantissa), exponent - 127 - 7);
    return sign ? -magnitude : magnitude;
}

/* Every bf16 pattern: widened exactly (the value its fields define, the
 * sign of a zero included, and the bits in the top half), the array form
 * agreeing, and narrowed back to itself (a NaN comes back quiet). */
START_TEST(every_bf16_round_trips)
{
    enum { ALL = 1 << 16 };
    static bf16 patterns[ALL];
    static float widened[ALL];
    for (uint32_t k = 0; k < ALL; k++)
        patterns[k] = (bf16)k;
    bf16_to_floats(widened, patterns, ALL);
    for (uint32_t k = 0; k < ALL; k++) {
        bf16 pattern = (bf16)k;
        float value = bf16_to_float(pattern);
        double expected = bf16_value_by_definition(pattern);
        ck_assert_msg(bits_of_float(value) == k << 16, "bf16 0x%04x widens "
                      "to float bits 0x%08x, not 0x%08x", (unsigned)k,
                      (unsigned)bits_of_float(value), (unsigned)(k << 16));
        ck_assert_msg(isnan(expected) ? isnan(value)
                                      : (double)value == expected &&
                                            !signbit(value) ==
                                                !signbit(expected),
                      "bf16 0x%04x widens to %.9g, its fields say %.9g",
                      (unsigned)k, (double)value, expected);
        ck_assert_msg(bits_of_float(widened[k]) == bits_of_float(value),
                      "bf16_to_floats and bf16_to_float differ at 0x%04x",
                      (unsigned)k);
        bf16 back = bf16_from_float(value);
        bf16 expected_back = isnan(expected) ? (bf16)(k | 0x0040u) : pattern;
        ck_assert_msg(back == expected_back, "bf16 0x%04x widened and "
                      "narrowed again gives 0x%04x, not 0x%04x", (unsigned)k,
                      (unsigned)back, (unsigned)expected_back);
    }
}
END_TEST

/* Cases whose answers were worked out by hand, each the kind of input a
 * conversion gets wrong first. */
static const struct {
    uint32_t input;
    bf16 expected;
    const char *what;
} named_cases[] = {
    { 0x3f800000u, 0x3f80, "1.0 is exact" },
    { 0xbf800000u, 0xbf80, "-1.0 is exact" },
    { 0x00000001u, 0x0000, "the smallest float subnormal, 2^-149, rounds to +0" },
    { 0x00010000u, 0x0001, "the smallest bf16 subnormal, 2^-133, is exact" },
    { 0x00008000u, 0x0000, "2^-134, halfway between 0 and 2^-133, ties to even 0" },
    { 0x00018000u, 0x0002, "halfway between subnormals 0x0001 and 0x0002 ties up to even" },
    { 0x007fffffu, 0x0080, "the largest float subnormal rounds up to the smallest normal" },
    { 0x3f808000u, 0x3f80, "1 + 2^-8, a tie above an even pattern, rounds down" },
    { 0x3f818000u, 0x3f82, "1 + 3*2^-8, a tie above an odd pattern, rounds up" },
    { 0x3f808001u, 0x3f81, "just past a tie rounds up" },
    { 0x3f807fffu, 0x3f80, "just short of a tie rounds down" },
    { 0x7f7f7fffu, 0x7f7f, "just under the top tie stays the largest finite" },
    { 0x7f7f8000u, 0x7f80, "the top tie (odd last bit) rounds up to infinity" },
    { 0x7f7fffffu, 0x7f80, "the largest float rounds to infinity" },
    { 0xff7fffffu, 0xff80, "the most negative float rounds to -infinity" },
    { 0x80000000u, 0x8000, "-0.0 keeps its sign" },
    { 0x00000000u, 0x0000, "+0.0" },
    { 0x7f800000u, 0x7f80, "+infinity" },
    { 0xff800000u, 0xff80, "-infinity" },
    { 0x7f800001u, 0x7fc0, "a signalling NaN whose payload is all in the low bits becomes a quiet NaN, not infinity" },
    { 0xffa00000u, 0xffe0, "a negative signalling NaN keeps its sign and top payload bit, quietened" },
    { 0x7fc00000u, 0x7fc0, "the default quiet NaN" },
    { 0x7fffffffu, 0x7fff, "a NaN with every payload bit set keeps them all, no carry" },
};

START_TEST(named_cases_convert_as_worked_out)
{
    for (size_t k = 0; k < sizeof named_cases / sizeof named_cases[0]; k++) {
        float value = float_from_bits(named_cases[k].input);
        bf16 scalar = bf16_from_float(value), array;
        bf16_from_floats(&array, &value, 1);
        ck_assert_msg(scalar == named_cases[k].expected &&
                          array == named_cases[k].expected,
                      "0x%08x: %s, so 0x%04x expected; bf16_from_float gave "
                      "0x%04x, bf16_from_floats 0x%04x",
                      (unsigned)named_cases[k].input, named_cases[k].what,
                      (unsigned)named_cases[k].expected, (unsigned)scalar,
                      (unsigned)array);
    }
    /* And the other way: the values written as numbers, not bits. */
    ck_assert(bf16_to_float(0x3f80) == 1.0f);
    ck_assert(bf16_to_float(0x4049) == 3.140625f);
    ck_assert(bf16_to_float(0x0001) == 0x1p-133f);
    ck_assert(bf16_to_float(0x7f7f) == 0x1.fep127f);
    ck_assert(signbit(bf16_to_float(0x8000)) && bf16_to_float(0x8000) == 0.0f);
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("bf16");
    /* The exhaustive loop takes about 10 s on 2 cores; the limit leaves
     * room for a machine busy with other builds. */
    harness_add(suite, EVERY_FLOAT_NAME, every_float_rounds_to_nearest_even, 0,
                120);
    harness_add(suite, "bf16: every bf16 pattern widens exactly and comes back",
                every_bf16_round_trips, 0, 10);
    harness_add(suite, "bf16: named cases (ties, overflow, -0, NaNs) as worked "
                "out by hand", named_cases_convert_as_worked_out, 0, 10);
    return suite;
}
