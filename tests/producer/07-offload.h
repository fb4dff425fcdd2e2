/* Lesson 07's test cases, in one place for both sides: the judge
 * (tests/test_07-offload.c), which computes the references and decides,
 * and the producer (tests/producer/07-offload.c), which runs the student's
 * CPU Adam. Both generate every input here, from one seed, element by
 * element (a buffer of ten million elements is not worth a file), and must
 * agree on every size, offset and step. */
#ifndef ZZ_TEST07_CASES_H
#define ZZ_TEST07_CASES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "optimizer.h"

/* The settings of every step: weight decay on, so that its term counts,
 * and a scale of 1/3 (the mean over three ranks), which no power of two
 * could stand for: every gradient is rounded once more when scaled. */
static const adamw_config case_config = { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f };
#define CASE_SCALE (1.0f / 3.0f)

/* Steps 1 .. CASE_STEPS, from m = v = 0 as training starts: the first
 * step's bias corrections are the largest, and from the second on the
 * moments are no longer zero. */
enum { CASE_STEPS = 3 };

/* A case's buffers are CASE_ROOM + length + CASE_ROOM elements, aligned to
 * 64 bytes (a cache line, and a whole AVX-512 vector); its elements start
 * CASE_ROOM or fewer in (1 .. 15 elements: no vector boundary), and every
 * element outside them must come back as it was generated. */
enum { CASE_ROOM = 16, CASE_MAX_OFFSET = 15 };

/* A case's buffers, each CASE_ROOM + length + CASE_ROOM elements (each
 * side allocates them its own way, and frees them alike). */
typedef struct {
    size_t room;
    float *master, *m, *v;
    bf16 *grads, *params;
} buffers;

static inline void buffers_free(buffers *b)
{
    free(b->master);
    free(b->m);
    free(b->v);
    free(b->grads);
    free(b->params);
}

/* The lengths of the exact cases: none, one, one under, at and over a
 * vector of 16 floats (a whole AVX-512 register, two AVX2 ones), and a
 * buffer of 10^7 + 3 elements, many tiles with a short last one. */
static const size_t case_lengths[] = { 0, 1, 15, 16, 17, 10000003 };
enum { case_length_count = sizeof case_lengths / sizeof case_lengths[0] };
/* Up to this length, every offset 0 .. CASE_MAX_OFFSET in one run; beyond
 * it, the offset LARGE_OFFSET alone. */
enum { CASE_EVERY_OFFSET = 1000, LARGE_OFFSET = 3 };

/* The instructions case: cpu_adam_tile single-stepped on these lengths;
 * the difference of two counts over the difference of the lengths is what
 * one more element costs, free of what a call costs anyway. Multiples of
 * 64, so that every vector width's loop ends the same way on both. */
#define INSTRUCTION_LENGTHS { 64, 192 }
enum { INSTRUCTION_LENGTH_COUNT = 2 };

/* The update case on the longest length also runs one step on exactly
 * WHOLE_TILES tiles (tiles-whole): a whole number of them. */
enum { WHOLE_TILES = 2 };

/* The threads case: OMP_NUM_THREADS=THREADS_CASE_THREADS, one step of
 * THREADS_CASE_LENGTH elements (many tiles for each thread, and a short
 * last one); the sampling stride of the tile log (below). 127 tiles, under
 * 64 a thread: GCC's OpenMP runs a task loop of more tasks than that
 * (taskloop grainsize(1), one task a tile) on the thread that meets it,
 * all of them, as the standard lets a runtime do; a correct program of
 * tasks had every tile on one thread at 129 tiles. */
enum { THREADS_CASE_THREADS = 2 };
#define THREADS_CASE_LENGTH ((size_t)126 * 32768 + 11)
enum { SAMPLE_STRIDE = 1024 };
/* The most callbacks the producer notes; more are counted only. */
enum { TILE_LOG_CAPACITY = 1 << 16 };
/* A bf16 that no update writes here: a NaN (every generated master weight
 * is finite, and so is every update of it), so a parameter still holding
 * it has not been written yet. */
enum { PARAM_UNWRITTEN = 0x7fa5 };

/* One callback, as the producer noted it: its place in the order of all
 * callbacks (numbered as they begin), the tile, the OpenMP thread number
 * and the system's thread id of the thread that called, that thread's CPU
 * time (nanoseconds) when the callback began and when the producer's own
 * work in it ended, how many sampled parameters (every SAMPLE_STRIDE-th
 * element) had been written when it looked, and how many callbacks had
 * begun by the time it had looked. */
typedef struct {
    uint64_t order, begin, end;
    int64_t omp_thread, system_thread;
    uint64_t cpu_in_ns, cpu_out_ns;
    uint64_t written_samples, begun_after;
} tile_note;

