/* A program's report to the test harness: what each rank computed and what
 * it cost, written to files that a test reads after the run.
 *
 * MPI programs cannot run inside a test's own process, so a test launches
 * the driver under mpirun and reads back, from the folder given with --out:
 *
 *   rank-R.txt          lines "KEY VALUE...", e.g. "host node1", "rows 0 334",
 *                       "memory matrix 0 2672000", "comm MPI_Bcast 1 0 800"
 *   NAME-rank-R.bin     a vector's doubles, raw, in the machine's byte order
 *
 * Only the given drivers write reports; what a student's code prints never
 * decides a test. */
#ifndef ZZ_REPORT_H
#define ZZ_REPORT_H

#include <stddef.h>
#include <stdio.h>

/* Whether the folder DIR can take reports, asked before any work, so that
 * a bad --out is refused at once instead of after the whole run. DIR must
 * exist, be a folder, lie outside /proc and /sys (the kernel's views, which
 * are no place for files), and take a new file: that is tried, and the file
 * removed at once, since permission bits say nothing about root or a
 * read-only disk. Returns 0, or -1 with one line in `error`:
 *   --out: cannot write to 'DIR': WHY
 * Under MPI every rank asks (on a cluster the folder may be each node's
 * own) and hands its answer to mpi_exit_if_any (check_mpi.h):
 *     char why[256] = "";
 *     bool bad = out != NULL && report_check_dir(out, why, sizeof why) != 0;
 *     mpi_exit_if_any(bad, "matvec_mpi", why);
 * Without MPI: print "PROGRAM: WHY" and exit 2. */
int report_check_dir(const char *dir, char *error, size_t error_len);

/* Room for any report's path: the folder, then REPORT_NAME_ROOM for a
 * slash, the file name ("params-rank-2147483647.bin": 26 characters) and
 * its NUL. report_check_dir refuses a folder whose name leaves less, and
 * report_write_doubles a longer file name: a path is never cut short. */
enum { REPORT_PATH = 4096, REPORT_NAME_ROOM = 96 };

/* Opens DIR/rank-RANK.txt for writing; NULL (after saying why) on failure. */
FILE *report_open(const char *dir, int rank);

/* Writes `count` doubles to DIR/NAME-rank-RANK.bin; 0 on success, -1 (after
 * saying why) on failure. */
int report_write_doubles(const char *dir, const char *name, int rank,
                         const double *values, size_t count);

/* The same for `count` floats, each written widened to a double (the
 * file is what report_write_doubles would write of them); it needs no
 * memory beyond a small buffer of its own. */
int report_write_floats(const char *dir, const char *name, int rank,
                        const float *values, size_t count);

#endif
