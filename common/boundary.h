/* The run-time boundary: what a process that runs a student's code may
 * still do once that code starts, and its marks for the watch outside.
 *
 * Under the grader every number a score rests on is measured outside the
 * process that runs the student's code (tests/harness/rank_watch.c reads
 * the kernel's counts of the rank's memory and of the bytes its sockets
 * moved). That holds only if the process cannot reach the measurer, the
 * other ranks or the files behind MPI's back. So given code, after MPI and
 * the run are set up and before any student function runs, calls
 * boundary_enter, which cannot be undone by anything the process does later:
 *
 *   - no new processes, only threads (clone with CLONE_THREAD; clone3 is
 *     answered "not implemented", and glibc falls back to clone);
 *   - no exec, no ptrace, no reading or writing of other processes' memory
 *     (process_vm_*, /proc), no descriptors taken from other processes, no
 *     io_uring (whose operations pass no filter), no kernel modules, mounts
 *     or namespaces;
 *   - signals only to itself (Landlock's signal scope where the kernel has
 *     it, and the filter's check of kill's and tgkill's process id);
 *   - no new sockets but TCP ones (which the watch counts) and netlink
 *     queries, none of them able to connect or bind (Landlock ABI 4, else
 *     the filter refuses connect); no socket pairs, no abstract sockets;
 *   - no file opened, created, renamed or removed but `writable` (each
 *     made empty here, then only written) and `folder`, and reading only
 *     beneath the system's folders (/usr, /etc, ...: libraries, MPI's
 *     help texts) and the process's own /proc/PID/net and /proc/PID/task;
 *     nothing else of /proc, nothing of /sys, /tmp or the grading's
 *     folders;
 *   - the shared writable mappings it holds (MPI's shared-memory locks,
 *     which every rank of the host maps) unmapped, so that no two ranks
 *     share memory: with MPI on TCP (the grader's setting), ranks exchange
 *     data only through sockets the watch counts. Where the grader keeps
 *     MPI's shared-memory transport (MPICH, whose UCX on TCP alone hangs
 *     here: ZZ_BOUNDARY_SHARED=keep), they stay, and the bytes the ranks
 *     exchange are the ledgers' count alone;
 *   - every capability dropped (a root process keeps its user id, not its
 *     powers), and no_new_privs.
 *
 * It needs Linux: seccomp (x86_64 or aarch64) and Landlock (5.13+; the
 * signal scope from 6.12, TCP rules from 6.7). What the kernel lacks is
 * left out and said in boundary_status, never silently assumed. Elsewhere
 * (macOS) nothing is installed and the status says so.
 *
 * Outside the grader (no ZZ_BOUNDARY in the environment) boundary_enter
 * installs nothing: a student's own runs keep MPI's shared memory, which
 * the boundary would break. */
#ifndef ZZ_BOUNDARY_H
#define ZZ_BOUNDARY_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    bool requested;      /* ZZ_BOUNDARY was set: the grader asked for it */
    bool seccomp;        /* the system-call filter is installed */
    int landlock_abi;    /* the Landlock ABI used; 0: none */
    bool signal_scope;   /* Landlock keeps signals inside (ABI 6+) */
    bool tcp_rules;      /* Landlock refuses TCP connect and bind (ABI 4+) */
    bool capabilities_dropped;
    int shared_unmapped; /* shared writable mappings taken away */
} boundary_status;

/* Installs the boundary (when the grader asked for it): `writable` is a
 * NULL-terminated list of files the process may still write (each is
 * created or emptied here; may be NULL), `folder` one folder beneath
 * which it may also read, create and write files (a producer's case
 * folder; NULL for none). Tells the watch outside, if there is one,
 * "boundary" first (boundary_mark). Returns 0, or -1 with one line in
 * `error` when something the grader asked for could not be installed (a
 * file it could not make, a kernel that refused the filter); the caller
 * stops then: code under test never runs outside the boundary the grader
 * asked for. `status` (may be NULL) says what was installed. */
int boundary_enter(const char *const *writable, const char *folder,
                   boundary_status *status, char *error, size_t error_len);

/* The range of the address space whose mappings only the device layer
 * changes: the cpu device's arena (device.h), which its blocks live in
 * and which is PROT_NONE but while the device layer copies or given
 * kernels run on it. Given before boundary_enter (the filter is written
 * then), it makes the filter refuse every call that would reprotect,
 * unmap, remap or map over any of it (mprotect, pkey_mprotect, munmap,
 * madvise, remap_file_pages, mremap, mmap with MAP_FIXED), but mprotect and
 * munmap made through boundary_gate: a student's code that found mprotect
 * in the C library (a walk from any allowed function's address finds it)
 * still cannot open the device's memory. One range; 0 bytes: none. */
void boundary_guard_range(const void *begin, size_t bytes);

/* The system call `nr` with three arguments, made from the one
 * instruction the filter lets change the guarded range; -1 with errno on
 * failure, as syscall(2). x86_64 and aarch64 (elsewhere the plain call,
 * and nothing guarded). Only the device layer calls it. */
long boundary_gate(long nr, long a, long b, long c);

/* Tells the watch outside this process (tests/harness/rank_watch.c), if
 * one started it, that the run has reached `event` ("boundary", "done"),
 * and waits until the watch has read its measurements: then returns.
 * Without a watch it returns at once. A driver marks "done" when the
 * student's work has ended, before its reports. The watch records every
 * mark in order; the judge expects exactly the driver's, so a mark made
 * by other code shows as one too many. */
void boundary_mark(const char *event);

/* One line on what `status` installed, for a driver's report:
 * "boundary seccomp 1 landlock 7 signals 1 tcp 1 capabilities 1 unmapped 2". */
void boundary_describe(const boundary_status *status, char *line,
                       size_t line_len);

#endif
