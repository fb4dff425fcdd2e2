/* The run-time boundary: see boundary.h. */
#define _GNU_SOURCE
#include "boundary.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __linux__
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#endif

/* ---- The marks for the watch ------------------------------------------- */

/* The watch's two pipes, from ZZ_WATCH_FD="EVENTS,ACKS"; false without. */
static bool watch_pipes(int *events, int *acks)
{
    const char *value = getenv("ZZ_WATCH_FD");
    char *end;
    if (value == NULL)
        return false;
    long e = strtol(value, &end, 10);
    if (*end != ',')
        return false;
    long a = strtol(end + 1, &end, 10);
    if (*end != '\0' || e < 3 || a < 3 || e > 65535 || a > 65535)
        return false;
    *events = (int)e;
    *acks = (int)a;
    return true;
}

void boundary_mark(const char *event)
{
    int events, acks;
    if (!watch_pipes(&events, &acks))
        return;
    char line[64];
    int length = snprintf(line, sizeof line, "%s\n", event);
    if (length <= 0 || length >= (int)sizeof line)
        return;
    /* One write of a short line is atomic on a pipe; the watch answers
     * with one byte once it has read what it measures. A watch that is
     * gone leaves the judge without this mark, which it reports. */
    if (write(events, line, (size_t)length) != length)
        return;
    char answer;
    while (read(acks, &answer, 1) < 0 && errno == EINTR) {
    }
}

void boundary_describe(const boundary_status *s, char *line, size_t len)
{
    snprintf(line, len, "boundary seccomp %d landlock %d signals %d tcp %d "
             "capabilities %d unmapped %d", s->seccomp, s->landlock_abi,
             s->signal_scope, s->tcp_rules, s->capabilities_dropped,
             s->shared_unmapped);
}

/* "boundary: WHAT: WHY" into `error`; returns -1. */
static int fail(char *error, size_t len, const char *what, int number)
{
    snprintf(error, len, "boundary: %s: %s", what, strerror(number));
    return -1;
}

/* Creates (or empties) each of the files the process may still write. */
static int make_writable(const char *const *writable, char *error,
                         size_t len)
{
    for (size_t k = 0; writable != NULL && writable[k] != NULL; k++) {
        int fd = open(writable[k], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
                      O_NOFOLLOW, 0644);
        if (fd < 0) {
            char what[300];
            snprintf(what, sizeof what, "cannot make %s", writable[k]);
            return fail(error, len, what, errno);
        }
        close(fd);
    }
    return 0;
}

#ifndef __linux__

int boundary_enter(const char *const *writable, const char *folder,
                   boundary_status *status, char *error, size_t error_len)
{
    (void)folder;
    boundary_status s = { .requested = getenv("ZZ_BOUNDARY") != NULL };
    if (status != NULL)
        *status = s;
    if (s.requested && make_writable(writable, error, error_len) != 0)
        return -1;
    if (s.requested)
        boundary_mark("boundary");
    return 0;
}

#else

/* ---- Shared memory ----------------------------------------------------- */

/* Unmaps every shared writable mapping: with MPI on TCP these are only
 * the process manager's locks (PMIx's, which every rank of the host maps),
 * a place where two ranks could exchange data unseen. Read-only shared
 * mappings stay (a file opened read-only cannot be made writable).
 * Returns how many were unmapped, or -1. */
static int unmap_shared_writable(void)
{
    FILE *maps = fopen("/proc/self/maps", "re");
    if (maps == NULL)
        return -1;
    enum { MOST = 64 };
    uintptr_t begin[MOST], end[MOST];
    int count = 0;
    /* This rank's own steps page (steps.h) stays: no other rank can open
     * it once the boundary is in place, and the harness reads it to say
     * where a rank that hung was. */
    const char *steps = getenv("ZZ_STEPS_DIR");
    char line[512];
    while (fgets(line, sizeof line, maps) != NULL) {
        unsigned long b, e;
        char mode[8];
        int path_at = 0;
        const char *path = "";
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &b, &e, mode,
                   &path_at) >= 3 && path_at > 0)
            path = line + path_at;
        bool own_steps = steps != NULL && steps[0] != '\0' &&
                         strncmp(path, steps, strlen(steps)) == 0 &&
                         path[strlen(steps)] == '/';
        if (sscanf(line, "%lx-%lx %7s", &b, &e, mode) == 3 &&
            mode[1] == 'w' && mode[3] == 's' && !own_steps && count < MOST) {
            begin[count] = b;
            end[count] = e;
            count++;
        }
        /* A line longer than the buffer: skip the rest of it. */
        while (strchr(line, '\n') == NULL &&
               fgets(line, sizeof line, maps) != NULL) {
        }
    }
    fclose(maps);
    for (int k = 0; k < count; k++)
        if (munmap((void *)begin[k], end[k] - begin[k]) != 0)
            return -1;
    return count;
}

