/* The MPI side of the toolkit: the communication ledger counts what the
 * header promises, the collectives sum in rank order and move exactly their
 * formulas' bytes, and a run that deadlocks is stopped, described and
 * cleaned up after. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bf16.h"
#include "collectives_values.h"
#include "harness.h"
#include "format_bytes.h"

/* Every probe this test program starts carries this mark in its
 * environment, so that the tests can find their own ranks (and no other
 * run's) among the machine's processes. */
static char probe_mark[64];

static run_result run_probe(const char *arg, double timeout_s)
{
    /* harness_run_mpi runs a build's programs by lesson folder; the probe's
     * folder is tests/common. */
    char *args[] = { (char *)arg, NULL };
    snprintf(probe_mark, sizeof probe_mark, "ZZ_PROBE_MARK=%ld-%ld",
             (long)getpid(), (long)time(NULL));
    char *env[] = { probe_mark, NULL };
    return harness_run_mpi("tests/common", "ledger_probe", 3, args, env,
                           timeout_s);
}

typedef struct {
    const char *call;
    unsigned long long calls, sent, received;  /* calls 0: any number */
} expected_line;

/* 12 doubles = 96 bytes; Allgatherv/Reduce_scatter/Gatherv parts of 1, 2, 3
 * doubles on ranks 0, 1, 2; Bcast from rank 0, Gatherv to rank 2, Ibcast
 * from rank 1; the Allreduce volume is 2(P-1)/P * 96 = 128; Alltoallv and
 * Ialltoall move one double to and from each peer; the Irecv/Isend ring
 * moves 96 bytes each way, and rank 0 sends rank 2 one more double with a
 * request it releases. Each rank's second Sendrecv is to itself: no bytes
 * (nothing crosses to another rank). MPI_Testany and MPI_Testall poll, so
 * their number of calls varies. Every request was completed. See
 * common/comm_ledger.h. */
#define COMPLETIONS                                                         \
    { "MPI_Irecv", 1, 0, 96 }, { "MPI_Testany", 0, 0, 0 },                  \
    { "MPI_Ibarrier", 1, 0, 0 }, { "MPI_Waitsome", 1, 0, 0 },               \
    { "MPI_Ialltoall", 1, 16, 16 }, { "MPI_Testall", 0, 0, 0 }
static const expected_line expected[3][24] = {
    { { "MPI_Send", 1, 96, 0 }, { "MPI_Sendrecv", 2, 96, 96 },
      { "MPI_Bcast", 1, 192, 0 }, { "MPI_Allgatherv", 1, 16, 40 },
      { "MPI_Reduce_scatter", 1, 40, 16 }, { "MPI_Allreduce", 1, 128, 128 },
      { "MPI_Gatherv", 1, 8, 0 }, { "MPI_Barrier", 1, 0, 0 },
      { "MPI_Ibcast", 1, 0, 96 }, { "MPI_Wait", 1, 0, 0 },
      { "MPI_Alltoallv", 1, 16, 16 }, { "MPI_Isend", 2, 104, 0 },
      { "MPI_Request_free", 1, 0, 0 }, COMPLETIONS, { NULL, 0, 0, 0 } },
    { { "MPI_Recv", 1, 0, 96 }, { "MPI_Sendrecv", 2, 96, 96 },
      { "MPI_Bcast", 1, 0, 96 }, { "MPI_Allgatherv", 1, 32, 32 },
      { "MPI_Reduce_scatter", 1, 32, 32 }, { "MPI_Allreduce", 1, 128, 128 },
      { "MPI_Gatherv", 1, 16, 0 }, { "MPI_Barrier", 1, 0, 0 },
      { "MPI_Ibcast", 1, 192, 0 }, { "MPI_Wait", 1, 0, 0 },
      { "MPI_Alltoallv", 1, 16, 16 }, { "MPI_Isend", 1, 96, 0 },
      COMPLETIONS, { NULL, 0, 0, 0 } },
    { { "MPI_Sendrecv", 2, 96, 96 }, { "MPI_Bcast", 1, 0, 96 },
      { "MPI_Allgatherv", 1, 48, 24 }, { "MPI_Reduce_scatter", 1, 24, 48 },
      { "MPI_Allreduce", 1, 128, 128 }, { "MPI_Gatherv", 1, 0, 24 },
      { "MPI_Barrier", 1, 0, 0 }, { "MPI_Ibcast", 1, 0, 96 },
      { "MPI_Wait", 1, 0, 0 }, { "MPI_Alltoallv", 1, 16, 16 },
      { "MPI_Isend", 1, 96, 0 }, { "MPI_Recv", 1, 0, 8 }, COMPLETIONS,
      { NULL, 0, 0, 0 } },
};

/* DIR/rank-RANK.txt, whole, into text (removed afterwards). */
static void read_ledger(const char *dir, int rank, char *text, size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/rank-%d.txt", dir, rank);
    FILE *file = fopen(path, "r");
    ck_assert_msg(file != NULL, "rank %d wrote no ledger", rank);
    size_t length = fread(text, 1, cap - 1, file);
    text[length] = '\0';
    fclose(file);
    unlink(path);
}

START_TEST(ledger_counts_every_call)
{
    char dir[HARNESS_PATH];
    harness_out_dir(dir);
    run_result r = run_probe(dir, 40);
    harness_expect_success(&r, "ledger_probe on 3 ranks");
    for (int rank = 0; rank < 3; rank++) {
        char text[4096];
        read_ledger(dir, rank, text, sizeof text);
        int lines = 0;
        for (const expected_line *e = expected[rank]; e->call; e++, lines++) {
            char line[256];
            if (e->calls == 0) {
                unsigned long long calls = 0, sent = 1, received = 1;
                snprintf(line, sizeof line, "comm %s ", e->call);
                const char *at = strstr(text, line);
                ck_assert_msg(at != NULL && sscanf(at + strlen(line),
                              "%llu %llu %llu", &calls, &sent,
                              &received) == 3 && calls > 0 && sent == 0 &&
                              received == 0, "rank %d: expected \"%s\" "
                              "with some calls and no bytes in its ledger:"
                              "\n%s", rank, e->call, text);
                continue;
            }
            snprintf(line, sizeof line, "comm %s %llu %llu %llu\n", e->call,
                     e->calls, e->sent, e->received);
            ck_assert_msg(strstr(text, line) != NULL, "rank %d: expected "
                          "\"%.*s\" in its ledger:\n%s", rank,
                          (int)strlen(line) - 1, line, text);
        }
        ck_assert_msg(strstr(text, "\nrequests_open 0\n") != NULL, "rank "
                      "%d: every request was completed, by one Wait or Test "
                      "form or another, yet the ledger says:\n%s", rank,
                      text);
        int written = 0;
        for (const char *at = text; (at = strchr(at, '\n')); at++)
            written++;
        ck_assert_msg(written == lines + 1, "rank %d: %d ledger lines, "
                      "expected %d and requests_open:\n%s", rank, written,
                      lines, text);
    }
    rmdir(dir);
    run_result_free(&r);
}
END_TEST

