/* A test program for the communication ledger and the steps file, run on
 * 3 ranks by tests/common/test_mpi.c:
 *   ledger_probe OUT_DIR          every rank makes each counted MPI call
 *                                 with known sizes (and completes every
 *                                 request, by every Wait and Test form),
 *                                 then writes its ledger to
 *                                 OUT_DIR/rank-R.txt
 *   ledger_probe --open OUT_DIR   every rank sends itself a message with
 *                                 MPI_Isend and never completes that
 *                                 request; the ledger goes to OUT_DIR,
 *                                 then "open_of NAME N": the requests
 *                                 open by the call that started them
 *   ledger_probe --seconds MS OUT_DIR
 *                                 rank 0 posts an MPI_Irecv, sends rank 1
 *                                 a message and waits (MPI_Wait) for
 *                                 rank 1's answer, which rank 1 sends MS
 *                                 milliseconds after receiving; rank 2
 *                                 makes no call. Each rank writes its
 *                                 ledger, then "seconds NAME S" (the
 *                                 ledger's seconds of some calls), then
 *                                 "seconds total S" and "seconds elapsed
 *                                 S" (its own clock around it all)
 *   ledger_probe --refuse KIND    rank 0 makes a call the ledger refuses:
 *                                 persistent, window or neighbours
 *   ledger_probe --frames KIND    each rank receives from its neighbour
 *                                 into an array on a function's stack:
 *                                 "live", waited for by a function that
 *                                 this function calls (a correct program,
 *                                 which must run to its end); "dead",
 *                                 started by a function that returns,
 *                                 after which the caller, as the drivers
 *                                 do, calls comm_ledger_overwrite_dead_
 *                                 frames, then waits from a function of
 *                                 its own; "dead-send", the same with the
 *                                 send buffer; "dead-waited", no such
 *                                 call, and the caller waits itself (the
 *                                 ledger must stop the last three)
 *   ledger_probe --aliased        every rank gives MPI_Allreduce one
 *                                 buffer to send from and receive into,
 *                                 which MPI refuses (MPI_ERR_BUFFER):
 *                                 MPI_CHECK's line must say to pass
 *                                 MPI_IN_PLACE
 *   ledger_probe --overlap        every rank gives MPI_Sendrecv a
 *                                 receive buffer that overlaps its send
 *                                 buffer, which MPI forbids and does not
 *                                 check: the ledger stops it
 *   ledger_probe --staged         each rank receives 5 floats from the
 *                                 rank before it into a buffer of 8 that
 *                                 holds 100-107: by MPI_Irecv and MPI_Wait
 *                                 (small, staged by the ledger), by one of
 *                                 20000 floats (larger than what the ledger
 *                                 stages), and by MPI_Irecv and
 *                                 MPI_Request_free then a barrier; prints
 *                                 "staged RANK: ..." with the bits of the
 *                                 buffer's first float before the wait and
 *                                 the buffers' floats after
 *   ledger_probe --shared-handles each rank sends the next two small
 *                                 messages by MPI_Isend, into two
 *                                 requests, waits for the first, writes
 *                                 its buffer, then waits for the second:
 *                                 a correct program (MPICH gives both
 *                                 requests one handle), which must run to
 *                                 its end and print "shared RANK: ..."
 *   ledger_probe --by-comm        the counts by communicator's name:
 *                                 ranks 0 and 1 of a communicator named
 *                                 "pair" (rank 2 alone in its own, also
 *                                 "pair") send each other 5 floats with
 *                                 MPI_Send and MPI_Recv; every rank
 *                                 allreduces 12 doubles on MPI_COMM_WORLD
 *                                 and calls MPI_Barrier on an unnamed
 *                                 duplicate of it. Each rank prints its
 *                                 comm_on lines, "RANK: " before each
 *   ledger_probe --hang           rank 0 waits for a message that never
 *                                 comes, inside a named step, so that the
 *                                 harness's deadlock report and clean-up
 *                                 can be tested */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "check_mpi.h"
