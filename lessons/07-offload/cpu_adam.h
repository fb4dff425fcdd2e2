/* Lesson 07: the CPU Adam of ZeRO-Offload, the optimizer step that runs on
 * the host while the device holds only bf16 parameters and gradients.
 *
 * One step updates four buffers a parameter, in the layout of
 * common/optimizer.h's adamw_step_mixed, which is the reference:
 *
 *     master, m, v   fp32   the master weights and Adam's two moments
 *     grads          bf16   this step's gradients, from the device
 *     params         bf16   the new parameters, back to the device
 *
 * That is 28 bytes of memory traffic a parameter (read 12 + 2, write
 * 12 + 2) and a few dozen flops: the step is bound by memory bandwidth, so
 * it is fast only if it streams every buffer once (one fused pass, not a
 * pass per operation as a framework's separate tensor operations make)
 * with the vector unit and every core.
 *
 * Bitwise the reference, on purpose: an element's arithmetic is the same
 * sequence of IEEE operations whichever lane of a vector register computes
 * it, and every one of them (+, -, *, / and sqrt) is correctly rounded, in
 * a vector instruction as in a scalar one. Two things could still change
 * the bits, and the toolkit rules out both: a compiler that fuses a * b + c
 * into one multiply-add (rounded once instead of twice) in the vector loop
 * and not in the reference, which -ffp-contract=off forbids in every file
 * (the Makefile's LANG_FLAGS); and reassociation such as -ffast-math
 * allows, which no build uses. What it costs: sqrtf may set errno, which a
 * vector square root cannot, so GCC and Clang leave a loop with sqrtf
 * scalar (Clang's #pragma omp simd then warns "loop not vectorized");
 * this lesson's files are compiled with -fno-math-errno (lesson.mk's
 * CFLAGS), which changes no result: v_hat is never negative, and sqrt is
 * correctly rounded with or without errno. */
#ifndef ZZ_LESSON07_CPU_ADAM_H
#define ZZ_LESSON07_CPU_ADAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "bf16.h"
#include "optimizer.h"

/* The elements of one tile: what one thread updates in one go, and what
 * the offload driver sends back to the device at once, as soon as it is
 * done. 32768 elements are some 20-50 microseconds of work: long enough
 * that a callback costs nothing measurable (tiles of 8K to 128K elements
 * update equally fast), and short enough that a model of a few million
 * parameters splits into dozens of tiles, so the first copies up start
 * after a sliver of the step. */
enum { CPU_ADAM_TILE = 32768 };

/* Given, for the last step of TODO 1 (the README's "Streaming stores";
 * the tests pass without it). The bf16 parameters are the one buffer the
 * step only writes. An ordinary store to a line that is not in cache
 * first reads the line from memory ("read for ownership"), so each
 * parameter costs 2 bytes read besides its 2 written: 30 bytes a
 * parameter instead of 28. A streaming (non-temporal) store writes a
 * whole 64-byte line without reading it, and without evicting the state
 * that is still being worked on. cpu_adam_store_line writes one line of
 * CPU_ADAM_LINE parameters so, from a buffer: `line` must be 64-byte
 * aligned, which &params[begin] need not be (the README's "Streaming
 * stores": a head of ordinary stores up to the first 64-byte boundary,
 * whole lines, a tail); a line that is not stops the program with a line
 * that says so, where the hardware would fault without a word. Streaming
 * stores are weakly ordered, outside the rules that order ordinary
 * stores: cpu_adam_store_fence (x86's sfence), once a tile is written and
 * before another thread may read it (tile_done's copy), orders them
 * before what the thread does next, as the x86 manuals ask. On a CPU
 * without them (not x86) these are an ordinary copy and nothing. */
enum { CPU_ADAM_LINE = 64 / sizeof(bf16) };

static inline void cpu_adam_store_line(bf16 *line,
                                       const bf16 values[CPU_ADAM_LINE])
{
    if ((uintptr_t)line % 64 != 0) {
        fprintf(stderr, "cpu_adam_store_line: the line at %p is not 64-byte "
                "aligned: stream whole lines only, from the first 64-byte "
                "boundary of params on (TODO 1; the README's \"Streaming "
                "stores\")\n", (void *)line);
        exit(1);
    }
#if defined(__AVX512F__)
    _mm512_stream_si512((void *)line, _mm512_loadu_si512(values));
#elif defined(__AVX__)
    for (int k = 0; k < 2; k++)
        _mm256_stream_si256((__m256i *)line + k,
                            _mm256_loadu_si256((const __m256i *)values + k));
#elif defined(__SSE2__)
    for (int k = 0; k < 4; k++)
        _mm_stream_si128((__m128i *)line + k,
                         _mm_loadu_si128((const __m128i *)values + k));
#else
    memcpy(line, values, CPU_ADAM_LINE * sizeof(bf16));
#endif
}

static inline void cpu_adam_store_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

/* What one step needs besides the elements: adamw_step_mixed's constants
 * (optimizer.h: the settings and this step's bias corrections, made by
 * the same function, so they have the same bits) and the gradients'
 * scale. */
typedef struct {
    adamw_constants adamw;
    float scale;  /* g = bf16_to_float(grads[i]) * scale; 1/P for a sum of
                     P ranks' gradients */
} cpu_adam_step;

/* The constants of step `step` (counting from 1) under `config`. Given. */
static inline cpu_adam_step cpu_adam_step_of(const adamw_config *config,
                                             long step, float scale)
{
    cpu_adam_step s = { adamw_constants_of(config, step), scale };
    return s;
}

/* TODO 1. Elements [begin, end) of one step, in one pass: for each i,
 * master[i], m[i], v[i] and params[i] become bitwise what
 * adamw_step_mixed(config, step, master, m, v, grads, scale, params, count)
 * makes them, and no element outside [begin, end) is read or written.
 * master, m, v are fp32, grads and params bf16, all indexed alike; none
 * overlaps another. begin and end are any indices (begin <= end): the
 * tile need not start at a vector's alignment. Runs on the calling thread
 * only. */
void cpu_adam_tile(const cpu_adam_step *step, float *restrict master,
                   float *restrict m, float *restrict v,
                   const bf16 *restrict grads, bf16 *restrict params,
                   size_t begin, size_t end);

/* Called once for each tile [begin, end) of cpu_adam_update, by the
 * thread that updated it, as soon as it has (its outputs final): the
 * offload driver starts that tile's bf16 parameters back to the device
 * from here, while the thread goes on with its next tile. Called from
 * several threads at once: it must be safe for that. */
typedef void cpu_adam_tile_done(void *context, size_t begin, size_t end);

/* TODO 2. One step of all `count` elements (count may be 0), as
 * cpu_adam_tile on the tiles [k TILE, (k+1) TILE) of CPU_ADAM_TILE
 * elements (the last one ending at count), each once, split among the
 * threads OpenMP gives a parallel
 * region (omp_set_num_threads, OMP_NUM_THREADS); after each tile,
 * tile_done(context, begin, end) from the thread that updated it (when
 * tile_done is not NULL). Returns when every tile is done. */
void cpu_adam_update(const cpu_adam_step *step, float *master, float *m,
                     float *v, const bf16 *grads, bf16 *params, size_t count,
                     cpu_adam_tile_done *tile_done, void *context);

#endif