/* A request never completed is written with the ledger, and MPI_Finalize
 * names it on standard error (the run still succeeds: the tests decide). */
START_TEST(ledger_reports_open_requests)
{
    char dir[HARNESS_PATH];
    harness_out_dir(dir);
    char *args[] = { "--open", dir, NULL };
    run_result r = harness_run_mpi("tests/common", "ledger_probe", 3, args,
                                   NULL, 30);
    harness_expect_success(&r, "ledger_probe --open on 3 ranks");
    for (int rank = 0; rank < 3; rank++) {
        char text[4096], said[256];
        read_ledger(dir, rank, text, sizeof text);
        ck_assert_msg(strstr(text, "requests_open 1 MPI_Isend\n") != NULL,
                      "rank %d left one MPI_Isend request open; its ledger "
                      "says:\n%s", rank, text);
        ck_assert_msg(strstr(text, "open_of MPI_Isend 1\nopen_of "
                             "MPI_Iallgatherv 0\nopen_of MPI_Nonesuch 0\n")
                      != NULL, "rank %d: comm_ledger_open_requests_of "
                      "should count its one MPI_Isend, and nothing for a "
                      "call that started none or a name the ledger does "
                      "not know:\n%s", rank, text);
        snprintf(said, sizeof said, "comm ledger: rank %d: 1 MPI request "
                 "never completed (the oldest started by MPI_Isend)", rank);
        ck_assert_msg(strstr(r.err, said) != NULL, "MPI_Finalize should "
                      "have said \"%s\"; standard error:\n%s", said, r.err);
    }
    rmdir(dir);
    run_result_free(&r);
}
END_TEST

/* "seconds NAME S" from a --seconds ledger; fails the test when absent. */
static double seconds_of(const char *text, int rank, const char *name)
{
    char line[96];
    snprintf(line, sizeof line, "seconds %s ", name);
    const char *at = strstr(text, line);
    double seconds = -1;
    ck_assert_msg(at != NULL && sscanf(at + strlen(line), "%lf",
                                       &seconds) == 1,
                  "rank %d: no \"%s\" line:\n%s", rank, line, text);
    return seconds;
}

/* The ledger's clock: the time inside each call, the wait for a late peer
 * included, counted under the call that waited and under no other. Rank 1
 * answers rank 0 PAUSE_MS after rank 0's message reached it; rank 0 had
 * entered MPI_Send before that, so its MPI_Send and MPI_Wait together
 * last at least the pause, less the moments between the two calls, when
 * no MPI call runs. MARGIN_S is those moments' bound: microseconds of
 * code, but on an oversubscribed machine (3 ranks on 2 cores, each
 * polling in MPI) a rank may wait a few time slices for a core there. The
 * same bound says that MPI_Irecv, which returns before rank 1 has even
 * begun its pause, was not counted the wait. */
enum { PAUSE_MS = 250 };
#define MARGIN_S 0.1

START_TEST(ledger_times_calls)
{
    char dir[HARNESS_PATH], pause[16];
    harness_out_dir(dir);
    snprintf(pause, sizeof pause, "%d", PAUSE_MS);
    char *args[] = { "--seconds", pause, dir, NULL };
    run_result r = harness_run_mpi("tests/common", "ledger_probe", 3, args,
                                   NULL, 30);
    harness_expect_success(&r, "ledger_probe --seconds on 3 ranks");
    const double paused = PAUSE_MS / 1e3;
    for (int rank = 0; rank < 3; rank++) {
        char text[4096];
        read_ledger(dir, rank, text, sizeof text);
        double total = seconds_of(text, rank, "total");
        double elapsed = seconds_of(text, rank, "elapsed");
        double irecv = seconds_of(text, rank, "MPI_Irecv");
        double send = seconds_of(text, rank, "MPI_Send");
        double wait = seconds_of(text, rank, "MPI_Wait");
        double recv = seconds_of(text, rank, "MPI_Recv");
        ck_assert_msg(irecv >= 0 && send >= 0 && wait >= 0 && recv >= 0,
                      "rank %d: a negative time:\n%s", rank, text);
        /* The barrier came before the reset; the broadcast never came. */
        ck_assert_msg(seconds_of(text, rank, "MPI_Barrier") == 0 &&
                      seconds_of(text, rank, "MPI_Bcast") == 0, "rank %d: "
                      "seconds for a call not made since the reset:\n%s",
                      rank, text);
        /* Each call's interval lies inside the probe's own, and apart from
         * the others: together no longer than it. The total is their sum
         * (within the printed digits' rounding). */
        ck_assert_msg(total <= elapsed + 1e-9, "rank %d: %.9f s inside MPI, "
                      "in a window of %.9f s:\n%s", rank, total, elapsed,
                      text);
        ck_assert_msg(fabs(total - (irecv + send + wait + recv)) < 1e-8,
                      "rank %d: the total is not the calls' sum:\n%s", rank,
                      text);
        if (rank == 0) {
            ck_assert_msg(send + wait >= paused - MARGIN_S, "rank 0: "
                          "MPI_Send and MPI_Wait took %.6f s together, yet "
                          "rank 1 answered %.3f s after rank 0's message "
                          "had reached it:\n%s", send + wait, paused, text);
            ck_assert_msg(irecv < paused - MARGIN_S, "rank 0: MPI_Irecv "
                          "counted %.6f s: the wait for its message belongs "
                          "to MPI_Wait:\n%s", irecv, text);
        }
        if (rank == 2)
            ck_assert_msg(total == 0, "rank 2 made no call after the reset, "
                          "yet its ledger counts %.9f s:\n%s", total, text);
    }
    rmdir(dir);
    run_result_free(&r);
}
END_TEST

