/* Lesson 05's second program: runs your ring allreduce (or your average of
 * gradients, or your overlapped averages of TODO 4) on data generated from
 * a seed, once for each length asked for, and reports to the tests what
 * every rank got and what it sent. Each
 * rank's element k is a function of (seed, rank, k) (ring_data.h), so a
 * test can compute the exact sum by itself.
 *
 *   scripts/mpirun -np 4 build/student/05-data-parallel/ring_check --counts 0,1,3,1003
 *
 * With --split, your code gets a communicator that is not MPI_COMM_WORLD:
 * rank 0 alone, and ranks 1 to P-1 together in reverse order (world rank
 * P-1 is rank 0 of that communicator). Code that uses MPI_COMM_WORLD, or a
 * world rank where it needs its rank in the communicator, shows. With
 * --repeat N, the last length runs N more times, and the report says how
 * much the process's memory grew over those calls (a leak grows it at
 * every call).
 * You do not need to change this file. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "boundary.h"
#include "check_mpi.h"
#include "cli.h"
#include "comm_ledger.h"
#include "data_parallel.h"
#include "matrix.h"
#include "memory_ledger.h"
#include "overlap_guard.h"
#include "partition.h"
#include "report.h"
#include "ring_data.h"
#include "steps.h"
#include "thread_heap.h"
#include "timer.h"

/* Guards around the data: no sum of ring_data.h's values comes near
 * them. FRONT_GUARD floats before it, for writing before the start, and
 * BACK_GUARD after it: the first, data[count], goes to the tests with the
 * result (a slip of one past the end, which they diagnose); the others are
 * checked right after your call, before anything else touches the heap
 * that a write far past the end would corrupt (as are the ones before).
 * The guard after is as long as 3 x count more: an MPI call given a
 * datatype wider than float (MPI_DOUBLE: twice the bytes; long double or
 * a complex type: four times) writes inside it, where it is found, not
 * into the heap's own records, where glibc would abort later with a
 * message that names no MPI call. */
static const float guard = 12345.0f;
enum { FRONT_GUARD = 16, BACK_GUARD = 16 };
/* Beyond this many floats a wide guard costs more memory than it is worth;
 * the tests' lengths stay far below it. */
#define WIDE_GUARD_MAX_COUNT ((size_t)1 << 22)

static size_t back_guard_length(size_t count)
{
    return BACK_GUARD + (count <= WIDE_GUARD_MAX_COUNT ? 3 * count : 0);
}

/* TODO 4's run: the data as this many layers' slices, started last
 * first, as backward finishes them. */
enum { OVERLAP_LAYERS = 3 };

typedef struct {
    bool ring;          /* else the average (TODO 2) or, with overlap, TODO 4 */
    bool overlap;
    uint64_t seed;
    int rank;           /* in MPI_COMM_WORLD: the data is made from it */
    MPI_Comm comm;      /* what your code is given */
    const char *out;
    FILE *report;
    comm_counts traffic; /* every call's, added up: the report's last line */
    /* What TODO 4 left running, seen by the communication ledger as each
     * start_layer_average returned (as the training driver sees it). */
    size_t starts_returned, starts_left_running;
    overlap_state state;    /* TODO 4's, for every length */
} check_config;

/* "0,1,3,1003" into counts; the number of them, or -1 if malformed. */
static int parse_counts(const char *text,
                        size_t counts[RING_CHECK_MAX_COUNTS])
{
    int n = 0;
    const char *at = text;
    while (*at) {
        char *end;
        if (*at < '0' || *at > '9' || n == RING_CHECK_MAX_COUNTS)
            return -1;
        errno = 0;
        unsigned long long value = strtoull(at, &end, 10);
        if (errno != 0 || value > (1ull << 28))
            return -1;
        counts[n++] = (size_t)value;
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return -1;
        at = end;
    }
    return n;
}

/* count floats with the guards before and after them, or every rank
 * stops; freed with free_guarded. */