/* ---- Capabilities ------------------------------------------------------ */

/* Drops every capability: the bounding set (while CAP_SETPCAP is still
 * held), the ambient set, then the effective, permitted and inheritable
 * sets. A process that holds none is left as it is. */
static bool drop_capabilities(void)
{
    for (int cap = 0; cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno == EINVAL)
            break;
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct header = { _LINUX_CAPABILITY_VERSION_3,
                                               0 };
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    return syscall(SYS_capset, &header, data) == 0;
}

/* ---- Landlock ---------------------------------------------------------- */

/* Landlock's ABI, written out here: Debian 12's headers know only its
 * first two versions, and the kernel's ABI is stable. */
struct landlock_ruleset { uint64_t fs, net, scoped; };
struct landlock_beneath { uint64_t allowed; int32_t parent_fd; }
    __attribute__((packed));
enum {
    LL_EXECUTE = 1 << 0, LL_WRITE_FILE = 1 << 1, LL_READ_FILE = 1 << 2,
    LL_READ_DIR = 1 << 3, LL_REMOVE_DIR = 1 << 4, LL_REMOVE_FILE = 1 << 5,
    LL_MAKE_CHAR = 1 << 6, LL_MAKE_DIR = 1 << 7, LL_MAKE_REG = 1 << 8,
    LL_MAKE_SOCK = 1 << 9, LL_MAKE_FIFO = 1 << 10, LL_MAKE_BLOCK = 1 << 11,
    LL_MAKE_SYM = 1 << 12, LL_REFER = 1 << 13, LL_TRUNCATE = 1 << 14,
    LL_IOCTL_DEV = 1 << 15,
    LL_BIND_TCP = 1 << 0, LL_CONNECT_TCP = 1 << 1,
    LL_SCOPE_ABSTRACT = 1 << 0, LL_SCOPE_SIGNAL = 1 << 1,
    LL_RULE_PATH = 1, LL_VERSION = 1,
};
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* Allows `access` beneath `path` (a folder) or on it (a file); a path
 * that does not exist is left out (a system without /lib64). */
static int allow_path(int ruleset, const char *path, uint64_t access,
                      uint64_t handled)
{
    struct landlock_beneath rule = { access & handled, -1 };
    rule.parent_fd = open(path, O_PATH | O_CLOEXEC);
    if (rule.parent_fd < 0)
        return errno == ENOENT ? 0 : -1;
    int result = (int)syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH,
                              &rule, 0);
    close(rule.parent_fd);
    return result;
}

/* Restricts the process's file system (and, where the kernel can, TCP and
 * signals) to what boundary.h lists. Returns the ABI used, 0 where the
 * kernel has no Landlock, -1 on a failure. */