/* Side by side: during the threads case the gradients are read-protected,
 * and the first thread to read one inside a parallel region of two or
 * more threads is held in the fault handler, inside its tile's work, until
 * another thread reads one too (RENDEZVOUS_OUTCOME_MET) or RENDEZVOUS_MS
 * pass (RENDEZVOUS_OUTCOME_ALONE); then every page is open again. A thread
 * held inside its tile keeps whatever lock that work took: tiles updated
 * one at a time (a critical section, ordered, a lock around the work)
 * leave the other thread waiting for it, and give the same bits and the
 * same CPU time on each thread as tiles side by side. A first read outside
 * such a region, where waiting could not tell anything, is only noted
 * (RENDEZVOUS_OUTCOME_OUTSIDE); the sanitized builds do not arm it
 * (RENDEZVOUS_OUTCOME_UNARMED), as the normal pass judges it. 8 s: a
 * waiting thread sleeps, so the other one has a core even on a busy
 * machine, and needs microseconds to reach its first tile. */
enum {
    RENDEZVOUS_OUTCOME_UNARMED, RENDEZVOUS_OUTCOME_MET,
    RENDEZVOUS_OUTCOME_ALONE, RENDEZVOUS_OUTCOME_OUTSIDE
};
enum { RENDEZVOUS_MS = 8000 };
typedef struct {
    int64_t outcome;
    int64_t held_omp_thread;    /* the thread held (-1: none) */
    int64_t held_ms;            /* how long it was held */
} rendezvous_note;

/* A thread's CPU time before the update, noted by an OpenMP region of the
 * producer's own just before it (the runtime keeps the same threads for
 * the next region). */
typedef struct {
    int64_t system_thread;
    uint64_t cpu_ns;
} thread_start;

/* ---- The generated inputs ------------------------------------------------ */

/* A well-mixed 64-bit number for (seed, stream, index): splitmix64's
 * finaliser. Any element can be made on its own, so both sides make the
 * same buffer in any order. */
static inline uint64_t case_hash(uint64_t seed, uint64_t stream,
                                 uint64_t index)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15u + stream * 0xbf58476d1ce4e5b9u +
                 index;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A float with the given sign, exponent (biased, 8 bits) and mantissa
 * (23 bits). */
static inline float case_float(uint32_t sign, uint32_t exponent,
                               uint32_t mantissa)
{
    uint32_t bits = (sign << 31) | (exponent << 23) | (mantissa & 0x7fffffu);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* The gradient of element i at step `step`: mostly ordinary values of
 * either sign between about 1e-6 and 2, and among them zeros of both
 * signs, bf16 subnormals (whose square underflows: v may stay 0, and the
 * step is then m_hat / epsilon), the smallest normals, and large values. */
static inline bf16 case_grad(uint64_t seed, int step, size_t i)
{
    uint64_t h = case_hash(seed, 100 + (uint64_t)step, i);
    uint32_t sign = (uint32_t)(h >> 63), kind = (uint32_t)(h & 15);
    uint32_t mantissa = (uint32_t)(h >> 8) & 0x7fffffu;
    uint32_t spread = (uint32_t)(h >> 40);
    switch (kind) {
    case 0:
        return (bf16)(sign << 15);                       /* +0 or -0 */
    case 1:
        return (bf16)((sign << 15) | 1u | (mantissa & 0x7fu)); /* subnormal */
    case 2:
        return bf16_from_float(case_float(sign, 1 + spread % 4, mantissa));
    case 3:
        return bf16_from_float(case_float(sign, 135 + spread % 8, mantissa));
    default:
        return bf16_from_float(case_float(sign, 107 + spread % 21, mantissa));
    }
}

/* Element i's master weight before the first step: of either sign, from
 * about 1e-4 to 4, some exactly 0. */
static inline float case_master(uint64_t seed, size_t i)
{
    uint64_t h = case_hash(seed, 1, i);
    if ((h & 31) == 0)
        return 0.0f;
    return case_float((uint32_t)(h >> 63), 114 + (uint32_t)(h >> 40) % 15,
                      (uint32_t)(h >> 8));
}

/* The state before the first step, elements [0, count): the master
 * weights, zero moments, and parameters that are the master weights
 * rounded (params may be NULL). */
static inline void case_fill_state(uint64_t seed, size_t count, float *master,
                                   float *m, float *v, bf16 *params)
{
    for (size_t i = 0; i < count; i++) {
        master[i] = case_master(seed, i);
        m[i] = 0.0f;
        v[i] = 0.0f;
        if (params != NULL)
            params[i] = bf16_from_float(master[i]);
    }
}

/* Step `step`'s gradients, elements [0, count). */
static inline void case_fill_grads(uint64_t seed, int step, size_t count,
                                   bf16 *grads)
{
    for (size_t i = 0; i < count; i++)
        grads[i] = case_grad(seed, step, i);
}

/* The seed of the case of length index k, and of the threads case. */
static inline uint64_t case_seed(int k)
{
    return 7070u + (uint64_t)k;
}
enum { THREADS_CASE_SEED = 7777 };

#endif
