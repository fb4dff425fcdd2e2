/* bfloat16 ("brain float"): the 16-bit number format of mixed-precision
 * training, stored here as the top half of an IEEE 754 binary32 float.
 *
 *     float  s eeeeeeee mmmmmmm mmmmmmmmmmmmmmmm   1 + 8 + 23 bits
 *     bf16   s eeeeeeee mmmmmmm                     1 + 8 +  7 bits
 *
 * What it keeps: the sign and all 8 exponent bits, so the same range as
 * fp32 (about 1.2e-38 to 3.4e38 for normal numbers, and the same
 * infinities, NaNs and subnormals). What it drops: the low 16 of the 23
 * stored mantissa bits, so 8 significant bits (7 stored and the implicit
 * one): neighbouring values differ by 1 part in 128 to 256, about 2 to 3
 * decimal digits. fp16 makes the other trade (5 exponent bits, 10 mantissa
 * bits: more precision, a range that ends at 65504), which is why fp16
 * training needs loss scaling and bf16 training usually does not.
 *
 * Why round to nearest, ties to even (RNE), and not just drop the low bits:
 * dropping them (truncation) always moves a value toward zero, so every
 * conversion is biased the same way and the bias adds up over the millions
 * of conversions of a training run. Rounding to nearest makes the error at
 * most half a unit in the last place and unbiased on average; sending an
 * exact tie to the neighbour with an even last bit keeps ties from leaning
 * one way too. It is also what IEEE 754 makes the default, and what
 * hardware bf16 conversions do, so results here match theirs bit for bit.
 *
 * Conversions never fail: every float has exactly one bf16 (NaNs stay NaNs,
 * quietened, with their sign and the top of their payload), and every bf16
 * is exactly one float. */
#ifndef ZZ_BF16_H
#define ZZ_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The bit pattern of a bf16: the top 16 bits of the float it stands for. */
typedef uint16_t bf16;

/* The two scalar conversions are defined here, inline, so that a loop that
 * converts one number at a time compiles to the same vector code as the
 * array forms do; a call through the library would cost more than the
 * conversion. bf16.c holds the one external copy that C11's inline model
 * asks for (used where the compiler chooses not to inline). */

/* The bf16 nearest to `value`, ties to the one whose last mantissa bit is 0.
 * Infinities and signed zeros are kept; subnormals round like any other
 * number; a finite value at or past halfway between the largest finite
 * bf16 and 2^128 becomes infinity, as IEEE rounding says; a NaN becomes a
 * quiet NaN with the same sign and the top 6 bits of its payload below the
 * quiet bit (never infinity, which plain rounding of a NaN could give). */
inline bf16 bf16_from_float(float value)
{
    /* memcpy, not a pointer cast or a union read: the way C11 promises to
     * give a float's bits (the compiler makes it a register move). */
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    /* Adding just under half of the dropped part's unit (0x7fff), plus the
     * kept part's last bit, carries into the kept half exactly when the
     * dropped 16 bits are more than half, or exactly half with an odd kept
     * part: round to nearest, ties to even. A carry out of the mantissa
     * bumps the exponent, which is the right next value (from the largest
     * subnormal to the smallest normal, or from the largest finite to
     * infinity). The largest finite pattern, 0xff7fffff, plus 0x8000 stays
     * below 2^32, so the sum never wraps. */
    uint32_t last_kept_bit = (bits >> 16) & 1u;
    bf16 rounded = (bf16)((bits + 0x7fffu + last_kept_bit) >> 16);
    /* A NaN must not be rounded: a payload in the low 16 bits only would
     * carry into the sign or truncate to infinity. It keeps its top bits,
     * and setting the quiet bit (the top stored mantissa bit) makes it a
     * NaN whatever they were. */
    bf16 quieted = (bf16)((bits >> 16) | 0x0040u);
    bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
    return is_nan ? quieted : rounded;
}

/* The float that `value` stands for, exactly (no rounding happens). */
inline float bf16_to_float(bf16 value)
{
    uint32_t bits = (uint32_t)value << 16;
    float result;
    memcpy(&result, &bits, sizeof result);
    return result;
}

/* out[k] = bf16_from_float(in[k]) for k < n; out is (n), in is (n). */
void bf16_from_floats(bf16 *out, const float *in, size_t n);

/* out[k] = bf16_to_float(in[k]) for k < n; out is (n), in is (n). */
void bf16_to_floats(float *out, const bf16 *in, size_t n);

#endif