/* What the ledger cannot count ends the run with one line naming it. */
START_TEST(ledger_refuses_what_it_cannot_count)
{
    static const char *const kinds[3][2] = {
        { "persistent", "rank 0 called MPI_Send_init: a persistent request" },
        { "window", "rank 0 called MPI_Win_allocate: one-sided "
                    "communication" },
        { "neighbours", "rank 0 called MPI_Neighbor_allgather: a "
                        "neighbourhood collective" },
    };
    for (int k = 0; k < 3; k++) {
        char *args[] = { "--refuse", (char *)kinds[k][0], NULL };
        run_result r = harness_run_mpi("tests/common", "ledger_probe", 3,
                                       args, NULL, 20);
        ck_assert_msg(!r.timed_out && r.exit_status == 1, "--refuse %s: "
                      "expected exit status 1, got %d%s:\n%s", kinds[k][0],
                      r.exit_status, r.timed_out ? " (timed out)" : "",
                      r.err);
        ck_assert_msg(strstr(r.err, kinds[k][1]) != NULL &&
                      strstr(r.err, "which the communication ledger does "
                             "not count") != NULL, "--refuse %s: expected "
                      "\"%s\", ... in:\n%s", kinds[k][0], kinds[k][1],
                      r.err);
        run_result_free(&r);
    }
}
END_TEST

/* A buffer of a request still open that lies on the stack of a function
 * that has returned stops the run, naming the buffer and the call; a
 * buffer on the stack of a function still running (waited for from a
 * function it calls) is a correct program, and runs to its end. The
 * probe's buffers are all of this toolkit's kind: one thread calls MPI
 * (comm_ledger.c finds that thread's stack). */
START_TEST(ledger_stops_buffers_on_returned_frames)
{
    static const char *const kinds[4][2] = {
        { "live", NULL },
        { "dead", "the receive buffer given to MPI_Irecv lies in the stack "
                  "frame of a function that has returned" },
        { "dead-send", "the send buffer given to MPI_Isend lies in the "
                       "stack frame of a function that has returned" },
        { "dead-waited", "the receive buffer given to MPI_Irecv lies in "
                         "the stack frame of a function that has returned" },
    };
    for (int k = 0; k < 4; k++) {
        char *args[] = { "--frames", (char *)kinds[k][0], NULL };
        run_result r = harness_run_mpi("tests/common", "ledger_probe", 3,
                                       args, NULL, 20);
        if (kinds[k][1] == NULL) {
            harness_expect_success(&r, "ledger_probe --frames live: a "
                                   "stack buffer waited for while its "
                                   "function runs");
        } else {
            ck_assert_msg(!r.timed_out && r.exit_status == 1, "--frames "
                          "%s: expected exit status 1, got %d%s:\n%s",
                          kinds[k][0], r.exit_status,
                          r.timed_out ? " (timed out)" : "", r.err);
            ck_assert_msg(strstr(r.err, kinds[k][1]) != NULL, "--frames "
                          "%s: expected \"%s\" in:\n%s", kinds[k][0],
                          kinds[k][1], r.err);
        }
        run_result_free(&r);
    }
}
END_TEST

/* ledger_probe FLAG on 3 ranks must stop with status 1, its lines holding
 * every one of `wants` (NULL-terminated). */
static void expect_probe_stops(const char *flag, const char *const wants[])
{
    char *args[] = { (char *)flag, NULL };
    run_result r = harness_run_mpi("tests/common", "ledger_probe", 3, args,
                                   NULL, 20);
    ck_assert_msg(!r.timed_out && r.exit_status == 1, "%s: expected exit "
                  "status 1, got %d%s:\n%s", flag, r.exit_status,
                  r.timed_out ? " (timed out)" : "", r.err);
    for (int k = 0; wants[k] != NULL; k++)
        ck_assert_msg(strstr(r.err, wants[k]) != NULL, "%s: expected \"%s\" "
                      "in:\n%s", flag, wants[k], r.err);
    run_result_free(&r);
}

/* MPI refuses one buffer given to a reduction both to send from and to
 * receive into (MPI_ERR_BUFFER, under Open MPI and MPICH alike), in words
 * that do not say why: MPI_CHECK's line says what to pass instead. */
START_TEST(mpi_check_explains_aliased_buffers)
{
    static const char *const wants[] = {
        "MPI_Allreduce(sums, sums, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) "
        "failed", "pass MPI_IN_PLACE as the send buffer", NULL };
    expect_probe_stops("--aliased", wants);
}
END_TEST

/* MPI_Sendrecv's receive buffer overlapping its send buffer: MPI forbids
 * it and does not check; the ledger stops it, naming the call. */
START_TEST(ledger_stops_overlapping_sendrecv)
{
    static const char *const wants[] = {
        "MPI_Sendrecv was given a receive buffer",
        "overlaps its send buffer", NULL };
    expect_probe_stops("--overlap", wants);
}
END_TEST

/* A small MPI_Irecv's buffer holds 0xff in every byte until its request
 * completes (the ledger stages it), so that code reading it early sees
 * NaN whatever the timing; at the completion it holds exactly what MPI
 * delivers: the 5 floats sent, the rest of its 8 as they were. A larger
 * receive, and one whose request is freed, deliver the same. */
START_TEST(ledger_stages_small_receives)
{
    char *args[] = { "--staged", NULL };
    run_result r = harness_run_mpi("tests/common", "ledger_probe", 3, args,
                                   NULL, 20);
    harness_expect_success(&r, "ledger_probe --staged on 3 ranks");
    for (int rank = 0; rank < 3; rank++) {
        const int p = (rank + 2) % 3;
        char want[256];
        snprintf(want, sizeof want, "staged %d: before ffffffff after %d %d "
                 "%d %d %d 105 106 107 large %d %d freed %d %d %d %d %d 105 "
                 "106 107\n", rank, 10 * p, 10 * p + 1, 10 * p + 2,
                 10 * p + 3, 10 * p + 4, p, p + 19999, 10 * p, 10 * p + 1,
                 10 * p + 2, 10 * p + 3, 10 * p + 4);
        ck_assert_msg(strstr(r.out, want) != NULL, "expected \"%.*s\" in "
                      "ledger_probe --staged's output:\n%s",
                      (int)strlen(want) - 1, want, r.out);
    }
    run_result_free(&r);
}
END_TEST

