/* bfloat16 conversions: the array forms, and the external copies of the
 * scalar forms that bf16.h defines inline. */
#include "bf16.h"

/* C11 6.7.4: with these declarations, this file holds the definitions that
 * calls the compiler did not inline link to. */
extern inline bf16 bf16_from_float(float value);
extern inline float bf16_to_float(bf16 value);

void bf16_from_floats(bf16 *out, const float *in, size_t n)
{
    for (size_t k = 0; k < n; k++)
        out[k] = bf16_from_float(in[k]);
}

void bf16_to_floats(float *out, const bf16 *in, size_t n)
{
    for (size_t k = 0; k < n; k++)
        out[k] = bf16_to_float(in[k]);
}