static float *guarded_data(size_t count, int rank)
{
    float *block = (float *)ledger_alloc(MEMORY_VECTOR,
                                         (FRONT_GUARD + count +
                                          back_guard_length(count)) *
                                             sizeof *block);
    if (block == NULL) {
        fprintf(stderr, "ring_check: rank %d: no memory for %zu floats\n",
                rank, count);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int k = 0; k < FRONT_GUARD; k++)
        block[k] = guard;
    return block + FRONT_GUARD;
}

/* The guards after the data, again before each call. */
static void fill_back_guard(float *data, size_t count)
{
    for (size_t k = 0; k < back_guard_length(count); k++)
        data[count + k] = guard;
}

static void free_guarded(float *data)
{
    ledger_free(data - FRONT_GUARD);
}

/* Stops every rank when your code wrote before data[0], or further past
 * data[count - 1] than data[count] (which the tests see): at once, before
 * a heap broken by the write is met somewhere else. */
static void check_guards(const check_config *c, const float *data,
                         size_t count)
{
    for (size_t k = count + 1; k < count + back_guard_length(count); k++)
        if (memcmp(&data[k], &guard, sizeof guard) != 0) {
            fprintf(stderr, "ring_check: rank %d: your code wrote far past "
                    "the end of its data (count %zu): data[%zu] became "
                    "%.9g. Hint: TODO %d: touch only data[0] to "
                    "data[count-1]; an MPI call's count is in elements of "
                    "its datatype, and the datatype is the buffer's "
                    "(MPI_FLOAT for float: MPI_DOUBLE moves 8 bytes an "
                    "element)\n", c->rank, count, k, (double)data[k],
                    c->ring ? 3 : c->overlap ? 4 : 2);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    for (int k = 1; k <= FRONT_GUARD; k++)
        if (memcmp(&data[-k], &guard, sizeof guard) != 0) {
            fprintf(stderr, "ring_check: rank %d: your code wrote before "
                    "the start of its data: the float %d before data[0] "
                    "became %.9g. Hint: TODO %d: an index below 0: one "
                    "off by one, or a chunk number that is negative (in C, "
                    "(rank - s) %% P is negative when rank < s: add P "
                    "before taking %% P)\n", c->rank, k, (double)data[-k],
                    c->ring ? 3 : c->overlap ? 4 : 2);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
}

/* Runs your code once; what its MPI calls counted joins c->traffic
 * (the ledger is reset before each length's first call). */
static void call_student(check_config *c, float *data, size_t count)
{
    comm_counts before = comm_ledger_total();
    if (c->ring) {
        steps_enter("TODO 3: ring_allreduce");
        ring_allreduce(data, count, c->comm);
    } else if (c->overlap) {
        /* One state for every length, as the driver keeps one for every
         * step: finish_averages leaves it ready for the next. */
        overlap_state *state = &c->state;
        for (int layer = OVERLAP_LAYERS - 1; layer >= 0; layer--) {
            size_t begin, end;
            block_range(count, OVERLAP_LAYERS, (size_t)layer, &begin, &end);
            overlap_guard(state, "ring_check");
            steps_enter("TODO 4: start_layer_average");
            start_layer_average(state, data + begin, end - begin);
            steps_enter("report");
            comm_ledger_overwrite_dead_frames();
            c->starts_returned++;
            if (comm_ledger_open_requests(NULL) > 0)
                c->starts_left_running++;
            /* The next layer's backward (the driver's hook does the same). */
            comm_ledger_let_requests_finish(0.1);
        }
        steps_enter("TODO 4: finish_averages");
        finish_averages(state);
    } else {
        steps_enter("TODO 2: average_gradients");
        average_gradients(data, count, c->comm);
    }
    steps_enter("report");
    check_guards(c, data, count);
    comm_counts after = comm_ledger_total();
    c->traffic.calls += after.calls - before.calls;
    c->traffic.bytes_sent += after.bytes_sent - before.bytes_sent;
    c->traffic.bytes_received += after.bytes_received - before.bytes_received;
}

/* The bytes sent by point-to-point calls, the ones a ring is made of: a
 * ring of MPI_Sendrecv, of MPI_Isend and MPI_Irecv, or of MPI_Send and
 * MPI_Recv in an order that cannot deadlock, is a ring all the same. */
static unsigned long long point_to_point_sent(void)
{
    static const char *const calls[] = {
        "MPI_Send",     "MPI_Ssend",    "MPI_Bsend",
        "MPI_Rsend",    "MPI_Isend",    "MPI_Issend",
        "MPI_Ibsend",   "MPI_Irsend",   "MPI_Sendrecv",
        "MPI_Sendrecv_replace",         "MPI_Isendrecv",
        "MPI_Isendrecv_replace",
    };
    unsigned long long sent = 0;
    for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++)
        sent += comm_ledger_of(calls[k]).bytes_sent;
    return sent;
}

/* One call of the student's code on `count` fresh floats; the report for
 * that length goes to OUT/rank-R.txt as a "count N ..." line and to
 * OUT/result-N-rank-R.bin: the result and then the guard, as doubles. */
static void run_once(check_config *c, size_t count)
{
    float *data = guarded_data(count, c->rank);
    ring_data_fill(data, count, c->seed, c->rank);
    fill_back_guard(data, count);

    comm_ledger_reset();
    call_student(c, data, count);
    if (c->report != NULL) {
        comm_counts all = comm_ledger_total();
        fprintf(c->report, "count %zu point_to_point_sent %llu all_sent %llu "
                "all_received %llu requests_open %zu\n", count,
                (unsigned long long)point_to_point_sent(),
                (unsigned long long)all.bytes_sent,
                (unsigned long long)all.bytes_received,
                comm_ledger_open_requests(NULL));
        /* Out at once: a length that hangs shows as the first without
         * its line. */
        if (fflush(c->report) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        /* As doubles: every float converts exactly. */
        double *copy = vector_alloc_or_exit(count + 1, "result");
        for (size_t k = 0; k <= count; k++)
            copy[k] = data[k];
        char name[sizeof "result-18446744073709551615"]; /* any size_t */
        snprintf(name, sizeof name, "result-%zu", count);
        if (report_write_doubles(c->out, name, c->rank, copy, count + 1) != 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        matrix_free(copy);
    }
    free_guarded(data);
}

/* `calls` more calls on `count` floats, after those of run_once: how much
 * more memory the process holds after them than before, however your code
 * allocated it (common/memory_ledger.h), and how many of the calls left
 * more allocated by this thread outside MPI calls than they found
 * (thread_heap.h), with the bytes. Every call after the first needs no
 * new memory: what it allocates it can free, or keep for the next. */
static void run_repeated(check_config *c, size_t count, int calls)
{
    float *data = guarded_data(count, c->rank);
    size_t before = memory_ledger_heap_in_use();
    int calls_kept = 0;
    long long kept = 0;
    for (int k = 0; k < calls; k++) {
        ring_data_fill(data, count, c->seed, c->rank);
        fill_back_guard(data, count);
        thread_heap_begin(comm_ledger_inside_call);
        call_student(c, data, count);
        long long kept_now = thread_heap_end();
        if (kept < 0 || kept_now < 0) {
            kept = -1; /* too many blocks to note: no count */
            continue;
        }
        calls_kept += kept_now > kept;
        kept = kept_now;
    }
    size_t after = memory_ledger_heap_in_use();
    if (c->report != NULL) {
        fprintf(c->report, "repeat %d count %zu heap_growth %zu\n", calls,
                count, after > before ? after - before : 0);
        if (thread_heap_available() && kept >= 0)
            fprintf(c->report, "repeat %d count %zu calls_kept_bytes_kept "
                    "%d %lld\n", calls, count, calls_kept, kept);
    }
    free_guarded(data);
}

int main(int argc, char **argv)
{
    check_config c = { .seed = 5 };
    const char *counts_text = "1003", *mode = "ring";
    bool split = false;
    int ranks, repeat = 0;
    const cli_option options[] = {
        { "counts", CLI_STRING, &counts_text, "lengths to run, in floats, "
          "comma-separated", 0, 0 },
        { "seed", CLI_SEED, &c.seed, "seed the data is generated from", 0, 0 },
        { "mode", CLI_STRING, &mode, "ring (TODO 3), average (TODO 2) or "
          "overlap (TODO 4: start_layer_average on 3 slices, then "
          "finish_averages)", 0, 0 },
        { "split", CLI_FLAG, &split, "give your code rank 0 alone and ranks "
          "1..P-1 in reverse order, not MPI_COMM_WORLD", 0, 0 },
        { "repeat", CLI_INT, &repeat, "then call it this many more times on "
          "the last length, and report the memory growth", 0, 1000 },
        { "out", CLI_STRING, &c.out, "folder for the report to the tests",
          0, 0 },
    };
    const cli_spec spec = { "ring_check", "lesson 05: your allreduce on "
                            "generated data, once per length", options,
                            sizeof options / sizeof options[0] };

    mpi_start_or_exit(&argc, &argv, &spec, &c.rank, &ranks);
    size_t counts[RING_CHECK_MAX_COUNTS];
    int how_many = parse_counts(counts_text, counts);
    c.ring = strcmp(mode, "ring") == 0;
    c.overlap = strcmp(mode, "overlap") == 0;
    char counts_problem[96];
    snprintf(counts_problem, sizeof counts_problem, "--counts needs lengths "
             "like 0,1,1003 (at most %d, each at most 2^28)",
             RING_CHECK_MAX_COUNTS);
    const char *problem = how_many <= 0 ? counts_problem
                          : !c.ring && !c.overlap &&
                                    strcmp(mode, "average") != 0
                              ? "--mode must be ring, average or overlap"
                              : NULL;
    if (problem != NULL) {
        if (c.rank == 0)
            fprintf(stderr, "ring_check: %s\n", problem);
        mpi_exit_all(2);
    }
    c.report = mpi_report_open_or_exit("ring_check", c.out, c.rank);
    /* From here on your code runs: behind the boundary when graded, with
     * a result file for each length. */
    static char names[RING_CHECK_MAX_COUNTS][sizeof "result-18446744073709551615"];
    const char *reports[RING_CHECK_MAX_COUNTS + 1] = { NULL };
    for (int k = 0; k < how_many; k++) {
        snprintf(names[k], sizeof names[k], "result-%zu", counts[k]);
        reports[k] = names[k];
    }
    /* The split communicator is made before the boundary, as MPI's own
     * set-up is: after it, MPI would have to build it without the process
     * manager's shared memory, which the boundary takes away. */
    c.comm = MPI_COMM_WORLD;
    if (split)
        MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, c.rank == 0 ? 0 : 1,
                                 ranks - c.rank, &c.comm));
    mpi_enter_boundary_or_exit("ring_check", c.report, c.out, c.rank,
                               reports);

    c.state = (overlap_state){ .comm = c.comm };
    if (c.report != NULL)
        fprintf(c.report, "ranks %d\n", ranks);
    double start = timer_now();
    for (int k = 0; k < how_many; k++)
        run_once(&c, counts[k]);
    if (repeat > 0)
        run_repeated(&c, counts[how_many - 1], repeat);
    mpi_mark_done();
    if (c.report != NULL && c.overlap)
        fprintf(c.report, "overlap_starts %zu left_running %zu\n",
                c.starts_returned, c.starts_left_running);
    /* What every call of your code counted, for the tests to compare with
     * what the kernel saw cross (the watch). */
    if (c.report != NULL)
        fprintf(c.report, "comm_total %llu %llu %llu\n",
                (unsigned long long)c.traffic.calls,
                (unsigned long long)c.traffic.bytes_sent,
                (unsigned long long)c.traffic.bytes_received);
    if (c.report != NULL && fclose(c.report) != 0)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (c.rank == 0)
        printf("ring_check: %s of %d length%s on %d rank%s%s in %.3f ms\n",
               c.ring ? "ring allreduce" : c.overlap ? "overlapped average"
                                             : "average", how_many,
               how_many == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s",
               split ? " (split)" : "", 1e3 * (timer_now() - start));
    if (split)
        MPI_CHECK(MPI_Comm_free(&c.comm));
    MPI_CHECK(MPI_Finalize());
    return 0;
}
