/* Lesson 07's benchmark: the CPU Adam of ZeRO-Offload, the reference
 * solution's fused cpu_adam_update against
 *   - adamw_step_mixed, the scalar reference (common/adamw.c);
 *   - the same step unfused, one pass over memory per operation, as a
 *     framework's separate tensor operations make it (grad.float(),
 *     mul_, add_, ..., param.to(bf16)), each pass vectorised and threaded;
 *   - a read-modify-write stream a[i] += b[i], what the memory gives;
 *   - PyTorch's torch.optim.AdamW(fused=True) on the CPU, alone and with
 *     the bf16 copy of the parameters a mixed-precision trainer needs,
 *     where `import torch` works (bench/bench_07_torch.py, a process of its
 *     own, asked for one timed step at a time);
 * at 10M and 100M parameters (100M: 1.6 GB of state, more than any cache),
 * on 1 and 2 threads. PyTorch runs under $PYTHON (else python3): to
 * include it, PYTHON=/path/to/venv/bin/python3 make bench, with torch
 * installed in that virtual environment (pip install torch). Memory: about
 * 3 GB here and 2 GB in PyTorch's process at 100M.
 *
 * The Adam variants are reported as effective bandwidth, 28 bytes a
 * parameter (what the fused step must move: read master, m, v and the bf16
 * gradient, write master, m, v and the bf16 parameter), so they compare
 * with each other and with the stream directly. PyTorch's step moves more
 * (fp32 gradients; its bf16 copy is a pass of its own), which is the point.
 *
 * Repetitions are interleaved (every variant once per round, the order
 * rotated each round) so that a busy neighbour slows all of them alike;
 * medians are reported; every buffer is allocated and written before the
 * first timing. Each timing follows a pause, in which the previous
 * variant's spinning threads go to sleep (PyTorch's spin some 10 ms after
 * a step, measured here), and then an untimed step of the same variant:
 * the timed one is the second of two back to back, as a training loop
 * runs its steps. The untimed step pays for waking the threads, which on
 * this virtual machine is slow after an idle pause (an empty parallel
 * region of 2 threads took 4-8 ms after 20 ms or more of idling, and
 * microseconds after 5 ms or less) and is no part of a step in training. Every variant of this program is
 * checked against the reference once, bit for bit, before any timing. */
#define _POSIX_C_SOURCE 200809L
/* MADV_HUGEPAGE, where the system has it (Linux). */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bf16.h"
#include "cli.h"
#include "cpu_adam.h"
#include "optimizer.h"
#include "rng.h"
#include "timer.h"

enum { FUSED, REFERENCE, UNFUSED, STREAM, TORCH, TORCH_BF16, KINDS };
static const char *const names[KINDS] = {
    "fused", "adamw_step_mixed", "unfused", "stream_rmw", "torch_adamw",
    "torch_adamw_bf16"
};
enum { THREAD_COUNTS = 2 };
static const int thread_counts[THREAD_COUNTS] = { 1, 2 };
enum { VARIANTS = KINDS * THREAD_COUNTS };

/* Bytes a parameter the fused step moves: the yardstick of every Adam
 * variant. The stream moves 12 a element. */
#define ADAM_BYTES 28.0
#define STREAM_BYTES 12.0

static const adamw_config config = { 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f };

/* The optimizer's buffers, and the unfused step's temporaries (which the
 * stream reuses). */
typedef struct {
    size_t n;
    float *master, *m, *v;
    bf16 *grads, *params;
    float *g, *t1, *t2;
} state;