static int restrict_files(const char *const *writable, const char *folder,
                          boundary_status *s)
{
    int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LL_VERSION);
    if (abi < 1)
        return 0;
    struct landlock_ruleset attr = { 0 };
    attr.fs = (LL_MAKE_SYM << 1) - 1;
    if (abi >= 2)
        attr.fs |= LL_REFER;
    if (abi >= 3)
        attr.fs |= LL_TRUNCATE;
    if (abi >= 5)
        attr.fs |= LL_IOCTL_DEV;
    if (abi >= 4)
        attr.net = LL_BIND_TCP | LL_CONNECT_TCP;
    if (abi >= 6)
        attr.scoped = LL_SCOPE_ABSTRACT | LL_SCOPE_SIGNAL;
    size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t)
                                                    : sizeof(uint64_t);
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (ruleset < 0)
        return -1;
    const uint64_t reading = LL_READ_FILE | LL_READ_DIR | LL_EXECUTE;
    const uint64_t writing = LL_WRITE_FILE | LL_TRUNCATE;
    /* The system's files: libraries a library loads late, MPI's help
     * texts. Nothing there is written, and nothing of the grading lives
     * there. */
    static const char *const system_folders[] = {
        "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin",
        "/etc", "/opt",
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof system_folders / sizeof *system_folders;
         k++)
        bad |= allow_path(ruleset, system_folders[k], reading, attr.fs);
    bad |= allow_path(ruleset, "/dev/null", LL_READ_FILE | LL_WRITE_FILE,
                      attr.fs);
    bad |= allow_path(ruleset, "/dev/zero", LL_READ_FILE, attr.fs);
    bad |= allow_path(ruleset, "/dev/urandom", LL_READ_FILE, attr.fs);
    /* The process's own network tables (UCX reads the routes when MPICH
     * ends): this process's /proc/PID/net, nothing else of /proc. */
    bad |= allow_path(ruleset, "/proc/self/net", LL_READ_FILE | LL_READ_DIR,
                      attr.fs);
    /* And its own threads (lesson 03's producer counts the threads that
     * ran from their /proc/PID/task entries). */
    bad |= allow_path(ruleset, "/proc/self/task", LL_READ_FILE | LL_READ_DIR,
                      attr.fs);
    /* A run with a /dev/shm of its own (the harness's keeper mounts one)
     * may remove its files there: LLVM's OpenMP runtime removes the file
     * it registered itself in when the process ends. */
    if (getenv("ZZ_PRIVATE_SHM") != NULL)
        bad |= allow_path(ruleset, "/dev/shm", LL_REMOVE_FILE, attr.fs);
    for (size_t k = 0; writable != NULL && writable[k] != NULL; k++)
        bad |= allow_path(ruleset, writable[k], writing, attr.fs);
    if (folder != NULL)
        bad |= allow_path(ruleset, folder,
                          reading | writing | LL_MAKE_REG | LL_REMOVE_FILE,
                          attr.fs);
    if (bad != 0 || syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
        int saved = errno;
        close(ruleset);
        errno = saved;
        return -1;
    }
    close(ruleset);
    s->signal_scope = abi >= 6;
    s->tcp_rules = abi >= 4;
    return abi;
}

/* ---- The guarded range and its gate ------------------------------------ */

/* The one range whose mappings only the gate may change (the cpu device's
 * arena): [guarded_begin, guarded_end), empty when none. */
static uintptr_t guarded_begin, guarded_end;

void boundary_guard_range(const void *begin, size_t bytes)
{
    guarded_begin = (uintptr_t)begin;
    guarded_end = (uintptr_t)begin + bytes;
}

#if defined(__x86_64__)
/* The gate: a system call of three arguments from this one instruction,
 * whose address (just after it, as seccomp reports a call's) the filter
 * knows. */
extern const char boundary_gate_return[];
long boundary_gate(long nr, long a, long b, long c)
{
    long result;
    __asm__ volatile("syscall\n\t"
                     ".globl boundary_gate_return\n"
                     "boundary_gate_return:"
                     : "=a"(result)
                     : "a"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    if (result < 0 && result > -4096) {
        errno = (int)-result;
        return -1;
    }
    return result;
}
#define BOUNDARY_GATE 1
#elif defined(__aarch64__)
extern const char boundary_gate_return[];
long boundary_gate(long nr, long a, long b, long c)
{
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc #0\n\t"
                     ".globl boundary_gate_return\n"
                     "boundary_gate_return:"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2)
                     : "memory");
    if (x0 < 0 && x0 > -4096) {
        errno = (int)-x0;
        return -1;
    }
    return x0;
}
#define BOUNDARY_GATE 1
#else
long boundary_gate(long nr, long a, long b, long c)
{
    return syscall(nr, a, b, c);
}
#endif

/* ---- The system-call filter --------------------------------------------- */

#if defined(__x86_64__)
#define BOUNDARY_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define BOUNDARY_ARCH AUDIT_ARCH_AARCH64
#endif

#ifdef BOUNDARY_ARCH

