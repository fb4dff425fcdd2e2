/* The watch: measures one MPI rank from outside its process.
 *
 *   mpirun -np P rank_watch DIR -- PROGRAM [ARG...]
 *
 * The harness starts every rank of a test's MPI run under this program,
 * which starts PROGRAM (the lesson's driver, linked with the student's
 * files) as its child and measures it through the kernel: what it reads
 * the driver's code cannot write, because once the driver has called
 * boundary_enter (common/boundary.h) it can neither signal, trace nor
 * reach this process, nor open the file this writes. At each mark the
 * driver makes (boundary_mark: "boundary" after its set-up, "done" when
 * the student's code has finished) the driver waits while this reads:
 *
 *   memory   from /proc/PID/status: the resident set by kind (anonymous,
 *            file-backed, shared) and its peak since the last "boundary"
 *            mark (which resets the peak through /proc/PID/clear_refs),
 *            and when the driver has ended, wait4's ru_maxrss;
 *   traffic  the bytes each of the driver's TCP sockets has sent and
 *            received, from the kernel's socket statistics (sock_diag),
 *            the process manager's own connection apart;
 *   state    at "boundary": whether the driver's seccomp filter is in
 *            place, no_new_privs set and its capabilities gone.
 *
 * It writes DIR/watch-rank-R.txt (R from the MPI launcher's environment),
 * created here and never opened by the driver:
 *
 *   watch RANK PID
 *   boundary seccomp MODE filters N no_new_privs B capabilities HEX
 *   event NAME anon KIB file KIB shmem KIB peak KIB sent B received B
 *         launcher_sent B launcher_received B sockets N
 *   socket NAME LOCAL_PORT REMOTE_PORT SENT RECEIVED   (one per socket)
 *   exit STATUS SIGNAL maxrss KIB
 *
 * Linux only (it needs /proc and sock_diag); elsewhere the harness runs
 * the driver without it and says that what the run reports about itself is
 * all there is. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/prctl.h>

static pid_t child;

static _Noreturn void die(const char *what)
{
    fprintf(stderr, "rank_watch: %s: %s\n", what, strerror(errno));
    if (child > 0)
        kill(child, SIGKILL);
    exit(126);
}

/* ---- The driver's sockets ---------------------------------------------- */

enum { MAX_SOCKETS = 1024 };

typedef struct {
    unsigned long inode;
    unsigned local_port, remote_port;
    uint64_t sent, received;
} socket_count;

/* The inodes of the sockets among the driver's descriptors. */
static size_t socket_inodes(unsigned long *inodes, size_t capacity)
{
    char folder[64];
    snprintf(folder, sizeof folder, "/proc/%d/fd", (int)child);
    DIR *fds = opendir(folder);
    size_t count = 0;
    struct dirent *entry;
    while (fds != NULL && (entry = readdir(fds)) != NULL && count < capacity) {
        char target[64];
        ssize_t length = readlinkat(dirfd(fds), entry->d_name, target,
                                    sizeof target - 1);
        unsigned long inode;
        if (length <= 0)
            continue;
        target[length] = '\0';
        if (sscanf(target, "socket:[%lu]", &inode) == 1)
            inodes[count++] = inode;
    }
    if (fds != NULL)
        closedir(fds);
    return count;
}

static bool among(unsigned long inode, const unsigned long *inodes,
                  size_t count)
{
    for (size_t k = 0; k < count; k++)
        if (inodes[k] == inode)
            return true;
    return false;
}

/* The TCP sockets (IPv4 and IPv6) whose inodes are the driver's, with
 * the kernel's byte counts: tcpi_bytes_sent less what was sent again
 * (retransmitted: the data crossed once), and tcpi_bytes_received. */
static size_t tcp_sockets(socket_count *sockets, size_t capacity)
{
    static unsigned long inodes[MAX_SOCKETS];
    size_t owned = socket_inodes(inodes, MAX_SOCKETS), count = 0;
    const int families[] = { AF_INET, AF_INET6 };
    for (int f = 0; f < 2; f++) {
        int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
                          NETLINK_SOCK_DIAG);
        if (diag < 0)
            die("a sock_diag socket");
        struct {
            struct nlmsghdr header;
            struct inet_diag_req_v2 request;
        } ask = { 0 };
        ask.header.nlmsg_len = sizeof ask;
        ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
        ask.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        ask.request.sdiag_family = (unsigned char)families[f];
        ask.request.sdiag_protocol = IPPROTO_TCP;
        ask.request.idiag_states = ~0u;
        ask.request.idiag_ext = 1 << (INET_DIAG_INFO - 1);
        if (send(diag, &ask, sizeof ask, 0) != (ssize_t)sizeof ask)
            die("asking sock_diag");
        static char answer[65536];
        bool done = false;
        while (!done) {
            ssize_t length = recv(diag, answer, sizeof answer, 0);
            if (length < 0 && errno == EINTR)
                continue;
            if (length <= 0)
                break;
            for (struct nlmsghdr *h = (struct nlmsghdr *)answer;
                 NLMSG_OK(h, length); h = NLMSG_NEXT(h, length)) {
                if (h->nlmsg_type == NLMSG_DONE ||
                    h->nlmsg_type == NLMSG_ERROR) {
                    done = true;
                    break;
                }
                const struct inet_diag_msg *m = NLMSG_DATA(h);
                if (!among(m->idiag_inode, inodes, owned) ||
                    count == capacity)
                    continue;
                socket_count *s = &sockets[count];
                *s = (socket_count){ m->idiag_inode, ntohs(m->id.idiag_sport),
                                     ntohs(m->id.idiag_dport), 0, 0 };
                int left = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
                for (struct rtattr *a = (struct rtattr *)(m + 1);
                     RTA_OK(a, left); a = RTA_NEXT(a, left)) {
                    if (a->rta_type != INET_DIAG_INFO)
                        continue;
                    struct tcp_info info;
                    memset(&info, 0, sizeof info);
                    size_t n = RTA_PAYLOAD(a) < sizeof info ? RTA_PAYLOAD(a)
                                                            : sizeof info;
                    memcpy(&info, RTA_DATA(a), n);
                    s->sent = info.tcpi_bytes_sent - info.tcpi_bytes_retrans;
                    s->received = info.tcpi_bytes_received;
                }
                count++;
            }
        }
        close(diag);
    }
    return count;
}