/* Two open requests may carry one handle (MPICH gives every send that
 * completed as it started the same predefined one): the ledger must check
 * each buffer against its own request, so a buffer written after its own
 * wait, while the other request is open, is no error. */
START_TEST(ledger_tells_shared_handles_apart)
{
    char *args[] = { "--shared-handles", NULL };
    run_result r = harness_run_mpi("tests/common", "ledger_probe", 3, args,
                                   NULL, 20);
    harness_expect_success(&r, "ledger_probe --shared-handles on 3 ranks");
    for (int rank = 0; rank < 3; rank++) {
        const int p = (rank + 2) % 3;
        char want[128];
        snprintf(want, sizeof want, "shared %d: one handle ", rank);
        const char *line = strstr(r.out, want);
        ck_assert_msg(line != NULL, "expected \"%s\" in ledger_probe "
                      "--shared-handles' output:\n%s", want, r.out);
        snprintf(want, sizeof want, ", received %d 1 %d 2\n", p, p);
        ck_assert_msg(strncmp(strchr(line, ','), want, strlen(want)) == 0,
                      "expected \"%.*s\" in ledger_probe --shared-handles' "
                      "output:\n%s", (int)strlen(want) - 1, want, r.out);
    }
    run_result_free(&r);
}
END_TEST

/* The counts by communicator name: each call under the name its
 * communicator had, whatever else runs. Sizes from the calls' definitions:
 * 5 floats a message (20 bytes); an allreduce of 12 doubles on 3 ranks
 * counted as a ring's 2 (P - 1) / P of its 96 bytes each way, 128. */
START_TEST(ledger_counts_by_communicator)
{
    char *args[] = { "--by-comm", NULL };
    run_result r = harness_run_mpi("tests/common", "ledger_probe", 3, args,
                                   NULL, 20);
    harness_expect_success(&r, "ledger_probe --by-comm on 3 ranks");
    static const char *const wants[] = {
        "0: comm_on pair 2 1 20 20\n", "1: comm_on pair 2 1 20 20\n",
        "0: comm_on MPI_COMM_WORLD 1 0 128 128\n",
        "1: comm_on MPI_COMM_WORLD 1 0 128 128\n",
        "2: comm_on MPI_COMM_WORLD 1 0 128 128\n",
        "0: comm_on (unnamed) 1 0 0 0\n", "1: comm_on (unnamed) 1 0 0 0\n",
        "2: comm_on (unnamed) 1 0 0 0\n",
    };
    for (size_t k = 0; k < sizeof wants / sizeof wants[0]; k++)
        ck_assert_msg(strstr(r.out, wants[k]) != NULL, "expected \"%.*s\" "
                      "in ledger_probe --by-comm's output:\n%s",
                      (int)strlen(wants[k]) - 1, wants[k], r.out);
    /* Rank 2 made no call on "pair": no line for it. */
    ck_assert_msg(strstr(r.out, "2: comm_on pair") == NULL, "rank 2 made no "
                  "call on \"pair\", yet has a line for it:\n%s", r.out);
    run_result_free(&r);
}
END_TEST

/* ---- the collectives (common/collectives.h), on 1 to 4 ranks ---- */

/* A buffer not divisible by 2, 3 or 4, each rank's block several chunks
 * long, in layers that cross the blocks' edges, some smaller than P. */
enum { COLL_TOTAL = 100003 };
static const uint64_t coll_seed = 6;
static const char *const coll_layers = "3,1,2,30000,8193,1,20000,41803";
static const size_t coll_layer_sizes[] = { 3, 1, 2, 30000, 8193, 1, 20000,
                                           41803 };

/* Rank r's block of the balanced partition, computed here from its
 * definition (the first total % P blocks one longer), not by partition.h. */
static size_t coll_begin(int P, int r)
{
    size_t q = COLL_TOTAL / (size_t)P, extra = COLL_TOTAL % (size_t)P;
    return (size_t)r * q + ((size_t)r < extra ? (size_t)r : extra);
}

/* How many elements of [offset, offset + count) rank r owns. */
static size_t coll_owned_in(int P, int r, size_t offset, size_t count)
{
    size_t first = coll_begin(P, r), last = coll_begin(P, r + 1);
    first = first > offset ? first : offset;
    last = last < offset + count ? last : offset + count;
    return last > first ? last - first : 0;
}

/* The first element where `got` differs bitwise from `expected` (elements
 * of 2 or 4 bytes), named by its index in the flat buffer. */
static void coll_expect_bits(int P, int rank, const char *what,
                             const void *want, const void *got,
                             size_t count, size_t size, size_t first_index)
{
    for (size_t k = 0; k < count; k++) {
        uint32_t e = 0, g = 0;
        memcpy(&e, (const char *)want + k * size, size);
        memcpy(&g, (const char *)got + k * size, size);
        if (e == g)
            continue;
        float ef, gf;
        memcpy(&ef, &e, sizeof ef);
        memcpy(&gf, &g, sizeof gf);
        ck_abort_msg("P = %d, rank %d, %s: element %zu is 0x%0*x%s%.9g%s, "
                     "expected 0x%0*x%s%.9g%s", P, rank, what,
                     first_index + k, (int)(2 * size), g,
                     size == 4 ? " (" : "", size == 4 ? gf : 0.0,
                     size == 4 ? ")" : "", (int)(2 * size), e,
                     size == 4 ? " (" : "", size == 4 ? ef : 0.0,
                     size == 4 ? ")" : "");
    }
}

static void coll_expect_traffic(int P, int rank, const char *report,
                                const char *name, unsigned long long sent,
                                unsigned long long received)
{
    unsigned long long got[2] = { 0, 0 };
    char key[64];
    snprintf(key, sizeof key, "traffic %s", name);
    ck_assert_msg(harness_report_values(report, key, got, 2) == 2, "P = %d, "
                  "rank %d: no \"%s\" line in its report:\n%s", P, rank, key,
                  report);
    ck_assert_msg(got[0] == sent && got[1] == received, "P = %d, rank %d, "
                  "%s: sent %llu bytes and received %llu, the formula says "
                  "%llu and %llu (collectives.h)", P, rank, name, got[0],
                  got[1], sent, received);
}