/* A filter being written, instruction by instruction; a jump may name a
 * label placed later (the filter's jumps go forward only), resolved when
 * the filter is done. */
enum { MOST_INSTRUCTIONS = 1024, MOST_LABELS = 256, MOST_FIXES = 512 };
typedef struct {
    int instruction, if_true, if_false;
} label_fix;
typedef struct {
    struct sock_filter code[MOST_INSTRUCTIONS];
    unsigned short length;
    bool overflow;
    int label_at[MOST_LABELS];
    int label_count;
    label_fix fixes[MOST_FIXES];
    int fix_count;
} filter;

static void emit(filter *f, struct sock_filter instruction)
{
    if (f->length == MOST_INSTRUCTIONS) {
        f->overflow = true;
        return;
    }
    f->code[f->length++] = instruction;
}

/* A new label, placed nowhere yet. */
static int new_label(filter *f)
{
    if (f->label_count == MOST_LABELS) {
        f->overflow = true;
        return 0;
    }
    f->label_at[f->label_count] = -1;
    return f->label_count++;
}

static void place(filter *f, int label)
{
    f->label_at[label] = f->length;
}

/* A conditional jump to labels (NEXT: the next instruction). */
enum { NEXT = -1 };
static void jump(filter *f, uint16_t code, uint32_t k, int if_true,
                 int if_false)
{
    if (f->fix_count == MOST_FIXES) {
        f->overflow = true;
        return;
    }
    f->fixes[f->fix_count++] = (label_fix){ f->length, if_true, if_false };
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | code | BPF_K, k, 0, 0));
}

/* Every jump's offsets, from its labels; false when one is unplaced or
 * too far (a jump reaches 255 instructions at most). */
static bool resolve(filter *f)
{
    for (int k = 0; k < f->fix_count; k++) {
        struct sock_filter *insn = &f->code[f->fixes[k].instruction];
        const int targets[2] = { f->fixes[k].if_true, f->fixes[k].if_false };
        unsigned char offsets[2];
        for (int t = 0; t < 2; t++) {
            int to = targets[t] == NEXT ? f->fixes[k].instruction + 1
                                        : f->label_at[targets[t]];
            int offset = to - (f->fixes[k].instruction + 1);
            if (to < 0 || offset < 0 || offset > 255)
                return false;
            offsets[t] = (unsigned char)offset;
        }
        insn->jt = offsets[0];
        insn->jf = offsets[1];
    }
    return !f->overflow;
}

#define ARG_LOW(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define ARG_HIGH(n) (ARG_LOW(n) + 4)
static const uint32_t ALLOW = SECCOMP_RET_ALLOW;
static uint32_t refuse(int number) { return SECCOMP_RET_ERRNO | number; }

static void load(filter *f, uint32_t offset)
{
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
}

static void ret(filter *f, uint32_t action)
{
    emit(f, (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, action));
}

/* With the call's number loaded: `action` for call `nr`. */
static void answer(filter *f, long nr, uint32_t action)
{
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                         (uint32_t)nr, 0, 1));
    ret(f, action);
}

/* With the call's number loaded: for call `nr`, allowed only when its
 * argument `arg` is `value` (a non-negative int: its high word 0);
 * refused otherwise. Leaves the number loaded for the next rule. */
static void only_with(filter *f, long nr, int arg, uint32_t value)
{
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                         (uint32_t)nr, 0, 6));
    load(f, ARG_HIGH(arg));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3));
    load(f, ARG_LOW(arg));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 0,
                                         1));
    ret(f, ALLOW);
    ret(f, refuse(EPERM));
}

/* With nothing else loaded: to `clear` when arguments `addr` and `len`
 * name a range that misses the guarded one, to `guarded` when it meets
 * it. 64-bit values in 32-bit words: [a, a + n) meets [B, E) when a < E
 * and a + n > B. A start at or past E misses; one at or past B (and below
 * E) meets; one below B meets when n > B - a, which for n under 4 GiB
 * (the only kind glibc or MPI asks for; a longer one is refused) needs
 * B - a under 4 GiB, then the difference of the low words. */