static void *alloc_or_exit(size_t count, size_t size, const char *what)
{
    size_t bytes = (count * size + 63) / 64 * 64;
    /* Aligned to 2 MiB and, on Linux, in transparent huge pages where the
     * system gives them on request (its setting "madvise"): a 100M-element
     * buffer in 4 KiB pages takes a TLB miss every 1024 floats, which
     * times the page walker, not the memory. PyTorch's allocator asks the
     * same for its large tensors when THP_MEM_ALLOC_ENABLE=1, which
     * torch_start sets: every variant here gets the same pages. */
    enum { HUGE_PAGE = 2 << 20 };
    const size_t alignment = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    bytes = (bytes + alignment - 1) / alignment * alignment;
    void *memory = aligned_alloc(alignment, bytes);
    if (memory == NULL) {
        fprintf(stderr, "bench_07: cannot allocate %s (%zu bytes)\n", what,
                bytes);
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    if (alignment == HUGE_PAGE)
        (void)madvise(memory, bytes, MADV_HUGEPAGE);  /* a hint: may fail */
#endif
    return memory;
}

/* Every element written (first touch, by two threads as the timed loops
 * will), with values that keep every operation on normal numbers:
 * subnormals cost microcode assists on x86 and would time something else. */
static state state_alloc(size_t n)
{
    state s = { n, alloc_or_exit(n, sizeof(float), "master"),
                alloc_or_exit(n, sizeof(float), "m"),
                alloc_or_exit(n, sizeof(float), "v"),
                alloc_or_exit(n, sizeof(bf16), "grads"),
                alloc_or_exit(n, sizeof(bf16), "params"),
                alloc_or_exit(n, sizeof(float), "g"),
                alloc_or_exit(n, sizeof(float), "t1"),
                alloc_or_exit(n, sizeof(float), "t2") };
    omp_set_num_threads(2);
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = rng_at_u64(7, i, 0);
        double u = rng_bits_to_uniform(bits);
        s.master[i] = (float)(2 * u - 1);
        s.m[i] = (float)(0.01 * (u - 0.5));
        s.v[i] = (float)(1e-4 * u + 1e-6);
        float g = (float)(0.001 + rng_bits_to_uniform(bits >> 11 | bits << 53));
        s.grads[i] = bf16_from_float((bits & 1) ? g : -g);
        s.params[i] = bf16_from_float(s.master[i]);
        s.g[i] = s.t1[i] = s.t2[i] = 1.0f;
    }
    return s;
}

static void state_free(state *s)
{
    free(s->master);
    free(s->m);
    free(s->v);
    free(s->grads);
    free(s->params);
    free(s->g);
    free(s->t1);
    free(s->t2);
}

/* The step as separate tensor operations: each line one pass over memory,
 * vectorised and split among the threads, with the temporaries a framework
 * would allocate (here allocated once, which only flatters it). The same
 * operations as adamw_element in the same order, so the same bits. */
static void unfused_step(const cpu_adam_step *c, state *s)
{
    const size_t n = s->n;
    const float beta1 = c->adamw.beta1, beta2 = c->adamw.beta2;
    const float c1 = c->adamw.correction1, c2 = c->adamw.correction2;
    const float eps = c->adamw.epsilon, wd = c->adamw.weight_decay;
    const float lr = c->adamw.learning_rate, scale = c->scale;
    float *restrict master = s->master, *restrict m = s->m, *restrict v = s->v;
    float *restrict g = s->g, *restrict t1 = s->t1, *restrict t2 = s->t2;
    const bf16 *restrict grads = s->grads;
    bf16 *restrict params = s->params;
#define PASS _Pragma("omp parallel for simd schedule(static)") \
             for (size_t i = 0; i < n; i++)
    PASS g[i] = bf16_to_float(grads[i]);        /* grad.float() */
    PASS g[i] *= scale;                         /* g.mul_(scale) */
    PASS m[i] *= beta1;                         /* m.mul_(beta1) */
    PASS t1[i] = g[i] * (1.0f - beta1);         /* g * (1 - beta1) */
    PASS m[i] += t1[i];                         /* m.add_(t1) */
    PASS v[i] *= beta2;                         /* v.mul_(beta2) */
    PASS t1[i] = (1.0f - beta2) * g[i];         /* g * (1 - beta2) */
    PASS t1[i] *= g[i];                         /* t1.mul_(g) */
    PASS v[i] += t1[i];                         /* v.add_(t1) */
    PASS t1[i] = m[i] / c1;                     /* m_hat = m / c1 */
    PASS t2[i] = v[i] / c2;                     /* v_hat = v / c2 */
    PASS t2[i] = sqrtf(t2[i]);                  /* v_hat.sqrt_() */
    PASS t2[i] += eps;                          /* .add_(eps) */
    PASS t1[i] /= t2[i];                        /* m_hat.div_(denom) */
    PASS t2[i] = master[i] * wd;                /* master * wd */
    PASS t1[i] += t2[i];                        /* .add_() */
    PASS t1[i] *= lr;                           /* .mul_(lr) */
    PASS master[i] -= t1[i];                    /* master.sub_() */
    PASS params[i] = bf16_from_float(master[i]); /* master.to(bf16) */
#undef PASS
}