/* The rest of the report's line that starts with KEY and a space. */
static const char *coll_line(const char *report, const char *key,
                             char *line, size_t len)
{
    size_t key_len = strlen(key);
    for (const char *at = report; at != NULL && *at;
         at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL)
        if (strncmp(at, key, key_len) == 0 && at[key_len] == ' ') {
            const char *stop = strchr(at, '\n');
            size_t n = stop ? (size_t)(stop - at) - key_len - 1
                            : strlen(at) - key_len - 1;
            snprintf(line, len, "%.*s", (int)n, at + key_len + 1);
            return line;
        }
    ck_abort_msg("no \"%s\" line in the report:\n%s", key, report);
    return NULL;
}

/* Case _i runs the probe on P = _i + 1 ranks and checks every rank's
 * results bitwise against sums this test adds itself, in rank order, and
 * its traffic against the formulas, byte for byte. */
START_TEST(collectives_exact_on_p_ranks)
{
    const int P = _i + 1;
    const size_t total = COLL_TOTAL;
    /* A range shorter than P across the edge between ranks 0 and 1 (on 1
     * rank, an empty one). */
    const size_t small_offset = P > 1 ? coll_begin(P, 1) - 1 : 5;
    const size_t small_count = (size_t)P - 1;
    /* One byte short of the contributions (the only bytes the probe holds
     * on the ledger) and the receive buffers: (P-1) chunks of fp32. */
    const size_t chunk = 8192;
    const size_t cap = 4 * total + (P > 1 ? 4 * (size_t)(P - 1) * chunk - 1
                                          : 0);

    float *sums = malloc(total * sizeof *sums);
    ck_assert(sums != NULL);
    size_t order_matters = 0;
    for (size_t i = 0; i < total; i++) {
        float sum = collectives_contribution(coll_seed, 0, i);
        for (int r = 1; r < P; r++)
            sum += collectives_contribution(coll_seed, r, i);
        sums[i] = sum;
        float backwards = collectives_contribution(coll_seed, P - 1, i);
        for (int r = P - 2; r >= 0; r--)
            backwards += collectives_contribution(coll_seed, r, i);
        order_matters += memcmp(&sum, &backwards, sizeof sum) != 0;
    }
    /* Else a reduce-scatter that adds in another order would pass. */
    ck_assert_msg(P < 3 || order_matters > total / 100, "P = %d: the test's "
                  "values give the same sums in reverse order in all but %zu "
                  "elements", P, order_matters);
    /* The bf16 form: the contributions rounded to bf16, added widened in
     * rank order in fp32, the sum rounded once. Adding in bf16 (rounding
     * every partial sum) must give other bits, or it would pass too. */
    uint16_t *sums16 = malloc(total * sizeof *sums16);
    ck_assert(sums16 != NULL);
    size_t rounding_matters = 0;
    for (size_t i = 0; i < total; i++) {
        float sum = bf16_to_float(bf16_from_float(
            collectives_contribution(coll_seed, 0, i)));
        bf16 in_bf16 = bf16_from_float(sum);
        for (int r = 1; r < P; r++) {
            float term = bf16_to_float(bf16_from_float(
                collectives_contribution(coll_seed, r, i)));
            sum += term;
            in_bf16 = bf16_from_float(bf16_to_float(in_bf16) + term);
        }
        sums16[i] = bf16_from_float(sum);
        rounding_matters += sums16[i] != in_bf16;
    }
    ck_assert_msg(P < 3 || rounding_matters > total / 100, "P = %d: the "
                  "test's values give the same bf16 sums rounded at every "
                  "addition in all but %zu elements", P, rounding_matters);

    char dir[HARNESS_PATH], numbers[5][32];
    harness_out_dir(dir);
    snprintf(numbers[0], sizeof numbers[0], "%zu", total);
    snprintf(numbers[1], sizeof numbers[1], "%llu",
             (unsigned long long)coll_seed);
    snprintf(numbers[2], sizeof numbers[2], "%zu", small_offset);
    snprintf(numbers[3], sizeof numbers[3], "%zu", small_count);
    snprintf(numbers[4], sizeof numbers[4], "%zu", cap);
    char *args[] = { dir, numbers[0], numbers[1], (char *)coll_layers,
                     numbers[2], numbers[3], numbers[4], NULL };
    run_result r = harness_run_mpi("tests/common", "collectives_probe", P,
                                   args, NULL, 50);
    char what[64];
    snprintf(what, sizeof what, "collectives_probe on %d ranks", P);
    harness_expect_success(&r, what);

    float *got = malloc((total + 2) * sizeof *got);
    uint16_t *expected16 = malloc((total + 2) * sizeof *expected16);
    float *expected32 = malloc(total * sizeof *expected32);
    ck_assert(got != NULL && expected16 != NULL && expected32 != NULL);
    for (size_t i = 0; i < total; i++)
        expected32[i] = collectives_f32(coll_seed, i);
    for (int rank = 0; rank < P; rank++) {
        const size_t begin = coll_begin(P, rank);
        const size_t owned = coll_begin(P, rank + 1) - begin;
        char name[64];

        /* Sums: the whole, layer by layer, in place, a small range. */
        const char *const whole[] = { "rs_whole", "rs_layers", "rs_inplace" };
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%s-%d", whole[k], rank);
            harness_read_output(dir, name, got, sizeof(float), owned);
            coll_expect_bits(P, rank, whole[k], sums + begin, got, owned, 4,
                             begin);
        }
        const char *const whole16[] = { "rs16_whole", "rs16_layers",
                                        "rs16_inplace" };
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "%s-%d", whole16[k], rank);
            harness_read_output(dir, name, got, 2, owned);
            coll_expect_bits(P, rank, whole16[k], sums16 + begin, got, owned,
                             2, begin);
        }
        snprintf(name, sizeof name, "rs_small-%d", rank);
        harness_read_output(dir, name, got, sizeof(float), owned);
        for (size_t k = 0; k < owned; k++) {
            size_t i = begin + k;
            uint32_t guard = COLLECTIVES_GUARD32;
            float want;
            if (i >= small_offset && i < small_offset + small_count)
                want = sums[i];
            else
                memcpy(&want, &guard, sizeof want);
            coll_expect_bits(P, rank, "rs_small (outside the range: left "
                             "alone)", &want, &got[k], 1, 4, i);
        }

        /* Gathers: the whole (guards either side), by layer, in place, a
         * small range, fp32. */
        expected16[0] = expected16[total + 1] = COLLECTIVES_GUARD16;
        for (size_t i = 0; i < total; i++)
            expected16[i + 1] = collectives_bf16(coll_seed, i);
        uint16_t *got16 = (uint16_t *)got;
        snprintf(name, sizeof name, "ag16_whole-%d", rank);
        harness_read_output(dir, name, got16, 2, total + 2);
        coll_expect_bits(P, rank, "ag16_whole (0 and TOTAL + 1: guards)",
                         expected16, got16, total + 2, 2, 0);
        const char *const layered[] = { "ag16_layers", "ag16_inplace" };
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "%s-%d", layered[k], rank);
            harness_read_output(dir, name, got16, 2, total);
            coll_expect_bits(P, rank, layered[k], expected16 + 1, got16,
                             total, 2, 0);
        }
        snprintf(name, sizeof name, "ag16_small-%d", rank);
        harness_read_output(dir, name, got16, 2, small_count + 2);
        expected16[small_offset] = COLLECTIVES_GUARD16;
        expected16[small_offset + small_count + 1] = COLLECTIVES_GUARD16;
        coll_expect_bits(P, rank, "ag16_small (first and last: guards)",
                         expected16 + small_offset, got16, small_count + 2, 2,
                         small_offset);
        snprintf(name, sizeof name, "ag32_whole-%d", rank);
        harness_read_output(dir, name, got, sizeof(float), total);
        coll_expect_bits(P, rank, "ag32_whole", expected32, got, total, 4, 0);

        /* Traffic, in bytes: a reduce-scatter sends each peer its part of
         * the range and receives this rank's part from each; an allgather
         * the other way round. */
        char *report = harness_read_report(dir, rank);
        unsigned long long rs_sent = 0, rs_received = 0;
        for (size_t l = 0, at = 0;
             l < sizeof coll_layer_sizes / sizeof *coll_layer_sizes;
             at += coll_layer_sizes[l], l++) {
            size_t mine = coll_owned_in(P, rank, at, coll_layer_sizes[l]);
            rs_sent += coll_layer_sizes[l] - mine;
            rs_received += (unsigned long long)(P - 1) * mine;
        }
        ck_assert_msg(rs_sent == total - owned, "the layers cover the buffer");
        size_t small_mine = coll_owned_in(P, rank, small_offset, small_count);
        coll_expect_traffic(P, rank, report, "rs_whole", 4 * (total - owned),
                            4ull * (unsigned long long)(P - 1) * owned);
        coll_expect_traffic(P, rank, report, "rs_layers", 4 * rs_sent,
                            4 * rs_received);
        /* bf16 contributions travel as fp32: the same bytes. */
        coll_expect_traffic(P, rank, report, "rs16_whole",
                            4 * (total - owned),
                            4ull * (unsigned long long)(P - 1) * owned);
        coll_expect_traffic(P, rank, report, "rs16_layers", 4 * rs_sent,
                            4 * rs_received);
        coll_expect_traffic(P, rank, report, "rs_small",
                            4 * (small_count - small_mine),
                            4ull * (unsigned long long)(P - 1) * small_mine);
        coll_expect_traffic(P, rank, report, "ag16_whole",
                            2ull * (unsigned long long)(P - 1) * owned,
                            2 * (total - owned));
        coll_expect_traffic(P, rank, report, "ag16_layers",
                            2ull * (unsigned long long)(P - 1) * owned,
                            2 * (total - owned));
        coll_expect_traffic(P, rank, report, "ag16_small",
                            2ull * (unsigned long long)(P - 1) * small_mine,
                            2 * (small_count - small_mine));
        coll_expect_traffic(P, rank, report, "ag32_whole",
                            4ull * (unsigned long long)(P - 1) * owned,
                            4 * (total - owned));

        /* The receive buffers: (P-1) chunks at the most, on the ledger as
         * "comm", all freed; chunks smaller than a block, so that the
         * rounds were exercised. The bf16 form adds (P-1) send slots of a
         * chunk (every part here is longer than one). */
        unsigned long long values[2] = { 0, 0 };
        ck_assert(harness_report_values(report, "chunk", values, 1) == 1);
        ck_assert_msg(values[0] == chunk, "COLLECTIVES_CHUNK_ELEMENTS is "
                      "%llu: this test's cap and buffer sizes assume %zu",
                      values[0], chunk);
        ck_assert_msg(owned > chunk, "the test's blocks must span chunks");
        ck_assert(harness_report_values(report, "comm_peak_f32", values, 1)
                  == 1);
        ck_assert_msg(values[0] == 4ull * (unsigned long long)(P - 1) * chunk,
                      "P = %d, rank %d: the fp32 reduce-scatters' "
                      "communication buffers held %llu bytes at the most; "
                      "expected (P-1) chunks of fp32, %llu", P, rank,
                      values[0], 4ull * (unsigned long long)(P - 1) * chunk);
        ck_assert(harness_report_values(report, "memory comm", values, 2)
                  == 2);
        ck_assert_msg(values[0] == 0 && values[1] ==
                      8ull * (unsigned long long)(P - 1) * chunk, "P = %d, "
                      "rank %d: communication buffers held %llu bytes at the "
                      "end and %llu at the most; expected 0 and (P-1) chunks "
                      "of fp32 received and (P-1) sent, %llu", P, rank,
                      values[0], values[1],
                      8ull * (unsigned long long)(P - 1) * chunk);
        ck_assert(harness_report_values(report, "requests_open", values, 1)
                  == 1 && values[0] == 0);

        /* Refusals: one byte short of the cap, every rank alike (on one
         * rank no buffer is needed), and a range past the end. */
        char line[512], said[512];
        coll_line(report, "capped", line, sizeof line);
        if (P == 1)
            ck_assert_msg(strcmp(line, "0") == 0, "P = 1: no buffer is "
                          "needed, yet: %s", line);
        else {
            /* Held when the cap is tried: the probe's 4 * TOTAL bytes of
             * gradients; free: the cap less those, one byte short. */
            char asked[32], free_bytes[32], limit[32];
            format_bytes(4.0 * (double)(P - 1) * (double)chunk, asked,
                         sizeof asked);
            format_bytes((double)(cap - 4 * total), free_bytes,
                         sizeof free_bytes);
            format_bytes((double)cap, limit, sizeof limit);
            snprintf(said, sizeof said, "-1 "
                     "reduce-scatter: rank %d: device out of memory: asked "
                     "%s for communication buffers, free %s of %s", rank,
                     asked, free_bytes, limit);
            ck_assert_msg(strcmp(line, said) == 0, "P = %d, rank "
                          "%d under the cap said\n  %s\nexpected\n  %s", P,
                          rank, line, said);
        }
        coll_line(report, "badrange", line, sizeof line);
        snprintf(said, sizeof said, "-1 reduce-scatter: "
                 "rank %d: the range [%zu, %zu + 1) is not inside the buffer "
                 "of %zu elements", rank, total, total, total);
        ck_assert_msg(strcmp(line, said) == 0, "P = %d, rank %d: "
                      "a range past the end said\n  %s\nexpected\n  %s", P,
                      rank, line, said);
        free(report);
    }
    free(got);
    free(expected16);
    free(expected32);
    free(sums);
    free(sums16);
    harness_remove_out_dir(dir);
    run_result_free(&r);
}
END_TEST