static void range_check(filter *f, int addr, int len, int clear, int guarded)
{
    const uint32_t b_low = (uint32_t)guarded_begin;
    const uint32_t b_high = (uint32_t)((uint64_t)guarded_begin >> 32);
    const uint32_t e_low = (uint32_t)guarded_end;
    const uint32_t e_high = (uint32_t)((uint64_t)guarded_end >> 32);
    const int below_end = new_label(f), end_low = new_label(f);
    const int begin_low = new_label(f), below_begin = new_label(f);
    const int near = new_label(f), near_low = new_label(f);
    /* At or past E: clear. */
    load(f, ARG_HIGH(addr));
    jump(f, BPF_JGT, e_high, clear, NEXT);
    jump(f, BPF_JEQ, e_high, end_low, below_end);
    place(f, end_low);
    load(f, ARG_LOW(addr));
    jump(f, BPF_JGE, e_low, clear, below_end);
    /* At or past B: guarded. */
    place(f, below_end);
    load(f, ARG_HIGH(addr));
    jump(f, BPF_JGT, b_high, guarded, NEXT);
    jump(f, BPF_JEQ, b_high, begin_low, below_begin);
    place(f, begin_low);
    load(f, ARG_LOW(addr));
    jump(f, BPF_JGE, b_low, guarded, near);
    /* Below B by less than 4 GiB (a high word one less, a low word
     * above B's), or clear. */
    place(f, below_begin);
    jump(f, BPF_JEQ, b_high - 1, near_low, clear);
    place(f, near_low);
    load(f, ARG_LOW(addr));
    jump(f, BPF_JGT, b_low, near, clear);
    /* n > B - a: the low words' difference, in X, against n's low word;
     * a length of 4 GiB or more is refused outright. */
    place(f, near);
    load(f, ARG_HIGH(len));
    jump(f, BPF_JEQ, 0, NEXT, guarded);
    load(f, ARG_LOW(addr));
    emit(f, (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0));
    emit(f, (struct sock_filter)BPF_STMT(BPF_LD | BPF_IMM, b_low));
    emit(f, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_SUB | BPF_X, 0));
    emit(f, (struct sock_filter)BPF_STMT(BPF_MISC | BPF_TAX, 0));
    load(f, ARG_LOW(len));
    if (f->fix_count == MOST_FIXES) {
        f->overflow = true;
        return;
    }
    f->fixes[f->fix_count++] = (label_fix){ f->length, guarded, clear };
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGT | BPF_X, 0, 0, 0));
}

/* With the call's number loaded: for the calls that change mappings, a
 * range that meets the guarded one is refused, but from the gate (for the
 * two calls the device layer makes through it, mprotect and munmap). The
 * number is loaded again after. */
/* The two answers a block of guard_range ends in, at its labels. */
static void answers(filter *f, int allow, int deny)
{
    place(f, allow);
    ret(f, ALLOW);
    place(f, deny);
    ret(f, refuse(EPERM));
}

static void guard_range(filter *f)
{
    if (guarded_end == guarded_begin)
        return;
    static const struct {
        long nr;
        int addr, len;
        bool gated;
    } calls[] = {
        { SYS_mprotect, 0, 1, true },  { SYS_munmap, 0, 1, true },
        { SYS_pkey_mprotect, 0, 1, false }, { SYS_madvise, 0, 1, false },
#ifdef SYS_remap_file_pages
        { SYS_remap_file_pages, 0, 1, false },
#endif
    };
    /* Each call's block ends in its own answers, so that every jump stays
     * short: a block is about thirty instructions. */
    for (size_t k = 0; k < sizeof calls / sizeof *calls; k++) {
        const int other = new_label(f), check = new_label(f);
        const int allow = new_label(f), deny = new_label(f);
        jump(f, BPF_JEQ, (uint32_t)calls[k].nr, NEXT, other);
#ifdef BOUNDARY_GATE
        if (calls[k].gated) {
            const uint64_t gate = (uint64_t)(uintptr_t)boundary_gate_return;
            const int gate_high = new_label(f);
            load(f, offsetof(struct seccomp_data, instruction_pointer));
            jump(f, BPF_JEQ, (uint32_t)gate, gate_high, check);
            place(f, gate_high);
            load(f, offsetof(struct seccomp_data, instruction_pointer) + 4);
            jump(f, BPF_JEQ, (uint32_t)(gate >> 32), allow, check);
        }
#endif
        place(f, check);
        range_check(f, calls[k].addr, calls[k].len, allow, deny);
        answers(f, allow, deny);
        place(f, other);
    }
    /* mmap over the range: only with MAP_FIXED can it land there. */
    {
        const int other = new_label(f), check = new_label(f);
        const int allow = new_label(f), deny = new_label(f);
        jump(f, BPF_JEQ, SYS_mmap, NEXT, other);
        load(f, ARG_LOW(3));
        jump(f, BPF_JSET, MAP_FIXED, check, allow);
        place(f, check);
        range_check(f, 0, 1, allow, deny);
        answers(f, allow, deny);
        place(f, other);
    }
    /* mremap: the old range, and with MREMAP_FIXED the new one. */
    {
        const int other = new_label(f), fresh = new_label(f);
        const int check = new_label(f), allow = new_label(f);
        const int deny = new_label(f);
        jump(f, BPF_JEQ, SYS_mremap, NEXT, other);
        range_check(f, 0, 1, fresh, deny);
        place(f, fresh);
        load(f, ARG_LOW(3));
        jump(f, BPF_JSET, MREMAP_FIXED, check, allow);
        place(f, check);
        range_check(f, 4, 2, allow, deny);
        answers(f, allow, deny);
        place(f, other);
    }
}