/* The process manager's ports: Open MPI's PMIx server, from the
 * environment the driver inherits ("...;tcp4://127.0.0.1:PORT"), and
 * MPICH's PMI_PORT ("HOST:PORT"). A socket to one of them carries the
 * launch's own messages, counted apart. */
enum { MAX_LAUNCHER_PORTS = 8 };
static unsigned launcher_ports[MAX_LAUNCHER_PORTS];
static int launcher_port_count;

static void note_port(const char *text)
{
    const char *colon = text ? strrchr(text, ':') : NULL;
    if (colon == NULL || launcher_port_count == MAX_LAUNCHER_PORTS)
        return;
    unsigned long port = strtoul(colon + 1, NULL, 10);
    if (port > 0 && port < 65536)
        launcher_ports[launcher_port_count++] = (unsigned)port;
}

static void find_launcher_ports(char **environment)
{
    for (char **e = environment; *e != NULL; e++)
        if (strncmp(*e, "PMIX_SERVER_URI", 15) == 0 ||
            strncmp(*e, "PMI_PORT=", 9) == 0)
            note_port(strchr(*e, '='));
}

static bool to_launcher(const socket_count *s)
{
    for (int k = 0; k < launcher_port_count; k++)
        if (s->remote_port == launcher_ports[k])
            return true;
    return false;
}

/* ---- The driver's memory ----------------------------------------------- */

typedef struct {
    unsigned long anon, file, shmem, peak;   /* KiB */
} memory_reading;

/* "NAME:   VALUE kB" from /proc/PID/status into the reading. */
static memory_reading read_memory(void)
{
    memory_reading m = { 0 };
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)child);
    FILE *status = fopen(path, "re");
    while (status != NULL && fgets(line, sizeof line, status) != NULL) {
        unsigned long value;
        if (sscanf(line, "RssAnon: %lu", &value) == 1)
            m.anon = value;
        else if (sscanf(line, "RssFile: %lu", &value) == 1)
            m.file = value;
        else if (sscanf(line, "RssShmem: %lu", &value) == 1)
            m.shmem = value;
        else if (sscanf(line, "VmHWM: %lu", &value) == 1)
            m.peak = value;
    }
    if (status != NULL)
        fclose(status);
    return m;
}

/* What the driver's boundary left it, as the kernel says. */
static void write_state(FILE *out)
{
    char path[64], line[256];
    int seccomp = -1, filters = -1, no_new_privs = -1;
    char capabilities[32] = "?";
    snprintf(path, sizeof path, "/proc/%d/status", (int)child);
    FILE *status = fopen(path, "re");
    while (status != NULL && fgets(line, sizeof line, status) != NULL) {
        sscanf(line, "Seccomp: %d", &seccomp);
        sscanf(line, "Seccomp_filters: %d", &filters);
        sscanf(line, "NoNewPrivs: %d", &no_new_privs);
        sscanf(line, "CapEff: %31s", capabilities);
    }
    if (status != NULL)
        fclose(status);
    fprintf(out, "boundary seccomp %d filters %d no_new_privs %d "
            "capabilities %s\n", seccomp, filters, no_new_privs,
            capabilities);
}

/* ---- The marks --------------------------------------------------------- */