/* ---- the drivers of lessons 02 and 05: bad input found up front ---- */

/* An MNIST pair of `count` samples of 2 x 2 pixels in DIR. */
static void write_mnist(const char *dir, uint32_t count, char *images,
                        char *labels, size_t len)
{
    unsigned char bytes[16 + 4 * 16] = { 0 };
    snprintf(images, len, "%s/images", dir);
    snprintf(labels, len, "%s/labels", dir);
    const uint32_t header[4] = { 0x803, count, 2, 2 };
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 4; b++)
            bytes[4 * k + b] = (unsigned char)(header[k] >> (24 - 8 * b));
    FILE *file = fopen(images, "wb");
    ck_assert(file != NULL &&
              fwrite(bytes, 1, 16 + 4 * count, file) == 16 + 4 * count &&
              fclose(file) == 0);
    bytes[3] = 0x01;
    for (int b = 0; b < 4; b++)
        bytes[4 + b] = (unsigned char)(count >> (24 - 8 * b));
    memset(bytes + 8, 3, count);
    file = fopen(labels, "wb");
    ck_assert(file != NULL && fwrite(bytes, 1, 8 + count, file) == 8 + count &&
              fclose(file) == 0);
}

/* Every rank ends with status 2 and rank 0 alone says `says`, before any
 * work: the driver's first line of output (its banner, or its result)
 * never appears. */
