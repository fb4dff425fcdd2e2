/* A test program for the run-time boundary (common/boundary.h), run by
 * tests/common/test_boundary.c with ZZ_BOUNDARY set:
 *
 *   boundary_probe DIR
 *
 * It makes a guarded range, enters the boundary with DIR/allowed.bin
 * writable, then tries each thing below and writes one line per try to
 * standard output, "NAME allowed" or "NAME refused ERRNO" (a thread's
 * start and a raw call's result alike): the test decides which is right.
 * Every try is made so that it cannot harm the machine if the boundary
 * failed to stop it (the file it would make is removed by the test; the
 * process it would signal is its own parent, with signal 0). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boundary.h"

static void say(const char *name, long result)
{
    if (result < 0)
        printf("%s refused %d\n", name, errno);
    else
        printf("%s allowed\n", name);
    fflush(stdout);
}

static void *nothing(void *argument)
{
    return argument;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: boundary_probe DIR\n");
        return 2;
    }
    enum { PAGE = 4096, GUARDED_PAGES = 16 };
    /* The guarded range, with a page on each side that is not. */
    unsigned char *map = mmap(NULL, (GUARDED_PAGES + 2) * PAGE, PROT_NONE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *shared = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED || shared == MAP_FAILED) {
        perror("boundary_probe: mmap");
        return 1;
    }
    unsigned char *guarded = map + PAGE;
    boundary_guard_range(guarded, GUARDED_PAGES * PAGE);

    char allowed[4096], denied[4096], created[4096];
    snprintf(allowed, sizeof allowed, "%s/allowed.bin", argv[1]);
    snprintf(denied, sizeof denied, "%s/denied.bin", argv[1]);
    snprintf(created, sizeof created, "%s/created.bin", argv[1]);
    int denied_fd = open(denied, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (denied_fd < 0) {
        perror(denied);
        return 1;
    }
    close(denied_fd);
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = { .sin_family = AF_INET,
                                   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t length = sizeof address;
    if (listener < 0 || bind(listener, (struct sockaddr *)&address,
                             sizeof address) != 0 ||
        listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&address, &length) != 0) {
        perror("boundary_probe: a listening socket");
        return 1;
    }

    const char *const writable[] = { allowed, NULL };
    boundary_status status;
    char error[512];
    if (boundary_enter(writable, NULL, &status, error, sizeof error) != 0) {
        fprintf(stderr, "boundary_probe: %s\n", error);
        return 1;
    }
    char line[256];
    boundary_describe(&status, line, sizeof line);
    printf("%s\n", line);

    /* Files. */
    int fd = open(allowed, O_WRONLY | O_TRUNC);
    say("write-own-report", fd);
    if (fd >= 0)
        close(fd);
    say("write-other-file", open(denied, O_WRONLY));
    say("read-other-file", open(denied, O_RDONLY));
    say("create-file", open(created, O_WRONLY | O_CREAT, 0644));
    say("read-system-file", open("/etc/passwd", O_RDONLY));
    say("read-proc-parent", open("/proc/1/status", O_RDONLY));
    say("read-own-task", open("/proc/self/task", O_RDONLY | O_DIRECTORY));
    /* Processes and threads. */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    if (child > 0)
        waitpid(child, NULL, 0);
    say("fork", child);
    say("exec", execl("/bin/true", "true", (char *)NULL));
    pthread_t thread;
    int started = pthread_create(&thread, NULL, nothing, NULL);
    if (started == 0)
        pthread_join(thread, NULL);
    errno = started;
    say("thread", started == 0 ? 0 : -1);
    /* Other processes. */
    say("signal-parent", kill(getppid(), 0));
    say("signal-self", kill(getpid(), 0));
    say("ptrace-parent", ptrace(PTRACE_ATTACH, getppid(), NULL, NULL));
    char byte;
    struct iovec local = { &byte, 1 }, remote = { &byte, 1 };
    say("read-parent-memory",
        process_vm_readv(getppid(), &local, 1, &remote, 1, 0));
    say("memfd", syscall(SYS_memfd_create, "probe", 0));
    say("io-uring", syscall(SYS_io_uring_setup, 1, NULL));
    /* Sockets. */
    say("udp-socket", socket(AF_INET, SOCK_DGRAM, 0));
    say("unix-socket", socket(AF_UNIX, SOCK_STREAM, 0));
    int tcp = socket(AF_INET, SOCK_STREAM, 0);
    say("tcp-socket", tcp);
    say("tcp-connect", tcp >= 0 ? connect(tcp, (struct sockaddr *)&address,
                                         sizeof address)
                                : -1);
    /* The shared mapping made before the boundary is gone: touching it
     * would fault, so ask the kernel (mincore fails on an unmapped page). */
    unsigned char residency;
    say("shared-mapping-kept", mincore(shared, PAGE, &residency));
    /* The guarded range: from anywhere but the gate, nothing changes it;
     * next to it, everything may. */
    say("mprotect-guarded", mprotect(guarded + PAGE, PAGE, PROT_READ));
    say("mprotect-across-start", mprotect(map, 2 * PAGE, PROT_READ));
    say("mprotect-across-end", mprotect(guarded + (GUARDED_PAGES - 1) * PAGE,
                                        2 * PAGE, PROT_READ));
    say("mprotect-covering", mprotect(map, (GUARDED_PAGES + 2) * PAGE,
                                      PROT_READ));
    say("mprotect-below", mprotect(map, PAGE, PROT_READ));
    say("mprotect-above", mprotect(guarded + GUARDED_PAGES * PAGE, PAGE,
                                   PROT_READ));
    say("munmap-guarded", munmap(guarded, PAGE));
    say("madvise-guarded", madvise(guarded, PAGE, MADV_DONTNEED));
    say("mmap-fixed-over",
        (long)(intptr_t)mmap(guarded, PAGE, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
                (long)(intptr_t)MAP_FAILED
            ? -1
            : 0);
    say("mprotect-through-the-gate",
        boundary_gate(SYS_mprotect, (long)(uintptr_t)guarded, PAGE,
                      PROT_READ | PROT_WRITE));
    return 0;
}