#include "comm_ledger.h"
#include "steps.h"
#include "timer.h"

enum { N = 12 };

/* The calls whose seconds --seconds writes: those it makes, and one it
 * never makes. */
static const char *const timed_calls[] = { "MPI_Irecv", "MPI_Send",
                                           "MPI_Wait", "MPI_Recv",
                                           "MPI_Barrier", "MPI_Bcast" };

/* DIR/rank-R.txt, opened with `mode`, or the job ends. */
static FILE *open_rank_file(const char *dir, int rank, const char *mode)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.txt", dir, rank);
    FILE *out = fopen(path, mode);
    if (out == NULL) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return out;
}

static void close_rank_file(FILE *out)
{
    if (fclose(out) != 0) {
        perror("rank file");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* The ledger; with elapsed >= 0, the seconds lines after it. */
static void write_ledger_timed(const char *dir, int rank, double elapsed)
{
    FILE *out = open_rank_file(dir, rank, "w");
    comm_ledger_write(out);
    if (elapsed >= 0) {
        for (size_t k = 0; k < sizeof timed_calls / sizeof *timed_calls; k++)
            fprintf(out, "seconds %s %.9f\n", timed_calls[k],
                    comm_ledger_of(timed_calls[k]).seconds);
        fprintf(out, "seconds total %.9f\nseconds elapsed %.9f\n",
                comm_ledger_total().seconds, elapsed);
    }
    close_rank_file(out);
}

static void write_ledger(const char *dir, int rank)
{
    write_ledger_timed(dir, rank, -1);
}

/* --open: after the ledger, "open_of NAME N" for the call that left its
 * request open, one that started none, and a name the ledger does not
 * know. */
static void append_open_of(const char *dir, int rank)
{
    static const char *const calls[] = { "MPI_Isend", "MPI_Iallgatherv",
                                         "MPI_Nonesuch" };
    FILE *out = open_rank_file(dir, rank, "a");
    for (size_t k = 0; k < sizeof calls / sizeof *calls; k++)
        fprintf(out, "open_of %s %zu\n", calls[k],
                comm_ledger_open_requests_of(calls[k], NULL));
    close_rank_file(out);
}

/* --seconds: rank 1 answers rank 0 `pause_ms` after rank 0's message has
 * reached it, so rank 0's MPI_Wait cannot end sooner than that after rank
 * 0 entered MPI_Send. The barrier before the reset is in no count after
 * it. */
static void time_calls(long pause_ms, const char *dir, int rank)
{
    double go = 1, answer = 0;
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    comm_ledger_reset();
    const double start = timer_now();
    if (rank == 0) {
        MPI_Request request;
        MPI_CHECK(MPI_Irecv(&answer, 1, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD,
                            &request));
        MPI_CHECK(MPI_Send(&go, 1, MPI_DOUBLE, 1, 6, MPI_COMM_WORLD));
        MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    } else if (rank == 1) {
        MPI_CHECK(MPI_Recv(&go, 1, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        struct timespec pause = { pause_ms / 1000,
                                  (pause_ms % 1000) * 1000 * 1000 };
        while (nanosleep(&pause, &pause) != 0)
            ; /* interrupted by a signal: sleep the rest */
        MPI_CHECK(MPI_Send(&answer, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD));
    }
    write_ledger_timed(dir, rank, timer_now() - start);
}

/* Each call the ledger refuses, made by rank 0; the others wait at a
 * barrier that the refusal's MPI_Abort ends. */
static void refuse(const char *kind, int rank)
{
    double a[N] = { 0 }, b[3 * N];
    MPI_Request request;
    if (rank == 0) {
        if (strcmp(kind, "persistent") == 0)
            MPI_CHECK(MPI_Send_init(a, N, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD,
                                    &request));
        else if (strcmp(kind, "window") == 0) {
            MPI_Win window;
            double *base;
            MPI_CHECK(MPI_Win_allocate(64, 8, MPI_INFO_NULL, MPI_COMM_WORLD,
                                       &base, &window));
        } else if (strcmp(kind, "neighbours") == 0)
            MPI_CHECK(MPI_Neighbor_allgather(a, 1, MPI_DOUBLE, b, 1,
                                             MPI_DOUBLE, MPI_COMM_WORLD));
        fprintf(stderr, "ledger_probe: --refuse %s: not refused\n", kind);
        mpi_exit_all(3);
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    mpi_exit_all(3);
}

/* --frames: N doubles from the previous rank into `into`, and N to the
 * next from `from`, the two requests in `pair`. */
static void start_exchange(double *into, double *from, MPI_Request pair[2])
{
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    for (int k = 0; k < N; k++)
        from[k] = rank + k;
    MPI_CHECK(MPI_Irecv(into, N, MPI_DOUBLE, (rank + size - 1) % size, 5,
                        MPI_COMM_WORLD, &pair[0]));
    MPI_CHECK(MPI_Isend(from, N, MPI_DOUBLE, (rank + 1) % size, 5,
                        MPI_COMM_WORLD, &pair[1]));
}

static __attribute__((noinline)) void wait_exchange(MPI_Request pair[2])
{
    MPI_CHECK(MPI_Waitall(2, pair, MPI_STATUSES_IGNORE));
}

/* Both buffers here; the wait deeper down, in a frame of its own. */
static __attribute__((noinline)) double exchange_live(void)
{
    double into[N], from[N];
    MPI_Request pair[2];
    start_exchange(into, from, pair);
    wait_exchange(pair);
    return into[N - 1];
}

/* The receive (or, with `dead_send`, the send) buffer here, and the
 * requests left to the caller: this frame is gone before the wait. */
static double heap_side[N];
static __attribute__((noinline)) void start_dead(MPI_Request pair[2],
                                                 bool dead_send)
{
    double local[N];
    if (dead_send)
        start_exchange(heap_side, local, pair);
    else
        start_exchange(local, heap_side, pair);
}

static void frames(const char *kind)
{
    MPI_Request pair[2];
    if (strcmp(kind, "live") == 0) {
        volatile double last = exchange_live();
        (void)last;
    } else if (strcmp(kind, "dead") == 0 ||
               strcmp(kind, "dead-send") == 0) {
        start_dead(pair, strcmp(kind, "dead-send") == 0);
        comm_ledger_overwrite_dead_frames();
        wait_exchange(pair);
    } else if (strcmp(kind, "dead-waited") == 0) {
        start_dead(pair, false);
        MPI_CHECK(MPI_Waitall(2, pair, MPI_STATUSES_IGNORE));
    } else {
        fprintf(stderr, "ledger_probe: --frames %s: live, dead, dead-send "
                "or dead-waited\n", kind);
        mpi_exit_all(2);
    }
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_CHECK(MPI_Finalize());
    exit(0);
}

/* --staged: what a receive buffer holds before and after its completion.
 * A correct program reads it only after; the ledger must deliver exactly
 * what MPI would (the message, and the rest of the buffer as it was). */
static void staged(int rank, int size)
{
    enum { ROOM = 8, SENT = 5, LARGE = 20000 };
    const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
    float sent[SENT], room[ROOM], freed[ROOM];
    static float large_sent[LARGE], large[LARGE];
    for (int k = 0; k < SENT; k++)
        sent[k] = (float)(10 * rank + k);
    for (int k = 0; k < ROOM; k++)
        room[k] = freed[k] = (float)(100 + k);
    for (int k = 0; k < LARGE; k++)
        large_sent[k] = (float)(rank + k);
    MPI_Request requests[2];
    MPI_CHECK(MPI_Irecv(room, ROOM, MPI_FLOAT, previous, 0, MPI_COMM_WORLD,
                        &requests[0]));
    unsigned int before;
    memcpy(&before, &room[0], sizeof before);
    MPI_CHECK(MPI_Isend(sent, SENT, MPI_FLOAT, next, 0, MPI_COMM_WORLD,
                        &requests[1]));
    MPI_CHECK(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE));
    MPI_CHECK(MPI_Irecv(large, LARGE, MPI_FLOAT, previous, 1, MPI_COMM_WORLD,
                        &requests[0]));
    MPI_CHECK(MPI_Isend(large_sent, LARGE, MPI_FLOAT, next, 1, MPI_COMM_WORLD,
                        &requests[1]));
    MPI_CHECK(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE));
    MPI_CHECK(MPI_Irecv(freed, ROOM, MPI_FLOAT, previous, 2, MPI_COMM_WORLD,
                        &requests[0]));
    MPI_CHECK(MPI_Request_free(&requests[0]));
    MPI_CHECK(MPI_Send(sent, SENT, MPI_FLOAT, next, 2, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    /* One line, in one write: the ranks' lines share the launcher's pipe,
     * and a line written in pieces may be cut by another rank's. */
    char line[512];
    int at = snprintf(line, sizeof line, "staged %d: before %08x after",
                      rank, before);
    for (int k = 0; k < ROOM; k++)
        at += snprintf(line + at, sizeof line - (size_t)at, " %g", room[k]);
    at += snprintf(line + at, sizeof line - (size_t)at, " large %g %g freed",
                   large[0], large[LARGE - 1]);
    for (int k = 0; k < ROOM; k++)
        at += snprintf(line + at, sizeof line - (size_t)at, " %g", freed[k]);
    at += snprintf(line + at, sizeof line - (size_t)at, "\n");
    fflush(stdout);
    if (write(STDOUT_FILENO, line, (size_t)at) != at)
        mpi_abort_exit("ledger_probe: cannot write its line");
}

/* --by-comm: a few calls on three communicators, then the counts by
 * name, printed in one write. */
static void by_comm(int rank)
{
    MPI_Comm pair, unnamed;
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair));
    MPI_CHECK(MPI_Comm_set_name(pair, "pair"));
    MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &unnamed));
    comm_ledger_reset();
    float five[5] = { 1, 2, 3, 4, 5 };
    if (rank == 0) {
        MPI_CHECK(MPI_Send(five, 5, MPI_FLOAT, 1, 0, pair));
        MPI_CHECK(MPI_Recv(five, 5, MPI_FLOAT, 1, 1, pair,
                           MPI_STATUS_IGNORE));
    } else if (rank == 1) {
        MPI_CHECK(MPI_Recv(five, 5, MPI_FLOAT, 0, 0, pair,
                           MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Send(five, 5, MPI_FLOAT, 0, 1, pair));
    }
    double sums[N] = { 0 };
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, N, MPI_DOUBLE, MPI_SUM,
                            MPI_COMM_WORLD));
    MPI_CHECK(MPI_Barrier(unnamed));
    char *text = NULL;
    size_t length = 0;
    FILE *lines = open_memstream(&text, &length);
    if (lines == NULL)
        mpi_abort_exit("ledger_probe: out of memory");
    comm_ledger_write_by_comm(lines);
    fclose(lines);
    char out[1024];
    int at = 0;
    for (char *line = strtok(text, "\n"); line != NULL && at < 900;
         line = strtok(NULL, "\n"))
        at += snprintf(out + at, sizeof out - (size_t)at, "%d: %s\n", rank,
                       line);
    free(text);
    fflush(stdout);
    if (write(STDOUT_FILENO, out, (size_t)at) != at)
        mpi_abort_exit("ledger_probe: cannot write its lines");
    MPI_CHECK(MPI_Comm_free(&pair));
    MPI_CHECK(MPI_Comm_free(&unnamed));
}

