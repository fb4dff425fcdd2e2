/* Checking every MPI call. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "check_mpi.h"

#include "boundary.h"
#include "cli.h"
#include "report.h"
#include "steps.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

void mpi_check_init(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

_Noreturn void mpi_check_failed(int error, const char *call, const char *file,
                                int line)
{
    char explanation[MPI_MAX_ERROR_STRING];
    int length = 0, rank = -1;
    MPI_Error_string(error, explanation, &length);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* MPI's word for a bad buffer says nothing of the usual cause. */
    int class = MPI_ERR_OTHER;
    MPI_Error_class(error, &class);
    /* A buffered send's MPI_ERR_BUFFER is the attached buffer full. */
    const bool buffered = strncmp(call, "MPI_Bsend", 9) == 0 ||
                          strncmp(call, "MPI_Ibsend", 10) == 0;
    const char *hint =
        class == MPI_ERR_BUFFER && buffered
            ? " (the buffer attached with MPI_Buffer_attach has no room "
              "for this message: it must hold every buffered message not "
              "yet sent, each its size plus MPI_BSEND_OVERHEAD bytes)"
        : class == MPI_ERR_BUFFER
            ? " (a buffer argument is not valid: NULL where data was "
              "expected, or one buffer given both to send from and to "
              "receive into; to reduce or gather in place, pass MPI_IN_PLACE "
              "as the send buffer)"
        : class == MPI_ERR_REQUEST
            ? " (a request MPI does not know: one never started, or kept in "
              "memory that has changed since it was started, such as a "
              "local array of a function that has returned; keep requests "
              "where they live until their wait)"
            : "";
    char message[MPI_MAX_ERROR_STRING + 768];
    snprintf(message, sizeof message, "%s:%d: rank %d: %s failed: %s%s",
             file, line, rank, call, explanation, hint);
    mpi_abort_exit(message);
}

_Noreturn void mpi_abort_exit(const char *message)
{
    fprintf(stderr, "%s\n", message);
    fflush(stderr);
    /* Give the launcher time to forward that line before the abort kills
     * this process (comm_ledger.c says why). */
    struct timespec pause = { 0, 100 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort does not return; this tells the compiler so */
}

_Noreturn void mpi_exit_all(int status)
{
    MPI_Finalize();
    exit(status);
}

void mpi_exit_if_any(bool bad, const char *program, const char *why)
{
    int rank;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    /* The lowest bad rank, or INT_MAX when there is none: one collective
     * both tells every rank whether to stop and picks who speaks. */
    int first_bad = bad ? rank : INT_MAX;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first_bad, 1, MPI_INT, MPI_MIN,
                            MPI_COMM_WORLD));
    if (first_bad == INT_MAX)
        return;
    if (rank == first_bad) {
        if (rank == 0)
            fprintf(stderr, "%s: %s\n", program, why);
        else
            fprintf(stderr, "%s: rank %d: %s\n", program, rank, why);
    }
    mpi_exit_all(2);
}

void mpi_exit_if_any_each_says(bool bad, const char *program,
                               const char *why)
{
    int any = bad;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (!any)
        return;
    if (bad)
        fprintf(stderr, "%s: %s\n", program, why);
    mpi_exit_all(2);
}

void mpi_start_or_exit(int *argc, char ***argv, const cli_spec *spec,
                       int *rank, int *ranks)
{
    MPI_CHECK(MPI_Init(argc, argv));
    mpi_check_init();
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, ranks));
    steps_open(*rank);
    /* Every rank reaches the same verdict on the same flags, so all of
     * them end together; only rank 0 speaks. */
    char error[256];
    int status = cli_report(spec, cli_parse(spec, *argc, *argv, error,
                                            sizeof error),
                            error, *rank != 0);
    if (status >= 0)
        mpi_exit_all(status);
}

FILE *mpi_report_open_or_exit(const char *program, const char *out, int rank)
{
    if (out == NULL)
        return NULL;
    char path[REPORT_PATH];
    FILE *report = NULL;
    int problem = 0;
    if (snprintf(path, sizeof path, "%s/rank-%d.txt", out, rank) >=
        (int)sizeof path)
        problem = ENAMETOOLONG;
    else if ((report = fopen(path, "w")) == NULL)
        problem = errno != 0 ? errno : EIO;
    int worst = problem;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (worst != 0) {
        if (rank == 0)
            fprintf(stderr, "%s: --out: cannot write to '%s': %s\n", program,
                    out, strerror(problem != 0 ? problem : worst));
        if (report != NULL)
            fclose(report);
        mpi_exit_all(2);
    }
    /* Which machine this rank ran on: on a cluster, the tests check that
     * the ranks really were spread over the hosts (make test-cluster). */
    char host[MPI_MAX_PROCESSOR_NAME];
    int host_length = 0;
    MPI_CHECK(MPI_Get_processor_name(host, &host_length));
    fprintf(report, "host %.*s\n", host_length, host);
    return report;
}

void mpi_mark_done(void)
{
    /* Marked as a call for the harness, so a rank that waits here for one
     * stuck in the student's code counts as waiting, as in any call. */
    steps_in_call("MPI_Barrier");
    MPI_CHECK(PMPI_Barrier(MPI_COMM_WORLD));
    steps_in_call(NULL);
    /* The memory the kernel counts at this mark is compared between a
     * short run and a long one (a step that keeps what it allocates): the
     * heap's free pages go back first, so that only memory in use counts,
     * not where the allocator's free space happened to lie. */
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    boundary_mark("done");
    /* What runs after this is given code (the report, MPI_Finalize): a
     * crash there is named as such, not as the last step of the run. */
    steps_enter("after the run: the report and MPI_Finalize (given code)");
}

void mpi_enter_boundary_or_exit(const char *program, FILE *report,
                                const char *out, int rank,
                                const char *const *report_names)
{
    int ranks;
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    char *bytes = calloc(2 * (size_t)ranks, 1);
    if (bytes == NULL)
        mpi_abort_exit("mpi_enter_boundary_or_exit: out of memory");
    MPI_CHECK(MPI_Alltoall(bytes, 1, MPI_CHAR, bytes + ranks, 1, MPI_CHAR,
                           MPI_COMM_WORLD));
    free(bytes);
    MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));

    enum { MOST_REPORTS = 40 };
    static char paths[MOST_REPORTS][REPORT_PATH];
    const char *writable[MOST_REPORTS + 1] = { NULL };
    size_t count = 0;
    for (size_t k = 0; out != NULL && report_names != NULL &&
                       report_names[k] != NULL; k++) {
        if (count == MOST_REPORTS ||
            snprintf(paths[count], REPORT_PATH, "%s/%s-rank-%d.bin", out,
                     report_names[k], rank) >= REPORT_PATH)
            mpi_abort_exit("mpi_enter_boundary_or_exit: too many reports, "
                           "or a path too long");
        writable[count] = paths[count];
        count++;
    }
    writable[count] = NULL;
    boundary_status status;
    char error[512];
    int failed = boundary_enter(writable, NULL, &status, error,
                                sizeof error) != 0;
    int anyone = failed;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &anyone, 1, MPI_INT, MPI_MAX,
                            MPI_COMM_WORLD));
    if (anyone) {
        if (failed)
            fprintf(stderr, "%s: rank %d: %s\n", program, rank, error);
        mpi_exit_all(1);
    }
    if (report != NULL && status.requested) {
        char line[256];
        boundary_describe(&status, line, sizeof line);
        fprintf(report, "%s\n", line);
    }
}
