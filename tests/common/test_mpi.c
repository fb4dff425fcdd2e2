/* The MPI side of the toolkit: the communication ledger counts what the
 * header promises, and a run that deadlocks is stopped, described and
 * cleaned up after. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

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
 * request it releases. MPI_Testany and MPI_Testall poll, so their number
 * of calls varies. Every request was completed. See common/comm_ledger.h. */
#define COMPLETIONS                                                         \
    { "MPI_Irecv", 1, 0, 96 }, { "MPI_Testany", 0, 0, 0 },                  \
    { "MPI_Ibarrier", 1, 0, 0 }, { "MPI_Waitsome", 1, 0, 0 },               \
    { "MPI_Ialltoall", 1, 16, 16 }, { "MPI_Testall", 0, 0, 0 }
static const expected_line expected[3][24] = {
    { { "MPI_Send", 1, 96, 0 }, { "MPI_Sendrecv", 1, 96, 96 },
      { "MPI_Bcast", 1, 192, 0 }, { "MPI_Allgatherv", 1, 16, 40 },
      { "MPI_Reduce_scatter", 1, 40, 16 }, { "MPI_Allreduce", 1, 128, 128 },
      { "MPI_Gatherv", 1, 8, 0 }, { "MPI_Barrier", 1, 0, 0 },
      { "MPI_Ibcast", 1, 0, 96 }, { "MPI_Wait", 1, 0, 0 },
      { "MPI_Alltoallv", 1, 16, 16 }, { "MPI_Isend", 2, 104, 0 },
      { "MPI_Request_free", 1, 0, 0 }, COMPLETIONS, { NULL, 0, 0, 0 } },
    { { "MPI_Recv", 1, 0, 96 }, { "MPI_Sendrecv", 1, 96, 96 },
      { "MPI_Bcast", 1, 0, 96 }, { "MPI_Allgatherv", 1, 32, 32 },
      { "MPI_Reduce_scatter", 1, 32, 32 }, { "MPI_Allreduce", 1, 128, 128 },
      { "MPI_Gatherv", 1, 16, 0 }, { "MPI_Barrier", 1, 0, 0 },
      { "MPI_Ibcast", 1, 192, 0 }, { "MPI_Wait", 1, 0, 0 },
      { "MPI_Alltoallv", 1, 16, 16 }, { "MPI_Isend", 1, 96, 0 },
      COMPLETIONS, { NULL, 0, 0, 0 } },
    { { "MPI_Sendrecv", 1, 96, 96 }, { "MPI_Bcast", 1, 0, 96 },
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
        snprintf(said, sizeof said, "comm ledger: rank %d: 1 MPI request "
                 "never completed (the oldest started by MPI_Isend)", rank);
        ck_assert_msg(strstr(r.err, said) != NULL, "MPI_Finalize should "
                      "have said \"%s\"; standard error:\n%s", said, r.err);
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
    run_result r = run_probe("--hang", 10);
    ck_assert_msg(r.timed_out, "the hanging probe was not reported as timed "
                  "out: exit %d, stderr %s", r.exit_status, r.err);
    ck_assert_msg(r.where != NULL &&
                  strstr(r.where, "rank 0: probe: waiting forever, inside "
                         "MPI_Recv") != NULL &&
                  strstr(r.where, "rank 1: probe: waiting forever, inside "
                         "MPI_Barrier") != NULL,
                  "where the ranks were: %s", r.where ? r.where : "(none)");
    ck_assert_msg(!probe_still_running(), "a rank of the probe outlived the "
                  "time limit");
    /* mpirun's own time limit ends the ranks and removes their files; the
     * harness only counts what is left in the run's own folder. */
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
    harness_add(suite, "comm ledger: uncountable calls refused",
                ledger_refuses_what_it_cannot_count, 0, 70);
    harness_add(suite, "drivers of lessons 02 and 05: --out checked up front",
                drivers_check_out_up_front, 0, 80);
    harness_add(suite, "train: tiny MNIST files and FIFOs refused",
                train_checks_mnist_files, 0, 50);
    harness_add(suite, "deadlock: each rank's step named, nothing left behind",
                deadlock_is_described_and_cleaned_up, 0, 30);
    harness_add(suite, "killed run: no process or shared-memory file survives",
                killed_run_is_cleaned_up, 0, 30);
    return suite;
}