static void measure(FILE *out, const char *event)
{
    static socket_count sockets[MAX_SOCKETS];
    memory_reading m = read_memory();
    size_t count = tcp_sockets(sockets, MAX_SOCKETS);
    uint64_t sent = 0, received = 0, launcher_sent = 0,
             launcher_received = 0;
    for (size_t k = 0; k < count; k++)
        if (to_launcher(&sockets[k])) {
            launcher_sent += sockets[k].sent;
            launcher_received += sockets[k].received;
        } else {
            sent += sockets[k].sent;
            received += sockets[k].received;
        }
    if (strcmp(event, "boundary") == 0)
        write_state(out);
    fprintf(out, "event %s anon %lu file %lu shmem %lu peak %lu sent %llu "
            "received %llu launcher_sent %llu launcher_received %llu "
            "sockets %zu\n", event, m.anon, m.file, m.shmem, m.peak,
            (unsigned long long)sent, (unsigned long long)received,
            (unsigned long long)launcher_sent,
            (unsigned long long)launcher_received, count);
    for (size_t k = 0; k < count; k++)
        fprintf(out, "socket %s %u %u %llu %llu%s\n", event,
                sockets[k].local_port, sockets[k].remote_port,
                (unsigned long long)sockets[k].sent,
                (unsigned long long)sockets[k].received,
                to_launcher(&sockets[k]) ? " launcher" : "");
    /* From now on the peak is the training's own, not the set-up's. */
    if (strcmp(event, "boundary") == 0) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)child);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "5", 1) != 1)
            fprintf(out, "note the peak could not be reset: %s\n",
                    strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    fflush(out);
}

/* A mark's name: letters, digits, '-' and '_', up to 31 of them; anything
 * else is recorded as "invalid", so that the judge sees that something
 * other than the driver wrote to the pipe. */
static void clean_name(char *name)
{
    size_t n = strlen(name);
    bool ok = n > 0 && n < 32;
    for (size_t k = 0; ok && k < n; k++)
        ok = (name[k] >= 'a' && name[k] <= 'z') ||
             (name[k] >= '0' && name[k] <= '9') || name[k] == '-' ||
             name[k] == '_';
    if (!ok)
        strcpy(name, "invalid");
}

static void forward(int signal_number)
{
    if (child > 0)
        kill(child, signal_number);
}

int main(int argc, char **argv, char **environment)
{
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "usage: rank_watch DIR -- PROGRAM [ARG...]\n");
        return 2;
    }
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (rank == NULL)
        rank = getenv("PMI_RANK");
    if (rank == NULL)
        rank = getenv("PMIX_RANK");
    char *end;
    long rank_number = rank != NULL ? strtol(rank, &end, 10) : -1;
    if (rank == NULL || *end != '\0' || rank_number < 0) {
        fprintf(stderr, "rank_watch: no MPI rank in the environment "
                "(OMPI_COMM_WORLD_RANK, PMI_RANK): run it under mpirun\n");
        return 2;
    }
    char path[4096];
    if (snprintf(path, sizeof path, "%s/watch-rank-%ld.txt", argv[1],
                 rank_number) >= (int)sizeof path) {
        fprintf(stderr, "rank_watch: %s: path too long\n", argv[1]);
        return 2;
    }
    int report_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
                         O_CLOEXEC, 0644);
    if (report_fd < 0)
        die(path);
    FILE *out = fdopen(report_fd, "w");
    if (out == NULL)
        die("fdopen");
    find_launcher_ports(environment);

    int events[2], acks[2];
    if (pipe2(events, O_CLOEXEC) != 0 || pipe2(acks, O_CLOEXEC) != 0)
        die("pipe");
    child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        /* The driver dies with the watch, and holds only its ends. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() == 1)
            _exit(126);
        char value[32];
        int e = fcntl(events[1], F_DUPFD, 3), a = fcntl(acks[0], F_DUPFD, 3);
        if (e < 0 || a < 0)
            _exit(126);
        snprintf(value, sizeof value, "%d,%d", e, a);
        setenv("ZZ_WATCH_FD", value, 1);
        execvp(argv[3], argv + 3);
        fprintf(stderr, "rank_watch: cannot run %s: %s\n", argv[3],
                strerror(errno));
        _exit(127);
    }
    close(events[1]);
    close(acks[0]);
    struct sigaction pass = { .sa_handler = forward };
    sigaction(SIGTERM, &pass, NULL);
    sigaction(SIGINT, &pass, NULL);
    sigaction(SIGHUP, &pass, NULL);
    signal(SIGPIPE, SIG_IGN);
    fprintf(out, "watch %ld %d\n", rank_number, (int)child);
    fflush(out);

    char name[64];
    size_t length = 0;
    for (;;) {
        char c;
        ssize_t got = read(events[0], &c, 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (c != '\n') {
            if (length < sizeof name - 1)
                name[length++] = c;
            continue;
        }
        name[length] = '\0';
        length = 0;
        clean_name(name);
        measure(out, name);
        if (write(acks[1], "k", 1) != 1)
            break;
    }
    int status;
    struct rusage usage;
    while (wait4(child, &status, 0, &usage) < 0)
        if (errno != EINTR)
            die("wait4");
    fprintf(out, "exit %d %d maxrss %ld\n",
            WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            WIFSIGNALED(status) ? WTERMSIG(status) : 0, usage.ru_maxrss);
    if (fclose(out) != 0)
        die(path);
    /* The driver's own way of ending, as mpirun would have seen it. */
    if (WIFSIGNALED(status)) {
        signal(WTERMSIG(status), SIG_DFL);
        raise(WTERMSIG(status));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