/* The calls no code under test needs, each a way past the measurements
 * or out of the run. */
static const long refused_calls[] = {
    SYS_execve, SYS_execveat, SYS_ptrace, SYS_process_vm_readv,
    SYS_process_vm_writev, SYS_pidfd_open, SYS_pidfd_getfd,
    SYS_pidfd_send_signal, SYS_kcmp, SYS_tkill, SYS_socketpair,
    SYS_perf_event_open, SYS_bpf, SYS_userfaultfd, SYS_io_uring_setup,
    SYS_io_uring_enter, SYS_io_uring_register, SYS_memfd_create,
    SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_inotify_init1,
    SYS_fanotify_init, SYS_add_key, SYS_request_key, SYS_keyctl,
    SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_unshare,
    SYS_setns, SYS_open_tree, SYS_move_mount, SYS_fsopen, SYS_fsconfig,
    SYS_fsmount, SYS_fspick, SYS_init_module, SYS_finit_module,
    SYS_delete_module, SYS_kexec_load, SYS_reboot, SYS_swapon,
    SYS_swapoff, SYS_acct, SYS_personality, SYS_process_madvise,
#ifdef SYS_memfd_secret
    SYS_memfd_secret,
#endif
#ifdef SYS_mount_setattr
    SYS_mount_setattr,
#endif
#ifdef SYS_process_mrelease
    SYS_process_mrelease,
#endif
#if defined(__x86_64__)
    SYS_fork, SYS_vfork, SYS_iopl, SYS_ioperm, SYS_modify_ldt,
    SYS_inotify_init, SYS_kexec_file_load,
#endif
};

/* Writes the filter: see boundary.h for what it refuses and why. */
static void write_filter(filter *f, bool refuse_connect)
{
    const uint32_t self = (uint32_t)getpid();
    /* Another architecture's calls (x86's int 0x80 from a 64-bit process)
     * would be numbered differently: such a process is killed. */
    load(f, offsetof(struct seccomp_data, arch));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                         BOUNDARY_ARCH, 1, 0));
    ret(f, SECCOMP_RET_KILL_PROCESS);
    load(f, offsetof(struct seccomp_data, nr));
#if defined(__x86_64__)
    /* The x32 numbers reach the same calls under other numbers. */
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K,
                                         0x40000000, 0, 1));
    ret(f, refuse(EPERM));