static void stream_rmw(state *s)
{
    float *restrict a = s->t1;
    const float *restrict b = s->t2;
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < s->n; i++)
        a[i] += b[i];
}

/* ---- PyTorch, in a process of its own ---- */

typedef struct {
    pid_t pid;
    FILE *to, *from;
    char version[256];
} torch_process;

/* Starts the script; false, with the reason in `why`, where it cannot
 * run or PyTorch is missing. */
static bool torch_start(torch_process *t, const char *python,
                        const char *script, char *why, size_t why_len)
{
    int down[2], up[2];
    if (pipe(down) != 0 || pipe(up) != 0) {
        snprintf(why, why_len, "skipped: no pipe: %s", strerror(errno));
        return false;
    }
    t->pid = fork();
    if (t->pid < 0) {
        snprintf(why, why_len, "skipped: cannot fork: %s", strerror(errno));
        return false;
    }
    if (t->pid == 0) {
        dup2(down[0], 0);
        dup2(up[1], 1);
        close(down[0]), close(down[1]), close(up[0]), close(up[1]);
        /* PyTorch's allocator asks for transparent huge pages only when
         * told to: the same pages as this program's buffers (alloc_or_exit).
         * Its step measured the same with and without them here. */
        setenv("THP_MEM_ALLOC_ENABLE", "1", 1);
        execlp(python, python, script, (char *)NULL);
        printf("skipped: cannot run %s (%s): set PYTHON to a Python 3 with "
               "PyTorch\n", python, strerror(errno));
        fflush(stdout);
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    t->to = fdopen(down[1], "w");
    t->from = fdopen(up[0], "r");
    char line[256] = "";
    if (t->to == NULL || t->from == NULL ||
        fgets(line, sizeof line, t->from) == NULL ||
        strncmp(line, "ready ", 6) != 0) {
        line[strcspn(line, "\n")] = '\0';
        snprintf(why, why_len, "%s", line[0] ? line
                 : "skipped: the PyTorch script ended without a word");
        if (t->to != NULL)
            fclose(t->to);
        if (t->from != NULL)
            fclose(t->from);
        waitpid(t->pid, NULL, 0);
        return false;
    }
    line[strcspn(line, "\n")] = '\0';
    snprintf(t->version, sizeof t->version, "%s", line + 6);
    return true;
}

/* Sends one command and reads its one-line answer. */
static void torch_ask(torch_process *t, const char *command, char *answer,
                      size_t len)
{
    fprintf(t->to, "%s\n", command);
    fflush(t->to);
    if (fgets(answer, (int)len, t->from) == NULL) {
        fprintf(stderr, "bench_07: the PyTorch script ended at \"%s\"\n",
                command);
        exit(1);
    }
}

static double torch_seconds(torch_process *t, int kind, int threads)
{
    char command[64], answer[64];
    snprintf(command, sizeof command, "%s %d",
             kind == TORCH ? "adamw" : "adamw_bf16", threads);
    torch_ask(t, command, answer, sizeof answer);
    return strtod(answer, NULL);
}

static void torch_stop(torch_process *t)
{
    fprintf(t->to, "quit\n");
    fclose(t->to);
    fclose(t->from);
    waitpid(t->pid, NULL, 0);
}

/* ---- The benchmark ---- */

static void pause_ms(int ms)
{
    struct timespec pause = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&pause, NULL);
}

/* One step of this program's variant `kind` on `threads` threads. */
static void run(int kind, int threads, const cpu_adam_step *c, state *s)
{
    omp_set_num_threads(threads);
    switch (kind) {
    case FUSED:
        cpu_adam_update(c, s->master, s->m, s->v, s->grads, s->params, s->n,
                        NULL, NULL);
        break;
    case REFERENCE:
        adamw_step_mixed(&config, 1, s->master, s->m, s->v, s->grads,
                         c->scale, s->params, s->n);
        break;
    case UNFUSED:
        unfused_step(c, s);
        break;
    case STREAM:
        stream_rmw(s);
        break;
    }
}

