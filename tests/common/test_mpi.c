/* The MPI side of the toolkit: the communication ledger counts what the
 * header promises, and a run that deadlocks is stopped, described and
 * cleaned up after. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static run_result run_probe(const char *arg, double timeout_s)
{
    /* harness_run_mpi runs a build's programs by lesson folder; the probe's
     * folder is tests/common. */
    char *args[] = { (char *)arg, NULL };
    return harness_run_mpi("tests/common", "ledger_probe", 3, args, NULL,
                           timeout_s);
}

typedef struct {
    const char *call;
    unsigned long long calls, sent, received;
} expected_line;

/* 12 doubles = 96 bytes; Allgatherv/Reduce_scatter/Gatherv parts of 1, 2, 3
 * doubles on ranks 0, 1, 2; Bcast from rank 0, Gatherv to rank 2, Ibcast
 * from rank 1; the Allreduce volume is 2(P-1)/P * 96 = 128; Alltoallv moves
 * one double to and from each peer. See common/comm_ledger.h. */
static const expected_line expected[3][12] = {
    { { "MPI_Send", 1, 96, 0 }, { "MPI_Sendrecv", 1, 96, 96 },
      { "MPI_Bcast", 1, 192, 0 }, { "MPI_Allgatherv", 1, 16, 40 },
      { "MPI_Reduce_scatter", 1, 40, 16 }, { "MPI_Allreduce", 1, 128, 128 },
      { "MPI_Gatherv", 1, 8, 0 }, { "MPI_Barrier", 1, 0, 0 },
      { "MPI_Ibcast", 1, 0, 96 }, { "MPI_Wait", 1, 0, 0 },
      { "MPI_Alltoallv", 1, 16, 16 }, { NULL } },
    { { "MPI_Recv", 1, 0, 96 }, { "MPI_Sendrecv", 1, 96, 96 },
      { "MPI_Bcast", 1, 0, 96 }, { "MPI_Allgatherv", 1, 32, 32 },
      { "MPI_Reduce_scatter", 1, 32, 32 }, { "MPI_Allreduce", 1, 128, 128 },
      { "MPI_Gatherv", 1, 16, 0 }, { "MPI_Barrier", 1, 0, 0 },
      { "MPI_Ibcast", 1, 192, 0 }, { "MPI_Wait", 1, 0, 0 },
      { "MPI_Alltoallv", 1, 16, 16 }, { NULL } },
    { { "MPI_Sendrecv", 1, 96, 96 }, { "MPI_Bcast", 1, 0, 96 },
      { "MPI_Allgatherv", 1, 48, 24 }, { "MPI_Reduce_scatter", 1, 24, 48 },
      { "MPI_Allreduce", 1, 128, 128 }, { "MPI_Gatherv", 1, 0, 24 },
      { "MPI_Barrier", 1, 0, 0 }, { "MPI_Ibcast", 1, 0, 96 },
      { "MPI_Wait", 1, 0, 0 }, { "MPI_Alltoallv", 1, 16, 16 }, { NULL } },
};

START_TEST(ledger_counts_every_call)
{
    char dir[HARNESS_PATH];
    harness_out_dir(dir);
    run_result r = run_probe(dir, 40);
    harness_expect_success(&r, "ledger_probe on 3 ranks");
    for (int rank = 0; rank < 3; rank++) {
        char path[4096], text[4096];
        snprintf(path, sizeof path, "%s/rank-%d.txt", dir, rank);
        FILE *file = fopen(path, "r");
        ck_assert_msg(file != NULL, "rank %d wrote no ledger", rank);
        size_t length = fread(text, 1, sizeof text - 1, file);
        text[length] = '\0';
        fclose(file);
        unlink(path);
        int lines = 0;
        for (const expected_line *e = expected[rank]; e->call; e++, lines++) {
            char line[256];
            snprintf(line, sizeof line, "comm %s %llu %llu %llu\n", e->call,
                     e->calls, e->sent, e->received);
            ck_assert_msg(strstr(text, line) != NULL, "rank %d: expected "
                          "\"%.*s\" in its ledger:\n%s", rank,
                          (int)strlen(line) - 1, line, text);
        }
        int written = 0;
        for (const char *at = text; (at = strchr(at, '\n')); at++)
            written++;
        ck_assert_msg(written == lines, "rank %d: %d ledger lines, expected "
                      "%d:\n%s", rank, written, lines, text);
    }
    rmdir(dir);
    run_result_free(&r);
}
END_TEST

/* Any process whose program (argv[0], the first NUL-terminated word of
 * /proc/PID/cmdline) is the probe: a rank that outlived its run. */
static bool probe_still_running(void)
{
    enum { MAX_PROCESSES = 4096 };
    static process_info list[MAX_PROCESSES];
    size_t count = harness_processes(list, MAX_PROCESSES);
    for (size_t k = 0; k < count; k++)
        if (strstr(list[k].program, "ledger_probe") != NULL &&
            list[k].state != 'Z')
            return true;
    return false;
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
 * (Files of another job running at the same time would come and go there,
 * so only a new file still present two seconds later counts.) */
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
        ck_assert_msg(access(path, F_OK) != 0, "shared-memory file %s left "
                      "behind", path);
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
    harness_add(suite, "deadlock: each rank's step named, nothing left behind",
                deadlock_is_described_and_cleaned_up, 0, 30);
    harness_add(suite, "killed run: no process or shared-memory file survives",
                killed_run_is_cleaned_up, 0, 30);
    return suite;
}