#endif
    for (size_t k = 0; k < sizeof refused_calls / sizeof *refused_calls; k++)
        answer(f, refused_calls[k], refuse(EPERM));
    guard_range(f);
    /* clone3's flags are in memory the filter cannot read: glibc falls
     * back to clone, whose flags it can. */
    answer(f, SYS_clone3, refuse(ENOSYS));
    if (refuse_connect)
        answer(f, SYS_connect, refuse(EPERM));
    /* clone: threads only (CLONE_THREAD), never a new process. */
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                         SYS_clone, 0, 4));
    load(f, ARG_LOW(0));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K,
                                         CLONE_THREAD, 1, 0));
    ret(f, refuse(EPERM));
    ret(f, ALLOW);
    /* socket: TCP (counted by the watch) and netlink queries (UCX asks
     * for the interfaces); nothing else, no Unix or UDP sockets. */
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                         SYS_socket, 0, 10));
    load(f, ARG_LOW(0));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                         AF_NETLINK, 7, 0));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET,
                                         1, 0));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                         AF_INET6, 0, 3));
    load(f, ARG_LOW(1));
    emit(f, (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf));
    emit(f, (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                         SOCK_STREAM, 2, 0));
    ret(f, refuse(EPERM));
    ret(f, refuse(EPERM));
    ret(f, ALLOW);
    /* Signals: to this process only. */
    load(f, offsetof(struct seccomp_data, nr));
    only_with(f, SYS_kill, 0, self);
    only_with(f, SYS_tgkill, 0, self);
    only_with(f, SYS_rt_sigqueueinfo, 0, self);
    only_with(f, SYS_rt_tgsigqueueinfo, 0, self);
    ret(f, ALLOW);
}

/* Installs the filter; false where the kernel has no seccomp. */
static int install_filter(bool refuse_connect)
{
    static filter f;
    memset(&f, 0, sizeof f);
    write_filter(&f, refuse_connect);
    if (!resolve(&f)) {
        errno = E2BIG;
        return -1;
    }
    struct sock_fprog program = { f.length, f.code };
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program);
}

#else

static int install_filter(bool refuse_connect)
{
    (void)refuse_connect;
    errno = ENOSYS;
    return -1;
}

#endif

/* Whether AddressSanitizer's leak checker will run when the process ends
 * (the sanitizer build, leaks not turned off): it stops the process's
 * threads from a clone of its own that traces them, which the filter
 * refuses. There the filter is left out (and boundary_describe says
 * "seccomp 0"): that build checks the solutions for memory errors, and the
 * filter is tested, and graded under, in the others. */
static bool leak_checker_will_run(void)
{
#ifdef __SANITIZE_ADDRESS__
    const char *options = getenv("ASAN_OPTIONS");
    return options == NULL || strstr(options, "detect_leaks=0") == NULL;
#else
    return false;
#endif
}

int boundary_enter(const char *const *writable, const char *folder,
                   boundary_status *status, char *error, size_t error_len)
{
    boundary_status s = { .requested = getenv("ZZ_BOUNDARY") != NULL };
    if (status != NULL)
        *status = s;
    if (!s.requested)
        return 0;
    if (make_writable(writable, error, error_len) != 0)
        return -1;
#ifdef _OPENMP
    /* The OpenMP runtime reads the machine (/proc, /sys) and, LLVM's,
     * registers the process in a file of /dev/shm at its first parallel
     * region: now, while it still may, not at the student's first parallel
     * loop, where the boundary would refuse it. One thread: the threads a
     * student's loop starts are its own, as the tests of lesson 03 count
     * them. */
    static volatile int threads;
#pragma omp parallel num_threads(1)
    {
#pragma omp atomic
        threads++;
    }
#endif
    /* Under MPICH the ranks keep UCX's shared-memory transport (the
     * grader says so: ZZ_BOUNDARY_SHARED=keep), and its mappings stay. */
    const char *shared = getenv("ZZ_BOUNDARY_SHARED");
    if (shared == NULL || strcmp(shared, "keep") != 0) {
        s.shared_unmapped = unmap_shared_writable();
        if (s.shared_unmapped < 0)
            return fail(error, error_len, "unmapping shared memory", errno);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return fail(error, error_len, "no_new_privs", errno);
    s.landlock_abi = restrict_files(writable, folder, &s);
    if (s.landlock_abi < 0)
        return fail(error, error_len, "Landlock", errno);
    s.capabilities_dropped = drop_capabilities();
    if (leak_checker_will_run())
        s.seccomp = false;
    else if (install_filter(!s.tcp_rules) == 0)
        s.seccomp = true;
    else if (errno != EINVAL && errno != ENOSYS)
        return fail(error, error_len, "seccomp", errno);
    if (status != NULL)
        *status = s;
    boundary_mark("boundary");
    return 0;
}

#endif
