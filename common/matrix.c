/* Dense matrices and vectors of doubles. */
#include "matrix.h"

#include "format_bytes.h"
#include "memory_ledger.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seeds the vector stream apart from the matrix stream of the same seed. */
static const uint64_t vector_stream = 0x76656374u; /* "vect" */

bool matrix_bytes(size_t rows, size_t cols, size_t *bytes)
{
    size_t count;
    if (cols != 0 && rows > SIZE_MAX / cols)
        return false;
    count = rows * cols;
    if (count > SIZE_MAX / sizeof(double))
        return false;
    *bytes = count * sizeof(double);
    return true;
}

/* Allocates, records in the memory ledger under `category`, and writes
 * every byte once; NULL with the reason in `error` when it cannot. */
static double *alloc_doubles(size_t rows, size_t cols, const char *what,
                             memory_category category, char *error,
                             size_t error_len)
{
    size_t bytes;
    char human[32];

    if (!matrix_bytes(rows, cols, &bytes)) {
        snprintf(error, error_len, "%s of %zu x %zu doubles is too large to "
                 "address", what, rows, cols);
        return NULL;
    }
    double *data = ledger_alloc(category, bytes);
    if (data == NULL) {
        format_bytes((double)bytes, human, sizeof human);
        snprintf(error, error_len, "cannot allocate %s for %s (%zu x %zu "
                 "doubles): not enough memory", human, what, rows, cols);
        return NULL;
    }
    memset(data, 0, bytes);
    return data;
}

double *matrix_try_alloc(size_t rows, size_t cols, const char *what,
                         char *error, size_t error_len)
{
    return alloc_doubles(rows, cols, what, MEMORY_MATRIX, error, error_len);
}

double *vector_try_alloc(size_t n, const char *what, char *error,
                         size_t error_len)
{
    return alloc_doubles(n, 1, what, MEMORY_VECTOR, error, error_len);
}

static double *or_exit(double *data, const char *error)
{
    if (data == NULL) {
        fprintf(stderr, "error: %s\n", error);
        exit(MATRIX_EXIT_TOO_LARGE);
    }
    return data;
}

double *matrix_alloc_or_exit(size_t rows, size_t cols, const char *what)
{
    char error[256];
    return or_exit(matrix_try_alloc(rows, cols, what, error, sizeof error),
                   error);
}

double *vector_alloc_or_exit(size_t n, const char *what)
{
    char error[256];
    return or_exit(vector_try_alloc(n, what, error, sizeof error), error);
}

void matrix_free(double *data)
{
    ledger_free(data);
}

void matrix_fill_random(double *block, size_t rows, size_t cols,
                        size_t row0, size_t col0, uint64_t seed)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            block[r * cols + c] = rng_at_signed(seed, row0 + r, col0 + c);
}

void vector_fill_random(double *x, size_t n, size_t offset, uint64_t seed)
{
    for (size_t k = 0; k < n; k++)
        x[k] = rng_at_signed(seed ^ vector_stream, offset + k, 0);
}