static void expect_refused(const char *lesson, const char *program,
                           char *const args[], const char *says,
                           const char *never)
{
    run_result r = harness_run_mpi(lesson, program, 2, args, NULL, 30);
    ck_assert_msg(!r.timed_out && r.signal == 0, "%s (%s): hung or crashed; "
                  "where: %s", program, says, r.where ? r.where : "?");
    ck_assert_msg(r.exit_status == 2, "%s: exit status %d, expected 2 and "
                  "\"%s\":\n%s", program, r.exit_status, says, r.err);
    ck_assert_msg(harness_occurrences(r.err, says) == 1, "%s: expected \"%s\" once, "
                  "from rank 0:\n%s", program, says, r.err);
    ck_assert_msg(strstr(r.out, never) == NULL, "%s refused its input only "
                  "after the work (it printed \"%s\"):\n%s", program, never,
                  r.out);
    run_result_free(&r);
}

START_TEST(drivers_check_out_up_front)
{
    char dir[HARNESS_PATH], file[HARNESS_PATH + 16], says[HARNESS_PATH + 96];
    harness_out_dir(dir);
    snprintf(file, sizeof file, "%s/a-file", dir);
    FILE *made = fopen(file, "w");
    ck_assert(made != NULL && fclose(made) == 0);
    const char *missing = "/nonexistent/folder";
    {
        char *args[] = { "--m", "64", "--n", "64", "--out", file, NULL };
        snprintf(says, sizeof says, "matvec_mpi: --out: cannot write to "
                 "'%s': Not a directory", file);
        expect_refused("02-mpi-matvec", "matvec_mpi", args, says,
                       "matvec_mpi: y = Ax");
    }
    {
        char *args[] = { "--out", "/proc/self", NULL };
        expect_refused("02-mpi-matvec", "matvec_mpi", args,
                       "matvec_mpi: --out: cannot write to '/proc/self'",
                       "matvec_mpi: y = Ax");
    }
    {
        char *args[] = { "--steps", "5", "--out", (char *)missing, NULL };
        expect_refused("05-data-parallel", "train", args,
                       "train: --out: cannot write to '/nonexistent/folder': "
                       "No such file or directory", "train: ");
    }
    {
        char *args[] = { "--out", file, NULL };
        snprintf(says, sizeof says, "ring_check: --out: cannot write to "
                 "'%s': Not a directory", file);
        expect_refused("05-data-parallel", "ring_check", args, says,
                       "ring_check: ");
    }
    unlink(file);
    rmdir(dir);
}
END_TEST

/* MNIST files too small to hold out a sixth, and a FIFO where a file
 * belongs (which would block the reader for ever), are refused. */
START_TEST(train_checks_mnist_files)
{
    char dir[HARNESS_PATH], images[HARNESS_PATH + 16];
    char labels[HARNESS_PATH + 16];
    char images_flag[HARNESS_PATH + 32], labels_flag[HARNESS_PATH + 32];
    harness_out_dir(dir);
    write_mnist(dir, 5, images, labels, sizeof images);
    snprintf(images_flag, sizeof images_flag, "--mnist-images=%s", images);
    snprintf(labels_flag, sizeof labels_flag, "--mnist-labels=%s", labels);
    char *args[] = { images_flag, labels_flag, "--steps", "2", NULL };
    expect_refused("05-data-parallel", "train", args, "train: the MNIST "
                   "files hold 5 samples: too few", "held-out accuracy");
    unlink(images);
    ck_assert(mkfifo(images, 0600) == 0);
    char says[HARNESS_PATH + 64];
    snprintf(says, sizeof says, "train: images file '%s' is a FIFO", images);
    expect_refused("05-data-parallel", "train", args, says,
                   "held-out accuracy");
    unlink(images);
    unlink(labels);
    rmdir(dir);
}
END_TEST