/* Each of this program's Adam variants once on a copy of a small state,
 * bit for bit against adamw_step_mixed: a fast wrong answer is not a
 * result. */
static void check_variants(void)
{
    const size_t n = 1000003;
    const cpu_adam_step c = cpu_adam_step_of(&config, 1, 1.0f / 3.0f);
    for (int kind = FUSED; kind <= UNFUSED; kind++)
        for (int t = 0; t < THREAD_COUNTS; t++) {
            state got = state_alloc(n), want = state_alloc(n);
            run(kind, thread_counts[t], &c, &got);
            adamw_step_mixed(&config, 1, want.master, want.m, want.v,
                             want.grads, c.scale, want.params, n);
            if (memcmp(got.master, want.master, n * sizeof(float)) != 0 ||
                memcmp(got.m, want.m, n * sizeof(float)) != 0 ||
                memcmp(got.v, want.v, n * sizeof(float)) != 0 ||
                memcmp(got.params, want.params, n * sizeof(bf16)) != 0) {
                fprintf(stderr, "bench_07: %s on %d thread%s is not bitwise "
                        "adamw_step_mixed\n", names[kind], thread_counts[t],
                        thread_counts[t] == 1 ? "" : "s");
                exit(1);
            }
            state_free(&got);
            state_free(&want);
        }
}