/* --shared-handles: two sends whose requests may carry one handle, as
 * MPICH's do when both complete as they start. The first buffer is
 * written after its own wait, before the second's: nothing wrong. */
static void shared_handles(int rank, int size)
{
    const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
    float first[2] = { (float)rank, 1 }, second[2] = { (float)rank, 2 };
    float in[2][2];
    MPI_Request requests[2];
    MPI_CHECK(MPI_Isend(first, 2, MPI_FLOAT, next, 0, MPI_COMM_WORLD,
                        &requests[0]));
    MPI_CHECK(MPI_Isend(second, 2, MPI_FLOAT, next, 1, MPI_COMM_WORLD,
                        &requests[1]));
    for (int tag = 0; tag < 2; tag++)
        MPI_CHECK(MPI_Recv(in[tag], 2, MPI_FLOAT, previous, tag,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    const int same = requests[0] == requests[1];
    MPI_CHECK(MPI_Wait(&requests[0], MPI_STATUS_IGNORE));
    first[1] = -1;
    MPI_CHECK(MPI_Wait(&requests[1], MPI_STATUS_IGNORE));
    printf("shared %d: one handle %d, received %g %g %g %g\n", rank, same,
           in[0][0], in[0][1], in[1][0], in[1][1]);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_init();
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    steps_open(rank);
    bool two = argc == 3 && (strcmp(argv[1], "--open") == 0 ||
                             strcmp(argv[1], "--refuse") == 0 ||
                             strcmp(argv[1], "--frames") == 0);
    bool three = argc == 4 && strcmp(argv[1], "--seconds") == 0 &&
                 atol(argv[2]) > 0;
    if ((argc != 2 && !two && !three) || size != 3) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 3 ledger_probe OUT_DIR|--open "
                    "OUT_DIR|--seconds MS OUT_DIR|--refuse KIND|--frames KIND|"
                    "--aliased|--overlap|--staged|--shared-handles|--by-comm|"
                    "--hang\n");
        mpi_exit_all(2);
    }
    if (three) {
        time_calls(atol(argv[2]), argv[3], rank);
        MPI_CHECK(MPI_Finalize());
        return 0;
    }
    if (strcmp(argv[1], "--aliased") == 0) {
        double sums[N] = { 0 };
        MPI_CHECK(MPI_Allreduce(sums, sums, N, MPI_DOUBLE, MPI_SUM,
                                MPI_COMM_WORLD));
        mpi_exit_all(0);
    }
    if (strcmp(argv[1], "--overlap") == 0) {
        double chunk[N] = { 0 };
        MPI_CHECK(MPI_Sendrecv(chunk, N, MPI_DOUBLE, (rank + 1) % size, 0,
                               chunk + 1, N - 1, MPI_DOUBLE,
                               (rank + size - 1) % size, 0, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        mpi_exit_all(0);
    }
    if (strcmp(argv[1], "--staged") == 0) {
        staged(rank, size);
        mpi_exit_all(0);
    }
    if (strcmp(argv[1], "--by-comm") == 0) {
        by_comm(rank);
        mpi_exit_all(0);
    }
    if (strcmp(argv[1], "--shared-handles") == 0) {
        shared_handles(rank, size);
        mpi_exit_all(0);
    }
    if (strcmp(argv[1], "--hang") == 0) {
        double x;
        steps_enter("probe: waiting forever");
        if (rank == 0)
            MPI_CHECK(MPI_Recv(&x, 1, MPI_DOUBLE, 1, 99, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        mpi_exit_all(0);
    }
    if (strcmp(argv[1], "--refuse") == 0)
        refuse(argv[2], rank);
    if (strcmp(argv[1], "--frames") == 0)
        frames(argv[2]);
    if (strcmp(argv[1], "--open") == 0) {
        /* A message to itself: the send is buffered at once, the receive
         * takes it, and the send's request is never waited for. */
        double out = rank, in = -1;
        MPI_Request forgotten;
        comm_ledger_reset();
        MPI_CHECK(MPI_Isend(&out, 1, MPI_DOUBLE, rank, 4, MPI_COMM_WORLD,
                            &forgotten));
        MPI_CHECK(MPI_Recv(&in, 1, MPI_DOUBLE, rank, 4, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
        write_ledger(argv[2], rank);
        append_open_of(argv[2], rank);
        MPI_CHECK(MPI_Finalize());
        return 0;
    }

    double a[3 * N], b[3 * N];
    int counts[3] = { 1, 2, 3 }, displs[3] = { 0, 1, 3 };
    memset(a, 0, sizeof a);
    comm_ledger_reset();

    /* Point to point: 0 sends N doubles to 1; 1 receives them. */
    if (rank == 0)
        MPI_CHECK(MPI_Send(a, N, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD));
    else if (rank == 1)
        MPI_CHECK(MPI_Recv(b, N, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    /* A ring of Sendrecv, N doubles each way. */
    MPI_CHECK(MPI_Sendrecv(a, N, MPI_DOUBLE, (rank + 1) % 3, 1, b, N,
                           MPI_DOUBLE, (rank + 2) % 3, 1, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    /* And one to itself, which crosses to no other rank: a call, no
     * bytes. */
    MPI_CHECK(MPI_Sendrecv(a, N, MPI_DOUBLE, rank, 2, b, N, MPI_DOUBLE, rank,
                           2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_CHECK(MPI_Bcast(a, N, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allgatherv(a, counts[rank], MPI_DOUBLE, b, counts, displs,
                             MPI_DOUBLE, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Reduce_scatter(a, b, counts, MPI_DOUBLE, MPI_SUM,
                                 MPI_COMM_WORLD));
    MPI_CHECK(MPI_Allreduce(a, b, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Gatherv(a, counts[rank], MPI_DOUBLE, b, counts, displs,
                          MPI_DOUBLE, 2, MPI_COMM_WORLD));
    /* A non-blocking broadcast from rank 1, and one double to each peer. */
    MPI_Request request;
    MPI_CHECK(MPI_Ibcast(a, N, MPI_DOUBLE, 1, MPI_COMM_WORLD, &request));
    MPI_CHECK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    int ones[3] = { 1, 1, 1 }, offsets[3] = { 0, 1, 2 };
    MPI_CHECK(MPI_Alltoallv(a, ones, offsets, MPI_DOUBLE, b, ones, offsets,
                            MPI_DOUBLE, MPI_COMM_WORLD));

    /* A ring of non-blocking messages, N doubles each way, completed by
     * polling with MPI_Testany (which says MPI_UNDEFINED once none is
     * left). */
    MPI_Request pair[2];
    MPI_CHECK(MPI_Irecv(b, N, MPI_DOUBLE, (rank + 2) % 3, 2, MPI_COMM_WORLD,
                        &pair[0]));
    MPI_CHECK(MPI_Isend(a, N, MPI_DOUBLE, (rank + 1) % 3, 2, MPI_COMM_WORLD,
                        &pair[1]));
    for (int done = 0; done < 2;) {
        int index, flag;
        MPI_CHECK(MPI_Testany(2, pair, &index, &flag, MPI_STATUS_IGNORE));
        if (flag && index != MPI_UNDEFINED)
            done++;
    }
    /* A barrier completed by MPI_Waitsome; one double to each peer,
     * completed by polling MPI_Testall. */
    int finished, which[1];
    MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &request));
    MPI_CHECK(MPI_Waitsome(1, &request, &finished, which,
                           MPI_STATUSES_IGNORE));
    MPI_CHECK(MPI_Ialltoall(a, 1, MPI_DOUBLE, b, 1, MPI_DOUBLE,
                            MPI_COMM_WORLD, &request));
    for (int flag = 0; !flag;)
        MPI_CHECK(MPI_Testall(1, &request, &flag, MPI_STATUSES_IGNORE));
    /* A send whose request is released at once; rank 2 receives it. */
    if (rank == 0) {
        MPI_CHECK(MPI_Isend(a, 1, MPI_DOUBLE, 2, 3, MPI_COMM_WORLD,
                            &request));
        MPI_CHECK(MPI_Request_free(&request));
    } else if (rank == 2)
        MPI_CHECK(MPI_Recv(b, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));

    write_ledger(argv[1], rank);
    MPI_CHECK(MPI_Finalize());
    return 0;
}