/* Any process whose program (argv[0], the first NUL-terminated word of
 * /proc/PID/cmdline) is the probe: a rank that outlived its run. */
/* Whether a process started by the last run_probe is still running: one
 * whose environment holds its mark. */
static bool probe_still_running(void)
{
    DIR *proc = opendir("/proc");
    struct dirent *entry;
    bool found = false;
    while (!found && proc != NULL && (entry = readdir(proc)) != NULL) {
        char path[300], environment[65536];
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/environ", entry->d_name);
        FILE *file = fopen(path, "r");
        if (file == NULL)
            continue;
        size_t length = fread(environment, 1, sizeof environment - 1, file);
        fclose(file);
        for (size_t at = 0; at < length && !found;
             at += strnlen(environment + at, length - at) + 1)
            found = strncmp(environment + at, probe_mark,
                            strlen(probe_mark)) == 0 &&
                    environment[at + strlen(probe_mark)] == '\0';
    }
    if (proc != NULL)
        closedir(proc);
    return found;
}

START_TEST(deadlock_is_described_and_cleaned_up)
{
    run_result r = run_probe("--hang", 30);
    ck_assert_msg(r.timed_out, "the hanging probe was not reported as timed "
                  "out: exit %d, stderr %s", r.exit_status, r.err);
    /* Every rank inside an MPI call, none moving on: stopped as a
     * deadlock, not at the time limit (mpirun's own is 27 s). */
    ck_assert_msg(r.stalled_s > 0, "the hanging probe (every rank inside an "
                  "MPI call) was not stopped as a deadlock but at the time "
                  "limit, after %.1f s", r.seconds);
    ck_assert_msg(r.where != NULL &&
                  strstr(r.where, "rank 0: probe: waiting forever, inside "
                         "MPI_Recv") != NULL &&
                  strstr(r.where, "rank 1: probe: waiting forever, inside "
                         "MPI_Barrier") != NULL,
                  "where the ranks were: %s", r.where ? r.where : "(none)");
    ck_assert_msg(!probe_still_running(), "a rank of the probe outlived the "
                  "time limit");
    /* The harness's stop ends mpirun, which ends the ranks and removes
     * their files; the harness only counts what is left in the run's own
     * folder. */
    ck_assert_msg(r.leftovers == 0, "the stopped run left %d shared-memory "
                  "files behind", r.leftovers);
    run_result_free(&r);
}
END_TEST

/* Without mpirun's time limit (as with a launcher that has none), the
 * harness kills the whole session itself: nothing may survive. The ranks'
 * shared-memory files went to the run's own folder, which the harness
 * removes; none may appear in /dev/shm, where they would go by default.
 * (Files of another job running at the same time come and go there: only
 * a new file still present two seconds later, that no process maps and
 * no other user owns, counts.) */
START_TEST(killed_run_is_cleaned_up)
{
    char **before;
    size_t before_count = harness_mpi_segments(&before);
    setenv("ZZ_MPIRUN_TIMEOUT_FLAG", "", 1);
    run_result r = run_probe("--hang", 6);
    ck_assert_msg(r.timed_out, "the hanging probe was not reported as timed "
                  "out: exit %d, stderr %s", r.exit_status, r.err);
    ck_assert_msg(!probe_still_running(), "a rank of the probe outlived the "
                  "kill");
    char **after;
    size_t after_count = harness_mpi_segments(&after);
    for (size_t k = 0; k < after_count; k++) {
        bool old = false;
        for (size_t j = 0; j < before_count; j++)
            old = old || strcmp(after[k], before[j]) == 0;
        if (old)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "/dev/shm/%s", after[k]);
        sleep(2);
        ck_assert_msg(access(path, F_OK) != 0 ||
                      harness_segment_in_use(after[k]), "shared-memory file "
                      "%s left behind", path);
    }
    harness_free_names(before, before_count);
    harness_free_names(after, after_count);
    run_result_free(&r);
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("mpi");
    harness_add(suite, "comm ledger: every call counted as documented",
                ledger_counts_every_call, 0, 45);
    harness_add(suite, "comm ledger: requests never completed reported",
                ledger_reports_open_requests, 0, 40);
    harness_add(suite, "comm ledger: seconds inside each call, a late "
                "peer's wait under the call that waited",
                ledger_times_calls, 0, 40);
    harness_add(suite, "comm ledger: uncountable calls refused",
                ledger_refuses_what_it_cannot_count, 0, 70);
    harness_add(suite, "comm ledger: buffers of open requests on returned "
                "frames stopped, on live ones kept",
                ledger_stops_buffers_on_returned_frames, 0, 90);
    harness_add(suite, "MPI_CHECK: an aliased reduction's failure says "
                "to pass MPI_IN_PLACE", mpi_check_explains_aliased_buffers,
                0, 30);
    harness_add(suite, "comm ledger: the counts by communicator name",
                ledger_counts_by_communicator, 0, 30);
    harness_add(suite, "comm ledger: two requests that share a handle, "
                "each checked against its own buffer",
                ledger_tells_shared_handles_apart, 0, 30);
    harness_add(suite, "comm ledger: a send-receive's overlapping buffers "
                "stopped", ledger_stops_overlapping_sendrecv, 0, 30);
    harness_add(suite, "comm ledger: a small MPI_Irecv's buffer holds NaN "
                "until its completion, then exactly what MPI delivers",
                ledger_stages_small_receives, 0, 30);
    for (int ranks = 1; ranks <= 4; ranks++) {
        static char names[4][96];
        snprintf(names[ranks - 1], sizeof names[ranks - 1], "collectives: "
                 "rank-order sums (fp32, bf16), gathers, exact traffic on "
                 "%d rank%s", ranks, ranks > 1 ? "s" : "");
        harness_add(suite, names[ranks - 1], collectives_exact_on_p_ranks,
                    ranks - 1, 70);
    }
    harness_add(suite, "drivers of lessons 02 and 05: --out checked up front",
                drivers_check_out_up_front, 0, 80);
    harness_add(suite, "train: tiny MNIST files and FIFOs refused",
                train_checks_mnist_files, 0, 50);
    harness_add(suite, "deadlock: each rank's step named, nothing left behind",
                deadlock_is_described_and_cleaned_up, 0, 40);
    harness_add(suite, "killed run: no process or shared-memory file survives",
                killed_run_is_cleaned_up, 0, 30);
    return suite;
}