int main(int argc, char **argv)
{
    size_t small = 10000000, large = 100000000;
    int reps = 5, pause = 100;
    const char *python = getenv("PYTHON") ? getenv("PYTHON") : "python3";
    const char *script = "bench/bench_07_torch.py";
    const cli_option options[] = {
        { "small", CLI_SIZE, &small, "parameters of the first size", 1,
          (size_t)1 << 32 },
        { "large", CLI_SIZE, &large, "parameters of the second size (0: "
          "none)", 0, (size_t)1 << 32 },
        { "reps", CLI_INT, &reps, "interleaved repetitions", 1,
          TIMINGS_MAX },
        { "pause-ms", CLI_INT, &pause, "idle time before each timing, so "
          "that spinning threads of the previous variant go to sleep", 0,
          10000 },
        { "python", CLI_STRING, &python, "the Python that runs the PyTorch "
          "side (default: $PYTHON, else python3)", 0, 0 },
        { "torch-script", CLI_STRING, &script, "the PyTorch side", 0, 0 },
    };
    const cli_spec spec = { "bench_07", "lesson 07's CPU Adam against the "
                            "scalar reference, an unfused step, a stream and "
                            "PyTorch's fused AdamW, on 1 and 2 threads",
                            options, sizeof options / sizeof options[0] };
    cli_parse_or_exit(&spec, argc, argv, false);

    check_variants();
    torch_process torch;
    char why[256] = "";
    bool have_torch = torch_start(&torch, python, script, why, sizeof why);

    FILE *csv = bench_csv_open();
    const size_t sizes[2] = { small, large };
    for (int z = 0; z < 2 && sizes[z] > 0; z++) {
        const size_t n = sizes[z];
        state s = state_alloc(n);
        if (have_torch) {
            char command[64], answer[64];
            snprintf(command, sizeof command, "size %zu", n);
            torch_ask(&torch, command, answer, sizeof answer);
        }
        const cpu_adam_step c = cpu_adam_step_of(&config, 1, 1.0f / 3.0f);
        /* Each variant once, untimed: every thread team started. */
        for (int v = 0; v < VARIANTS; v++) {
            int kind = v % KINDS, threads = thread_counts[v / KINDS];
            if (kind == TORCH || kind == TORCH_BF16) {
                if (have_torch)
                    (void)torch_seconds(&torch, kind, threads);
            } else {
                run(kind, threads, &c, &s);
            }
        }
        static double seconds[VARIANTS][TIMINGS_MAX];
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < VARIANTS; k++) {
                int v = (r + k) % VARIANTS;
                int kind = v % KINDS, threads = thread_counts[v / KINDS];
                if ((kind == TORCH || kind == TORCH_BF16) && !have_torch)
                    continue;
                pause_ms(pause);
                if (kind == TORCH || kind == TORCH_BF16) {
                    seconds[v][r] = torch_seconds(&torch, kind, threads);
                } else {
                    run(kind, threads, &c, &s);  /* wakes the threads */
                    double start = timer_now();
                    run(kind, threads, &c, &s);
                    seconds[v][r] = timer_now() - start;
                }
            }
        state_free(&s);

        double gbs[VARIANTS] = { 0 };
        for (int v = 0; v < VARIANTS; v++) {
            int kind = v % KINDS;
            if ((kind == TORCH || kind == TORCH_BF16) && !have_torch)
                continue;
            gbs[v] = (kind == STREAM ? STREAM_BYTES : ADAM_BYTES) *
                     (double)n / timings_median(seconds[v], reps) / 1e9;
        }
        char size[32];
        snprintf(size, sizeof size, "%zuM", n / 1000000);
        printf("lesson 07: CPU Adam, %zu parameters, medians of %d "
               "interleaved repetitions, each the second of two steps after "
               "a %d ms pause; Adam variants in GB/s at 28 bytes a "
               "parameter\n", n, reps, pause);
        printf("  %-4s %-16s %-11s %3s %3s  %-10s %10s %-8s %-16s %s\n",
               "less", "variant", "size", "thr", "rks", "metric", "value",
               "unit", "baseline", "ratio");
        for (int t = 0; t < THREAD_COUNTS; t++) {
            const int threads = thread_counts[t];
            const double *g = &gbs[t * KINDS];
            bench_row rows[12];
            int count = 0;
            rows[count++] = (bench_row){ "07", "fused", size, threads, 1,
                "bandwidth", g[FUSED], "GB/s", "adamw_step_mixed",
                g[REFERENCE] };
            rows[count++] = (bench_row){ "07", "fused", size, threads, 1,
                "bandwidth", g[FUSED], "GB/s", "unfused", g[UNFUSED] };
            rows[count++] = (bench_row){ "07", "fused", size, threads, 1,
                "bandwidth", g[FUSED], "GB/s", "stream_rmw", g[STREAM] };
            if (have_torch) {
                rows[count++] = (bench_row){ "07", "fused", size, threads, 1,
                    "bandwidth", g[FUSED], "GB/s", "torch_adamw", g[TORCH] };
                rows[count++] = (bench_row){ "07", "fused", size, threads, 1,
                    "bandwidth", g[FUSED], "GB/s", "torch_adamw_bf16",
                    g[TORCH_BF16] };
            }
            for (int kind = REFERENCE; kind < KINDS; kind++)
                if (have_torch || (kind != TORCH && kind != TORCH_BF16))
                    rows[count++] = (bench_row){ "07", names[kind], size,
                        threads, 1, "bandwidth", g[kind], "GB/s", NULL, 0 };
            for (int k = 0; k < count; k++)
                bench_record(csv, &rows[k]);
        }
        for (int t = 0; t < THREAD_COUNTS; t++) {
            const double *g = &gbs[t * KINDS];
            printf("targets, %s on %d thread%s: fused/unfused >= 4: %.2f; ",
                   size, thread_counts[t], thread_counts[t] == 1 ? "" : "s",
                   g[FUSED] / g[UNFUSED]);
            if (have_torch)
                printf("fused/torch_adamw >= 0.95: %.2f; "
                       "fused/torch_adamw_bf16 >= 1.3: %.2f",
                       g[FUSED] / g[TORCH], g[FUSED] / g[TORCH_BF16]);
            else
                printf("PyTorch: %s", why);
            /* The stream is what the memory gives (a[i] += b[i]), and
             * the fused step's bytes cannot move faster: well over 100%
             * means the stream's own run was slowed, by other load on a
             * shared machine. */
            printf("; fused at %.0f%% of the stream's bandwidth%s\n",
                   100 * g[FUSED] / g[STREAM],
                   g[FUSED] > 1.1 * g[STREAM]
                       ? " (over 100%: the stream's run was slowed by "
                         "other load; run again on a quiet machine)"
                       : "");
        }
        printf("\n");
    }
    if (have_torch) {
        printf("PyTorch %s, torch.optim.AdamW(fused=True), fp32 gradients\n",
               torch.version);
        torch_stop(&torch);
    }
    if (csv != NULL)
        fclose(csv);
    return 0;
}
