/* The communication ledger, on MPI's profiling interface. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "comm_ledger.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "device.h"
#include "stack.h"
#include "steps.h"
#include "timer.h"

/* Every call the ledger counts, once: the enum of kinds and the table of
 * names and counts are both made from this list, so they cannot drift
 * apart. X(Send) stands for MPI_Send. */
#define LEDGER_CALLS(X)                                                     \
    X(Send) X(Ssend) X(Bsend) X(Rsend)                                      \
    X(Isend) X(Issend) X(Ibsend) X(Irsend)                                  \
    X(Recv) X(Irecv)                                                        \
    X(Sendrecv) X(Sendrecv_replace) X(Isendrecv) X(Isendrecv_replace)       \
    X(Bcast) X(Ibcast) X(Scatter) X(Iscatter) X(Scatterv) X(Iscatterv)      \
    X(Gather) X(Igather) X(Gatherv) X(Igatherv)                             \
    X(Allgather) X(Iallgather) X(Allgatherv) X(Iallgatherv)                 \
    X(Reduce) X(Ireduce) X(Allreduce) X(Iallreduce)                         \
    X(Reduce_scatter) X(Ireduce_scatter)                                    \
    X(Reduce_scatter_block) X(Ireduce_scatter_block)                        \
    X(Alltoall) X(Ialltoall) X(Alltoallv) X(Ialltoallv)                     \
    X(Barrier) X(Ibarrier)                                                  \
    X(Wait) X(Waitall) X(Waitany) X(Waitsome)                               \
    X(Test) X(Testall) X(Testany) X(Testsome)                               \
    X(Request_free) X(Cancel)

#define AS_KIND(call) CALL_##call,
typedef enum { LEDGER_CALLS(AS_KIND) CALL_KINDS } call_kind;

#define AS_ENTRY(call) { "MPI_" #call, { 0 } },
static struct {
    const char *name;
    comm_counts counts;
} ledger[CALL_KINDS] = { LEDGER_CALLS(AS_ENTRY) };

static uint64_t type_bytes(MPI_Datatype type, int count)
{
    int size = 0;
    PMPI_Type_size(type, &size);
    return (uint64_t)size * (uint64_t)(count > 0 ? count : 0);
}

static int comm_size(MPI_Comm comm)
{
    int size = 1;
    PMPI_Comm_size(comm, &size);
    return size;
}

static int comm_rank(MPI_Comm comm)
{
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    return rank;
}

/* Whether a message to or from `peer` in `comm` crosses to another rank:
 * not MPI_PROC_NULL, and not the rank itself (a message a rank sends to
 * itself is a copy in its own memory; counting it as traffic would let a
 * ring of sends to oneself pass for one between ranks). */
static bool crosses(int peer, MPI_Comm comm)
{
    if (peer == MPI_PROC_NULL)
        return false;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    return inter || peer != comm_rank(comm);
}

static int world_rank(void)
{
    return comm_rank(MPI_COMM_WORLD);
}

/* The call this rank is inside, and since when (timer_now). One of each,
 * with no lock, like the counts: in this toolkit only the thread that
 * started MPI calls it (MPI_Init, or lesson 03's MPI_Init_thread at
 * MPI_THREAD_FUNNELED; lesson 07's host thread runs the CPU Adam and no
 * MPI call), so enter and leave never run on two threads at once. Nor are
 * they nested: each wrapper calls the PMPI_ entry point, which does not
 * come back through the wrappers. Should some MPI library's PMPI_ call
 * come back through one, `depth` keeps the clock on the outermost call,
 * so that no second is counted twice. */
static call_kind inside;
static double inside_since;
static int depth;

/* What enter last counted as received: opened() files it with the
 * request the call started, which enter's call is. */
static uint64_t entered_received;

/* The peer and tag of the point-to-point call enter last counted, if it
 * is one that starts a request (remember_peer): opened() files them too,
 * so that a wait's report names the message it waits for. */
static int entered_peer = MPI_PROC_NULL, entered_tag;
static const char *entered_way;  /* "to" or "from"; NULL: none */

static void remember_peer(const char *way, int peer, int tag)
{
    entered_way = way;
    entered_peer = peer;
    entered_tag = tag;
}

static void check_frames(uintptr_t live_from);

/* The counts again by communicator, under its name (MPI_Comm_set_name;
 * MPI_COMM_WORLD's is "MPI_COMM_WORLD", one never named "", each as it
 * was named when the call was made): up to COMMS_NAMED names, the calls
 * on any further names counted under the last. The Wait and Test forms,
 * which name no communicator, are not counted here. */
enum { COMMS_NAMED = 16 };
static struct {
    char name[MPI_MAX_OBJECT_NAME];
    comm_counts counts;
} named[COMMS_NAMED];
static int named_count;

/* The counts of `comm`'s name, found or added; NULL for MPI_COMM_NULL. */
static comm_counts *counts_on(MPI_Comm comm)
{
    char name[MPI_MAX_OBJECT_NAME] = "";
    int length = 0;
    if (comm == MPI_COMM_NULL ||
        PMPI_Comm_get_name(comm, name, &length) != MPI_SUCCESS)
        return NULL;
    for (int k = 0; k < named_count; k++)
        if (strcmp(named[k].name, name) == 0)
            return &named[k].counts;
    if (named_count == COMMS_NAMED)
        return &named[COMMS_NAMED - 1].counts;
    memcpy(named[named_count].name, name, sizeof name);
    named[named_count].counts = (comm_counts){ 0 };
    return &named[named_count++].counts;
}

/* Bytes a call counted when it started turned out to receive, added once
 * it knows (a receive's message may be shorter than its buffer). */
static void add_received(call_kind kind, MPI_Comm comm, uint64_t bytes)
{
    ledger[kind].counts.bytes_received += bytes;
    comm_counts *on = counts_on(comm);
    if (on != NULL)
        on->bytes_received += bytes;
}

/* Counts a call and marks it as the one this rank is inside. MPI reads
 * and writes the buffers it is given, which may be a cpu device's memory
 * (lesson 07's collectives run on it): the device's memory is open to it
 * until the call returns (device.h). */
static void count_on(MPI_Comm comm, uint64_t sent, uint64_t received)
{
    comm_counts *on = counts_on(comm);
    if (on != NULL) {
        on->calls++;
        on->bytes_sent += sent;
        on->bytes_received += received;
    }
}

/* enter, and the count_ helpers that call it, are inlined always: the
 * stack address enter takes must be the MPI function's own frame's top
 * (its caller's stack pointer), whatever the optimiser would decide. */
#define ALWAYS_INLINE __attribute__((always_inline)) inline

static ALWAYS_INLINE void enter(call_kind kind, uint64_t sent,
                                uint64_t received, MPI_Comm comm)
{
    device_access_begin();
    entered_received = received;
    entered_way = NULL;
    ledger[kind].counts.calls++;
    ledger[kind].counts.bytes_sent += sent;
    ledger[kind].counts.bytes_received += received;
    count_on(comm, sent, received);
    steps_in_call(ledger[kind].name);
    if (depth++ == 0) {
        /* A stack pointer of this call's own frames: the code that
         * called MPI lives above it, so a buffer below it is in a frame
         * that has returned. (A returned frame whose place deeper calls
         * have since taken lies above it: that one is seen by the check
         * given code makes right after a student's function returns.) */
        check_frames((uintptr_t)__builtin_dwarf_cfa());
        inside = kind;
        inside_since = timer_now();
    }
}

/* The call has returned: its wall time goes to its kind. */
static int leave(int result)
{
    if (--depth == 0)
        ledger[inside].counts.seconds += timer_now() - inside_since;
    steps_in_call(NULL);
    device_access_end();
    return result;
}

bool comm_ledger_inside_call(void)
{
    return depth > 0;
}

/* Sum of counts[r] over r != except, in bytes. */
static uint64_t others(const int counts[], int size, int except,
                       MPI_Datatype type)
{
    uint64_t total = 0;
    for (int r = 0; r < size; r++)
        if (r != except)
            total += type_bytes(type, counts[r]);
    return total;
}

/* ---- open requests ---- */

/* What MPI may read until a non-blocking call completes, beyond its
 * buffers: the arrays of counts and displacements (MPI_Iallgatherv's
 * recvcounts and displs, ...). MPI requires them to stay as they were
 * until the request completes; some libraries copy them when the call
 * starts and some read them later, so code that passes arrays which die
 * when its function returns (on its stack) works with one MPI and breaks
 * with another. The ledger copies each at the start and compares at the
 * completion: changed, the program stops, saying which call's array.
 * Its send buffer too: MPI may read it until the request completes, so it
 * must neither change nor die before then (a local array of a function
 * that returned is overwritten by the next calls). The ledger samples it
 * at the start and again at the completion (sampled_bytes: a fixed number
 * of words spread over it, so that a large buffer costs no more than a
 * small one); changed, the program stops, naming the call.
 * Its buffers, send and receive, must not die either: MPI writes a receive
 * buffer until the request completes, over whatever then uses that memory.
 * A buffer on the stack of the thread that starts the call (stack.h) is
 * kept by address;
 * at each later MPI call and at the completion, one that lies below the
 * frame of the call now running was in a frame that has returned (the
 * frames of the functions still running are all above it), and the
 * program stops, naming the buffer and the call.
 * A receive buffer must not be read before the completion either: what
 * it holds then depends on when the data happened to arrive. An
 * MPI_Irecv of up to STAGED_MAX bytes (of a type without holes) receives
 * into a staging buffer of the ledger's instead, and its own buffer holds
 * 0xff in every byte (a NaN in fp32 and in bf16, as the cpu device's
 * pending copies hold) until the completion copies the staging buffer in:
 * code that reads it too early sees NaN every time, whatever the timing.
 * The cap keeps the staging small beside what the lessons' formulas let a
 * rank hold (their slack is 1 MiB; a rank has a few receives open). */
enum { KEPT_MAX = 4, SAMPLED_WORDS = 4096, STACKED_MAX = 2,
       STAGED_MAX = 64 << 10 };
typedef struct {
    unsigned char *staging;      /* where MPI receives, malloc'd */
    void *into;                  /* the receive's own buffer */
    size_t bytes;
    int count, source, tag;      /* the call's other arguments */
    MPI_Datatype type;
    MPI_Comm comm;
    /* A non-blocking collective's result buffer, staged: what it held at
     * the start, malloc'd, to compare at completion (NULL for a receive,
     * whose buffer holds 0xff meanwhile). */
    unsigned char *original;
} staged_receive;
typedef struct {
    int arrays;                  /* how many of the call's arrays */
    int length;                  /* ints each: the communicator's size */
    const int *where[KEPT_MAX];
    const char *name[KEPT_MAX];  /* the argument's name, for the message */
    int *copy;                   /* arrays * length ints, malloc'd */
    const unsigned char *sent;   /* the send buffer, NULL where none */
    uint64_t sent_bytes, sent_sample;
    int stacked;                 /* buffers on the stack, at most 2 */
    pthread_t stacked_thread;    /* whose stack */
    uintptr_t stacked_at[STACKED_MAX];
    const char *stacked_name[STACKED_MAX];  /* "send", "receive" */
    staged_receive staged;       /* a staged MPI_Irecv; else all 0 */
} kept_arguments;

/* The arrays of the call being started, filed by opened() with its
 * request. */
static kept_arguments entered_kept;

/* A sample of `bytes` bytes at `start`: every byte of the first and last
 * 64 and SAMPLED_WORDS words between, mixed into one number. */
static uint64_t sampled_bytes(const unsigned char *start, uint64_t bytes)
{
    uint64_t mixed = 0x9e3779b97f4a7c15u ^ bytes;
    uint64_t stride = bytes / SAMPLED_WORDS > 8 ? bytes / SAMPLED_WORDS : 1;
    for (uint64_t at = 0; at < bytes;) {
        mixed ^= start[at];
        mixed *= 0x100000001b3u;
        at += at < 64 || at + 64 >= bytes ? 1 : stride;
    }
    return mixed;
}

/* Before a non-blocking call that sends `count` elements of `type` from
 * `buffer` (not MPI_IN_PLACE, whose buffer MPI writes): kept with its
 * request. A type with holes between its elements is left unsampled. */
static void keep_send_buffer(const void *buffer, int count, MPI_Datatype type)
{
    MPI_Aint lower = 0, extent = 0;
    int size = 0;
    if (buffer == NULL || buffer == MPI_IN_PLACE || count <= 0 ||
        PMPI_Type_size(type, &size) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(type, &lower, &extent) != MPI_SUCCESS ||
        lower != 0 || extent != (MPI_Aint)size)
        return;
    entered_kept.sent = buffer;
    entered_kept.sent_bytes = (uint64_t)size * (uint64_t)count;
}

/* The bytes of `count` elements of `type` at `buffer` where the ledger
 * may stage them: a contiguous type with no holes, at most STAGED_MAX
 * bytes in all; else 0. */
static size_t stageable_bytes(const void *buffer, int count,
                              MPI_Datatype type)
{
    MPI_Aint lower = 0, extent = 0;
    int size = 0;
    if (buffer == NULL || count <= 0 ||
        PMPI_Type_size(type, &size) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(type, &lower, &extent) != MPI_SUCCESS ||
        lower != 0 || extent != (MPI_Aint)size || size <= 0 ||
        (uint64_t)size * (uint64_t)count > STAGED_MAX)
        return 0;
    return (size_t)size * (size_t)count;
}

static void refuse_overlap_in_flight(const char *call, const void *buffer,
                                     size_t bytes, int count);

/* Before an MPI_Irecv into `buffer`: where MPI is to receive instead (a
 * staging buffer that starts as a copy of it, so that a shorter message
 * leaves the rest as it was) while `buffer` holds 0xff, or `buffer`
 * itself where the receive is not staged. */
static void *stage_receive(void *buffer, int count, MPI_Datatype type,
                           int source, int tag, MPI_Comm comm)
{
    const size_t bytes = stageable_bytes(buffer, count, type);
    if (bytes == 0 || source == MPI_PROC_NULL)
        return buffer;
    refuse_overlap_in_flight("MPI_Irecv", buffer, bytes, count);
    unsigned char *staging = malloc(bytes);
    if (staging == NULL)
        return buffer;
    memcpy(staging, buffer, bytes);
    memset(buffer, 0xff, bytes);
    entered_kept.staged = (staged_receive){ staging, buffer, bytes, count,
                                            source, tag, type, comm, NULL };
    return staging;
}

/* Before a non-blocking collective that writes its result into `buffer`
 * (MPI_Iallreduce's receive buffer, in place or not): where MPI is to
 * write instead, a staging buffer that starts as a copy of it, or
 * `buffer` itself where the call is not staged. `buffer` stays as it was
 * until the completion copies the result in, and a change to it before
 * then is the program's own: a write into a buffer that MPI owns (a
 * division by P before the wait), whose effect depends on when MPI
 * happens to write the result. Staged up to STAGED_MAX bytes, as
 * receives are. */
static void *stage_result(void *buffer, int count, MPI_Datatype type)
{
    const size_t bytes = stageable_bytes(buffer, count, type);
    if (bytes == 0)
        return buffer;
    refuse_overlap_in_flight("MPI_Iallreduce", buffer, bytes, count);
    unsigned char *staging = malloc(bytes), *original = malloc(bytes);
    if (staging == NULL || original == NULL) {
        free(staging);
        free(original);
        return buffer;
    }
    memcpy(staging, buffer, bytes);
    memcpy(original, buffer, bytes);
    entered_kept.staged = (staged_receive){ staging, buffer, bytes, count,
                                            MPI_PROC_NULL, 0, type,
                                            MPI_COMM_NULL, original };
    return staging;
}

/* A staged receive, completed (or not started): its data into its own
 * buffer. */
static void unstage(kept_arguments *kept)
{
    staged_receive *staged = &kept->staged;
    if (staged->staging == NULL)
        return;
    memcpy(staged->into, staged->staging, staged->bytes);
    free(staged->staging);
    staged->staging = NULL;
    free(staged->original);
    staged->original = NULL;
}

/* Before a non-blocking call: its send and receive buffers (NULL where it
 * has none on this rank) that lie on the stack, kept with its request. */
static void keep_stacked(const void *sent, const void *received)
{
    const void *buffers[STACKED_MAX] = { sent, received };
    const char *names[STACKED_MAX] = { "send", "receive" };
    for (int k = 0; k < STACKED_MAX; k++)
        if (buffers[k] != NULL && buffers[k] != MPI_IN_PLACE &&
            stack_holds(buffers[k])) {
            entered_kept.stacked_thread = pthread_self();
            int at = entered_kept.stacked++;
            entered_kept.stacked_at[at] = (uintptr_t)buffers[k];
            entered_kept.stacked_name[at] = names[k];
        }
}

/* Before a non-blocking call with arrays of counts or displacements:
 * NAME, ARRAY pairs, `arrays` of them, each of `length` ints (a NULL
 * array, one the call does not read on this rank, is skipped). */
static void keep_arguments(int length, int arrays, ...)
{
    kept_arguments kept = entered_kept;
    kept.arrays = 0;
    kept.length = length;
    va_list list;
    va_start(list, arrays);
    for (int k = 0; k < arrays && k < KEPT_MAX; k++) {
        const char *name = va_arg(list, const char *);
        const int *where = va_arg(list, const int *);
        if (where == NULL || length <= 0)
            continue;
        kept.name[kept.arrays] = name;
        kept.where[kept.arrays++] = where;
    }
    va_end(list);
    entered_kept = kept;
}

/* The requests started and not yet completed, oldest first, with the call
 * that started each. A handle may be reused by MPI once completed, so a
 * completed one leaves the list at once. Nor is a handle always one
 * request's while open: MPICH gives every send that completed as it
 * started one shared, predefined handle. So each request also keeps the
 * place its start wrote the handle to, which tells such requests apart
 * when the program completes them there (find_open). */
typedef struct {
    MPI_Request handle;
    const MPI_Request *slot;  /* where its start wrote the handle */
    const char *way;          /* a point-to-point one's "to" or "from" */
    int peer, tag;
    call_kind kind;
    uint64_t received;  /* the bytes it was counted to receive */
    kept_arguments kept;
    bool tested;        /* a test form has seen it (defer_first_test) */
} open_request;

static open_request *open_requests;
static size_t open_count, open_capacity;
/* Whether the open requests hold a cpu device's memory open (opened). */
static bool requests_hold_device;

static void abort_after_message(void);

/* Before a staged receive or result into [buffer, buffer + bytes): the
 * buffer of a staged request still in flight that it overlaps stops the
 * program. Two requests that may write the same bytes leave in them
 * whichever completes last; with the buffers staged, the completions
 * would copy in over each other, and the message would blame a write of
 * the program's own. Most often a count or datatype too large, so that
 * one slice's request runs into the next slice's. */
static void refuse_overlap_in_flight(const char *call, const void *buffer,
                                     size_t bytes, int count)
{
    const uintptr_t begin = (uintptr_t)buffer, end = begin + bytes;
    for (size_t k = 0; k < open_count; k++) {
        const staged_receive *other = &open_requests[k].kept.staged;
        if (other->staging == NULL)
            continue;
        const uintptr_t other_begin = (uintptr_t)other->into,
                        other_end = other_begin + other->bytes;
        /* The same buffer again (a request on it left open, or its
         * handle overwritten) is left to the count of requests never
         * completed, which names the cause; only a buffer that runs into
         * another's is refused here. */
        if (end <= other_begin || other_end <= begin || other_begin == begin)
            continue;
        fprintf(stderr, "comm ledger: rank %d: the buffer given to %s "
                "(%zu bytes at %p: %d elements of %zu bytes) overlaps the "
                "one of an %s still in flight (%zu bytes at %p): until a "
                "request completes its buffer is MPI's, and two requests "
                "may not write the same bytes. Is the count in elements "
                "of the datatype, and the datatype the buffer's (MPI_FLOAT "
                "for float: MPI_DOUBLE moves 8 bytes an element)? Does each "
                "part start where the one before it ends?%s%s%s\n",
                world_rank(), call, bytes, buffer, count,
                count > 0 ? bytes / (size_t)count : 0,
                ledger[open_requests[k].kind].name, other->bytes,
                other->into, steps_current()[0] ? " (the rank was in " : "",
                steps_current(), steps_current()[0] ? ")" : "");
        abort_after_message();
    }
}

/* Ends every rank, after this one's message on stderr. stderr is a pipe
 * that the launcher forwards, and MPI_Abort has the launcher kill every
 * process: MPICH's launcher was seen to kill this one before it had
 * forwarded the last line (1 run in 4). A tenth of a second lets it pass
 * the line on first; an abort is no place to save time. */
static void abort_after_message(void)
{
    fflush(stderr);
    struct timespec pause = { 0, 100 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    PMPI_Abort(MPI_COMM_WORLD, 1);
}

static void abort_out_of_memory(const char *what)
{
    fprintf(stderr, "comm ledger: rank %d: out of memory for %s\n",
            world_rank(), what);
    abort_after_message();
}

/* After a call that started *request: remember it, unless it failed.
 * While any request is open, a cpu device's memory stays open too: MPI
 * may go on reading or writing the request's buffers in any later MPI
 * call, and another rank's MPI may read this rank's send buffer directly
 * (Open MPI's shared-memory transport does) while this rank runs code of
 * its own. */
static int opened(call_kind kind, int result, const MPI_Request *request)
{
    kept_arguments kept = entered_kept;
    entered_kept = (kept_arguments){ 0 };
    if (result != MPI_SUCCESS || request == NULL ||
        *request == MPI_REQUEST_NULL) {
        unstage(&kept);
        return leave(result);
    }
    if (kept.arrays > 0) {
        size_t ints = (size_t)kept.arrays * (size_t)kept.length;
        kept.copy = malloc(ints * sizeof *kept.copy);
        if (kept.copy == NULL)
            abort_out_of_memory("a copy of a call's counts");
        for (int k = 0; k < kept.arrays; k++)
            memcpy(kept.copy + (size_t)k * (size_t)kept.length, kept.where[k],
                   (size_t)kept.length * sizeof *kept.copy);
    }
    if (open_count == open_capacity) {
        size_t capacity = open_capacity ? 2 * open_capacity : 64;
        open_request *grown = realloc(open_requests,
                                      capacity * sizeof *grown);
        if (grown == NULL)
            abort_out_of_memory("its open requests");
        open_requests = grown;
        open_capacity = capacity;
    }
    open_requests[open_count].handle = *request;
    open_requests[open_count].slot = request;
    open_requests[open_count].way = entered_way;
    open_requests[open_count].peer = entered_peer;
    open_requests[open_count].tag = entered_tag;
    entered_way = NULL;
    open_requests[open_count].tested = false;
    open_requests[open_count].kind = kind;
    open_requests[open_count].received = entered_received;
    if (open_count++ == 0)
        requests_hold_device = device_access_begin();
    /* Once the device's memory is open: a send buffer may lie there. */
    if (kept.sent != NULL)
        kept.sent_sample = sampled_bytes(kept.sent, kept.sent_bytes);
    open_requests[open_count - 1].kept = kept;
    return leave(result);
}

/* A kept stack buffer below `live_from` lies in a frame that has returned:
 * the program stops. `live_from` is the stack pointer of a function that
 * is running now (its caller's, at the call: __builtin_dwarf_cfa), above
 * which lie the frames of every function still running. */
static void check_frame(call_kind kind, const kept_arguments *kept,
                        uintptr_t live_from)
{
    for (int k = 0; k < kept->stacked; k++) {
        if (kept->stacked_at[k] >= live_from ||
            !pthread_equal(kept->stacked_thread, pthread_self()))
            continue;
        fprintf(stderr, "comm ledger: rank %d: the %s buffer given to %s "
                "lies in the stack frame of a function that has returned, "
                "and its request has not completed: MPI may %s it until "
                "the request completes, and that memory now belongs to "
                "other calls. Keep it in memory that lives as long as the "
                "request (the state your code keeps, or the heap), not in a "
                "local array of a function that returns before the "
                "wait%s%s%s\n", world_rank(), kept->stacked_name[k],
                ledger[kind].name,
                kept->stacked_name[k][0] == 's' ? "read" : "write",
                steps_current()[0] ? " (the rank was in " : "",
                steps_current(), steps_current()[0] ? ")" : "");
        abort_after_message();
    }
}

/* A staged collective result, at its completion: its buffer as it was
 * when the call started, or the program stops. */
static void check_staged_result(call_kind kind, const staged_receive *staged)
{
    if (staged->original != NULL &&
        memcmp(staged->into, staged->original, staged->bytes) != 0) {
        size_t at = 0;
        while (((const unsigned char *)staged->into)[at] ==
               staged->original[at])
            at++;
        fprintf(stderr, "comm ledger: rank %d: the result buffer given to "
                "%s (%zu bytes) was written before its request completed "
                "(its byte %zu changed): until the wait returns, the buffer "
                "belongs to MPI, which puts the result there when it "
                "likes, so what your code wrote is lost or mixed in. Use "
                "it (divide, scale, read) only after MPI_Wait or "
                "MPI_Waitall%s%s%s%s\n", world_rank(), ledger[kind].name,
                staged->bytes, at,
                ledger[CALL_Waitany].counts.calls +
                            ledger[CALL_Testany].counts.calls > 0
                    ? " (MPI_Waitany and MPI_Testany say in their index "
                      "which request they completed, in any order, not the "
                      "order of the starts)"
                    : "",
                steps_current()[0] ? " (the rank was in " : "",
                steps_current(), steps_current()[0] ? ")" : "");
        abort_after_message();
    }
}

/* At a request's completion: its arrays as they were when it started, or
 * the program stops. */
static void check_kept(call_kind kind, kept_arguments *kept)
{
    for (int a = 0; a < kept->arrays; a++)
        for (int r = 0; r < kept->length; r++) {
            int was = kept->copy[(size_t)a * (size_t)kept->length + (size_t)r];
            int is = kept->where[a][r];
            if (was == is)
                continue;
            fprintf(stderr, "comm ledger: rank %d: the %s array given to %s "
                    "changed before its request completed (element %d was "
                    "%d, is %d): MPI may read it until the request "
                    "completes, so it must stay as it was until then. Keep "
                    "it in memory that lives as long as the request (the "
                    "state your code keeps, or the heap), not in a local "
                    "array of a function that returns before the wait%s%s%s\n",
                    world_rank(), kept->name[a], ledger[kind].name, r, was,
                    is, steps_current()[0] ? " (the rank was in " : "",
                    steps_current(), steps_current()[0] ? ")" : "");
            abort_after_message();
        }
    check_staged_result(kind, &kept->staged);
    if (kept->sent != NULL &&
        sampled_bytes(kept->sent, kept->sent_bytes) != kept->sent_sample) {
        fprintf(stderr, "comm ledger: rank %d: the send buffer given to %s "
                "(%llu bytes) changed before its request completed: MPI may "
                "read it until the request completes, so it must stay as it "
                "was until then. Write it only after the wait, and keep it "
                "in memory that lives as long as the request (the state "
                "your code keeps, or the heap), not freed and not in a "
                "local array of a function that returns before the "
                "wait%s%s%s\n",
                world_rank(), ledger[kind].name,
                (unsigned long long)kept->sent_bytes,
                steps_current()[0] ? " (the rank was in " : "",
                steps_current(), steps_current()[0] ? ")" : "");
        abort_after_message();
    }
    free(kept->copy);
    kept->copy = NULL;
}

/* Whether a request's arrays and buffers are as check_kept wants them. */
static bool kept_intact(const kept_arguments *kept)
{
    for (int a = 0; a < kept->arrays; a++)
        if (memcmp(kept->copy + (size_t)a * (size_t)kept->length,
                   kept->where[a],
                   (size_t)kept->length * sizeof *kept->copy) != 0)
            return false;
    const staged_receive *staged = &kept->staged;
    if (staged->original != NULL &&
        memcmp(staged->into, staged->original, staged->bytes) != 0)
        return false;
    return kept->sent == NULL ||
           sampled_bytes(kept->sent, kept->sent_bytes) == kept->sent_sample;
}

/* The open request that `handle`, read from `slot`, stands for, or
 * open_count if none. The newest first: requests
 * are mostly completed soon after they are started. The one whose start
 * wrote this handle to this slot, if any; else, of the requests with this
 * handle (a copied handle, shared by several requests only where MPI
 * shares it), the newest whose buffers are as they were, so that a
 * program that did nothing wrong is never blamed for another request's
 * buffer; else the newest. */
static size_t find_open(MPI_Request handle, const MPI_Request *slot)
{
    size_t newest = open_count;
    for (size_t k = open_count; k-- > 0;)
        if (open_requests[k].handle == handle) {
            if (open_requests[k].slot == slot)
                return k;
            if (newest == open_count)
                newest = k;
        }
    if (newest == open_count)
        return open_count;
    for (size_t k = newest + 1; k-- > 0;)
        if (open_requests[k].handle == handle &&
            kept_intact(&open_requests[k].kept))
            return k;
    return newest;
}

static void closed(MPI_Request handle, const MPI_Request *slot)
{
    size_t k = find_open(handle, slot);
    if (k == open_count)
        return;
    check_kept(open_requests[k].kind, &open_requests[k].kept);
    unstage(&open_requests[k].kept);
    memmove(&open_requests[k], &open_requests[k + 1],
            (open_count - k - 1) * sizeof *open_requests);
    if (--open_count == 0 && requests_hold_device) {
        requests_hold_device = false;
        device_access_end();
    }
}

/* No open request's stack buffer lies below `live_from`. */
static void check_frames(uintptr_t live_from)
{
    for (size_t k = 0; k < open_count; k++)
        check_frame(open_requests[k].kind, &open_requests[k].kept,
                    live_from);
}

/* What a request array held before a Wait or Test form: the slots that
 * were requests then and are MPI_REQUEST_NULL afterwards were completed
 * (or freed) by the call. Up to SMALL handles on the caller's stack. */
enum { SMALL = 64 };

static MPI_Request *snapshot(int count, const MPI_Request requests[],
                             MPI_Request small[SMALL])
{
    if (count <= 0 || requests == NULL)
        return NULL;
    MPI_Request *copy = count <= SMALL ? small
                                       : malloc((size_t)count * sizeof *copy);
    if (copy == NULL)
        abort_out_of_memory("a copy of the requests");
    memcpy(copy, requests, (size_t)count * sizeof *copy);
    return copy;
}

static void settle(MPI_Request *before, const MPI_Request after[], int count,
                   MPI_Request small[SMALL])
{
    if (before == NULL)
        return;
    for (int k = 0; k < count; k++)
        if (before[k] != MPI_REQUEST_NULL && after[k] == MPI_REQUEST_NULL)
            closed(before[k], &after[k]);
    if (before != small)
        free(before);
}

/* After a Wait or Test form that failed: the elements of its array that
 * no call of this program started, if any, said on stderr before the
 * caller's own report of the error. Most often the array is indexed one
 * off from where the starts wrote their requests, and MPI's own word
 * ("invalid request") does not say which element. Only a call that has
 * already failed is looked at: requests the ledger does not follow
 * (MPI_Comm_idup's, a persistent one's) are never refused. */
static void explain_failure(const char *call, int result,
                            const MPI_Request before[], int count)
{
    if (result == MPI_SUCCESS || before == NULL)
        return;
    int unknown = 0, first_unknown = -1, known = 0;
    call_kind kind = CALL_KINDS;
    for (int k = 0; k < count; k++) {
        if (before[k] == MPI_REQUEST_NULL)
            continue;
        bool found = false;
        for (size_t r = 0; r < open_count && !found; r++)
            if (open_requests[r].handle == before[k]) {
                found = true;
                kind = open_requests[r].kind;
            }
        if (found) {
            known++;
        } else if (unknown++ == 0) {
            first_unknown = k;
        }
    }
    if (unknown == 0)
        return;
    const size_t left_out = open_count - (size_t)known;
    char which[96];
    if (unknown == 1)
        snprintf(which, sizeof which, "element %d of the %d requests it was "
                 "given is not a request", first_unknown, count);
    else
        snprintf(which, sizeof which, "%d of the %d requests it was given "
                 "(the first, element %d) are not requests", unknown, count,
                 first_unknown);
    fprintf(stderr, "comm ledger: rank %d: %s failed: %s any call of this "
            "program started%s%s%s%s. Give it exactly the elements your "
            "starts wrote: check the element each start writes (the first "
            "at 0) and the count given to %s%s%s%s\n",
            world_rank(), call, which,
            known > 0 ? "; the others were started by " : "",
            known > 0 ? ledger[kind].name : "",
            left_out > 0 ? (known > 0 ? ", and " : "; ") : "",
            left_out > 0 ? "requests that were started are left out of "
                           "the array" : "",
            call, steps_current()[0] ? " (the rank was in " : "",
            steps_current(), steps_current()[0] ? ")" : "");
}

size_t comm_ledger_open_requests(const char **first_call)
{
    if (first_call != NULL)
        *first_call = open_count > 0 ? ledger[open_requests[0].kind].name
                                     : NULL;
    return open_count;
}

void comm_ledger_let_requests_finish(double seconds)
{
    const double until = timer_now() + seconds;
    for (;;) {
        bool all_done = true;
        for (size_t k = 0; k < open_count; k++) {
            int done = 0;
            if (PMPI_Request_get_status(open_requests[k].handle, &done,
                                        MPI_STATUS_IGNORE) != MPI_SUCCESS)
                return;
            all_done = all_done && done;
        }
        if (all_done || timer_now() >= until)
            return;
        const struct timespec pause = { 0, 100 * 1000 };
        nanosleep(&pause, NULL);
    }
}

size_t comm_ledger_open_requests_of(const char *call, uint64_t *received)
{
    size_t count = 0;
    uint64_t bytes = 0;
    for (size_t k = 0; k < open_count; k++)
        if (strcmp(ledger[open_requests[k].kind].name, call) == 0) {
            count++;
            bytes += open_requests[k].received;
        }
    if (received != NULL)
        *received = bytes;
    return count;
}

/* ---- starting MPI: the stack of the thread that will call it ----
 * (stack.h: before a boundary hides what glibc reads for it. Lesson 03's
 * driver defines MPI_Init_thread itself, and calls stack_find_main.) */

int MPI_Init(int *argc, char ***argv)
{
    int result = PMPI_Init(argc, argv);
    stack_find_main();
    return result;
}

/* ---- refused: what the ledger cannot count ---- */

static int refuse_and_abort(const char *call, const char *what)
{
    fprintf(stderr, "comm ledger: rank %d called %s: %s, which the "
            "communication ledger does not count; code in these lessons "
            "may use only the calls it counts (common/comm_ledger.h)\n",
            world_rank(), call, what);
    abort_after_message();
    return MPI_ERR_OTHER; /* not reached: MPI_Abort ends every rank */
}

#define PERSISTENT "a persistent request"
#define ONE_SIDED "one-sided communication (an RMA window)"
#define NEIGHBOURS "a neighbourhood collective"

int MPI_Send_init(const void *buf, int count, MPI_Datatype type, int dest,
                  int tag, MPI_Comm comm, MPI_Request *request)
{
    (void)buf, (void)count, (void)type, (void)dest, (void)tag, (void)comm;
    (void)request;
    return refuse_and_abort("MPI_Send_init", PERSISTENT);
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype type, int dest,
                   int tag, MPI_Comm comm, MPI_Request *request)
{
    (void)buf, (void)count, (void)type, (void)dest, (void)tag, (void)comm;
    (void)request;
    return refuse_and_abort("MPI_Bsend_init", PERSISTENT);
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype type, int dest,
                   int tag, MPI_Comm comm, MPI_Request *request)
{
    (void)buf, (void)count, (void)type, (void)dest, (void)tag, (void)comm;
    (void)request;
    return refuse_and_abort("MPI_Ssend_init", PERSISTENT);
}

int MPI_Rsend_init(const void *buf, int count, MPI_Datatype type, int dest,
                   int tag, MPI_Comm comm, MPI_Request *request)
{
    (void)buf, (void)count, (void)type, (void)dest, (void)tag, (void)comm;
    (void)request;
    return refuse_and_abort("MPI_Rsend_init", PERSISTENT);
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source,
                  int tag, MPI_Comm comm, MPI_Request *request)
{
    (void)buf, (void)count, (void)type, (void)source, (void)tag, (void)comm;
    (void)request;
    return refuse_and_abort("MPI_Recv_init", PERSISTENT);
}

/* Every persistent request, of any kind an MPI library offers (persistent
 * collectives, partitioned communication), runs through these. */
int MPI_Start(MPI_Request *request)
{
    (void)request;
    return refuse_and_abort("MPI_Start", PERSISTENT);
}

int MPI_Startall(int count, MPI_Request requests[])
{
    (void)count, (void)requests;
    return refuse_and_abort("MPI_Startall", PERSISTENT);
}

/* No window, no MPI_Put, MPI_Get, MPI_Accumulate or shared-memory loads. */
int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info,
                   MPI_Comm comm, MPI_Win *win)
{
    (void)base, (void)size, (void)disp_unit, (void)info, (void)comm;
    (void)win;
    return refuse_and_abort("MPI_Win_create", ONE_SIDED);
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info,
                     MPI_Comm comm, void *baseptr, MPI_Win *win)
{
    (void)size, (void)disp_unit, (void)info, (void)comm, (void)baseptr;
    (void)win;
    return refuse_and_abort("MPI_Win_allocate", ONE_SIDED);
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info,
                            MPI_Comm comm, void *baseptr, MPI_Win *win)
{
    (void)size, (void)disp_unit, (void)info, (void)comm, (void)baseptr;
    (void)win;
    return refuse_and_abort("MPI_Win_allocate_shared", ONE_SIDED);
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
    (void)info, (void)comm, (void)win;
    return refuse_and_abort("MPI_Win_create_dynamic", ONE_SIDED);
}

int MPI_Neighbor_allgather(const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype,
                           MPI_Comm comm)
{
    (void)sendbuf, (void)sendcount, (void)sendtype, (void)recvbuf;
    (void)recvcount, (void)recvtype, (void)comm;
    return refuse_and_abort("MPI_Neighbor_allgather", NEIGHBOURS);
}

int MPI_Ineighbor_allgather(const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf,
                            int recvcount, MPI_Datatype recvtype,
                            MPI_Comm comm, MPI_Request *request)
{
    (void)sendbuf, (void)sendcount, (void)sendtype, (void)recvbuf;
    (void)recvcount, (void)recvtype, (void)comm, (void)request;
    return refuse_and_abort("MPI_Ineighbor_allgather", NEIGHBOURS);
}

int MPI_Neighbor_allgatherv(const void *sendbuf, int sendcount,
                            MPI_Datatype sendtype, void *recvbuf,
                            const int recvcounts[], const int displs[],
                            MPI_Datatype recvtype, MPI_Comm comm)
{
    (void)sendbuf, (void)sendcount, (void)sendtype, (void)recvbuf;
    (void)recvcounts, (void)displs, (void)recvtype, (void)comm;
    return refuse_and_abort("MPI_Neighbor_allgatherv", NEIGHBOURS);
}

int MPI_Ineighbor_allgatherv(const void *sendbuf, int sendcount,
                             MPI_Datatype sendtype, void *recvbuf,
                             const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm,
                             MPI_Request *request)
{
    (void)sendbuf, (void)sendcount, (void)sendtype, (void)recvbuf;
    (void)recvcounts, (void)displs, (void)recvtype, (void)comm;
    (void)request;
    return refuse_and_abort("MPI_Ineighbor_allgatherv", NEIGHBOURS);
}

int MPI_Neighbor_alltoall(const void *sendbuf, int sendcount,
                          MPI_Datatype sendtype, void *recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm)
{
    (void)sendbuf, (void)sendcount, (void)sendtype, (void)recvbuf;
    (void)recvcount, (void)recvtype, (void)comm;
    return refuse_and_abort("MPI_Neighbor_alltoall", NEIGHBOURS);
}

int MPI_Ineighbor_alltoall(const void *sendbuf, int sendcount,
                           MPI_Datatype sendtype, void *recvbuf,
                           int recvcount, MPI_Datatype recvtype,
                           MPI_Comm comm, MPI_Request *request)
{
    (void)sendbuf, (void)sendcount, (void)sendtype, (void)recvbuf;
    (void)recvcount, (void)recvtype, (void)comm, (void)request;
    return refuse_and_abort("MPI_Ineighbor_alltoall", NEIGHBOURS);
}

int MPI_Neighbor_alltoallv(const void *sendbuf, const int sendcounts[],
                           const int sdispls[], MPI_Datatype sendtype,
                           void *recvbuf, const int recvcounts[],
                           const int rdispls[], MPI_Datatype recvtype,
                           MPI_Comm comm)
{
    (void)sendbuf, (void)sendcounts, (void)sdispls, (void)sendtype;
    (void)recvbuf, (void)recvcounts, (void)rdispls, (void)recvtype;
    (void)comm;
    return refuse_and_abort("MPI_Neighbor_alltoallv", NEIGHBOURS);
}

int MPI_Ineighbor_alltoallv(const void *sendbuf, const int sendcounts[],
                            const int sdispls[], MPI_Datatype sendtype,
                            void *recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype,
                            MPI_Comm comm, MPI_Request *request)
{
    (void)sendbuf, (void)sendcounts, (void)sdispls, (void)sendtype;
    (void)recvbuf, (void)recvcounts, (void)rdispls, (void)recvtype;
    (void)comm, (void)request;
    return refuse_and_abort("MPI_Ineighbor_alltoallv", NEIGHBOURS);
}

int MPI_Neighbor_alltoallw(const void *sendbuf, const int sendcounts[],
                           const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void *recvbuf,
                           const int recvcounts[], const MPI_Aint rdispls[],
                           const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    (void)sendbuf, (void)sendcounts, (void)sdispls, (void)sendtypes;
    (void)recvbuf, (void)recvcounts, (void)rdispls, (void)recvtypes;
    (void)comm;
    return refuse_and_abort("MPI_Neighbor_alltoallw", NEIGHBOURS);
}

int MPI_Ineighbor_alltoallw(const void *sendbuf, const int sendcounts[],
                            const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void *recvbuf,
                            const int recvcounts[], const MPI_Aint rdispls[],
                            const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Request *request)
{
    (void)sendbuf, (void)sendcounts, (void)sdispls, (void)sendtypes;
    (void)recvbuf, (void)recvcounts, (void)rdispls, (void)recvtypes;
    (void)comm, (void)request;
    return refuse_and_abort("MPI_Ineighbor_alltoallw", NEIGHBOURS);
}

/* ---- the byte models of the header, shared by each call's forms ---- */

/* The bytes a point-to-point send of `count` elements of `type` to `dest`
 * puts between ranks (none to MPI_PROC_NULL or to itself), its message
 * counted under `kind` where there is one. */
static uint64_t message_to(call_kind kind, int dest, MPI_Comm comm,
                           MPI_Datatype type, int count)
{
    if (!crosses(dest, comm))
        return 0;
    ledger[kind].counts.messages++;
    comm_counts *on = counts_on(comm);
    if (on != NULL)
        on->messages++;
    return type_bytes(type, count);
}

/* After enter: the call this rank is inside, for the steps file, with its
 * peer and tag ("MPI_Recv from rank 1, tag 5"), so that a deadlock's
 * report says which message each rank waited for. `way` is "to" or
 * "from"; a rank of another communicator than MPI_COMM_WORLD is said to
 * be one of its communicator's. */
/* "to rank 1, tag 5" (or "from any rank, any tag") into `text`; a rank
 * of a communicator other than MPI_COMM_WORLD said to be one of its
 * communicator's where `elsewhere`. */
static void describe_message(char *text, size_t len, const char *way,
                             int peer, int tag, bool elsewhere)
{
    char rank[48], tag_text[32];
    if (peer == MPI_ANY_SOURCE)
        snprintf(rank, sizeof rank, "any rank");
    else
        snprintf(rank, sizeof rank, "rank %d%s", peer,
                 elsewhere ? " of its communicator" : "");
    if (tag == MPI_ANY_TAG)
        snprintf(tag_text, sizeof tag_text, "any tag");
    else
        snprintf(tag_text, sizeof tag_text, "tag %d", tag);
    snprintf(text, len, "%s %s, %s", way, rank, tag_text);
}

static void say_peer(call_kind kind, const char *way, int peer, int tag,
                     MPI_Comm comm)
{
    if (peer == MPI_PROC_NULL)
        return;
    int same = MPI_UNEQUAL;
    PMPI_Comm_compare(comm, MPI_COMM_WORLD, &same);
    char message[96], text[STEPS_FIELD + 96];
    describe_message(message, sizeof message, way, peer, tag,
                     same != MPI_IDENT && same != MPI_CONGRUENT);
    snprintf(text, sizeof text, "%s %s", ledger[kind].name, message);
    steps_in_call(text);
}

static ALWAYS_INLINE void count_send(call_kind kind, MPI_Datatype type,
                                     int count, int dest, MPI_Comm comm)
{
    enter(kind, message_to(kind, dest, comm, type, count), 0, comm);
}

static ALWAYS_INLINE void count_bcast(call_kind kind, MPI_Datatype type,
                                      int count, int root, MPI_Comm comm)
{
    uint64_t bytes = type_bytes(type, count);
    if (comm_rank(comm) == root)
        enter(kind, (uint64_t)(comm_size(comm) - 1) * bytes, 0, comm);
    else
        enter(kind, 0, bytes, comm);
}

static ALWAYS_INLINE void count_gather(call_kind kind, uint64_t own,
                                       uint64_t from_others, int root,
                                       MPI_Comm comm)
{
    if (comm_rank(comm) == root)
        enter(kind, 0, from_others, comm);
    else
        enter(kind, own, 0, comm);
}

static ALWAYS_INLINE void count_scatter(call_kind kind, uint64_t to_others,
                                        uint64_t own, int root, MPI_Comm comm)
{
    if (comm_rank(comm) == root)
        enter(kind, to_others, 0, comm);
    else
        enter(kind, 0, own, comm);
}

static ALWAYS_INLINE void count_allgatherv(call_kind kind,
                                           const int recvcounts[],
                                           MPI_Datatype recvtype, MPI_Comm comm)
{
    int size = comm_size(comm), me = comm_rank(comm);
    /* With MPI_IN_PLACE the own part is already in recvbuf. */
    enter(kind, (uint64_t)(size - 1) * type_bytes(recvtype, recvcounts[me]),
          others(recvcounts, size, me, recvtype), comm);
}

static ALWAYS_INLINE void count_reduce_scatter(call_kind kind,
                                               const int recvcounts[],
                                               MPI_Datatype type, MPI_Comm comm)
{
    int size = comm_size(comm), me = comm_rank(comm);
    enter(kind, others(recvcounts, size, me, type),
          (uint64_t)(size - 1) * type_bytes(type, recvcounts[me]), comm);
}

static uint64_t allreduce_volume(MPI_Datatype type, int count, MPI_Comm comm)
{
    int size = comm_size(comm);
    return 2 * (uint64_t)(size - 1) * type_bytes(type, count) /
           (uint64_t)size;
}

static ALWAYS_INLINE void
count_alltoallv(call_kind kind, const int sendcounts[], MPI_Datatype sendtype,
                const int recvcounts[], MPI_Datatype recvtype, MPI_Comm comm)
{
    int size = comm_size(comm), me = comm_rank(comm);
    enter(kind, others(sendcounts, size, me, sendtype),
          others(recvcounts, size, me, recvtype), comm);
}

/* ---- point to point ---- */

/* Whether a standard-mode send completes only once its receive has
 * started (comm_ledger_send_synchronously). */
static bool synchronous_sends;

void comm_ledger_send_synchronously(void)
{
    synchronous_sends = true;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
             MPI_Comm comm)
{
    count_send(CALL_Send, type, count, dest, comm);
    say_peer(CALL_Send, "to", dest, tag, comm);
    return leave(synchronous_sends
                     ? PMPI_Ssend(buf, count, type, dest, tag, comm)
                     : PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm)
{
    count_send(CALL_Ssend, type, count, dest, comm);
    say_peer(CALL_Ssend, "to", dest, tag, comm);
    return leave(PMPI_Ssend(buf, count, type, dest, tag, comm));
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm)
{
    count_send(CALL_Bsend, type, count, dest, comm);
    say_peer(CALL_Bsend, "to", dest, tag, comm);
    return leave(PMPI_Bsend(buf, count, type, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm)
{
    count_send(CALL_Rsend, type, count, dest, comm);
    say_peer(CALL_Rsend, "to", dest, tag, comm);
    return leave(PMPI_Rsend(buf, count, type, dest, tag, comm));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm, MPI_Request *request)
{
    count_send(CALL_Isend, type, count, dest, comm);
    remember_peer("to", dest, tag);
    keep_send_buffer(buf, count, type);
    keep_stacked(buf, NULL);
    return opened(CALL_Isend,
                  synchronous_sends
                      ? PMPI_Issend(buf, count, type, dest, tag, comm,
                                    request)
                      : PMPI_Isend(buf, count, type, dest, tag, comm,
                                   request),
                  request);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest,
               int tag, MPI_Comm comm, MPI_Request *request)
{
    count_send(CALL_Issend, type, count, dest, comm);
    remember_peer("to", dest, tag);
    keep_send_buffer(buf, count, type);
    keep_stacked(buf, NULL);
    return opened(CALL_Issend,
                  PMPI_Issend(buf, count, type, dest, tag, comm, request),
                  request);
}

int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest,
               int tag, MPI_Comm comm, MPI_Request *request)
{
    count_send(CALL_Ibsend, type, count, dest, comm);
    remember_peer("to", dest, tag);
    keep_send_buffer(buf, count, type);
    keep_stacked(buf, NULL);
    return opened(CALL_Ibsend,
                  PMPI_Ibsend(buf, count, type, dest, tag, comm, request),
                  request);
}

int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest,
               int tag, MPI_Comm comm, MPI_Request *request)
{
    count_send(CALL_Irsend, type, count, dest, comm);
    remember_peer("to", dest, tag);
    keep_send_buffer(buf, count, type);
    keep_stacked(buf, NULL);
    return opened(CALL_Irsend,
                  PMPI_Irsend(buf, count, type, dest, tag, comm, request),
                  request);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
             MPI_Comm comm, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *used = status == MPI_STATUS_IGNORE ? &local : status;
    enter(CALL_Recv, 0, 0, comm);
    say_peer(CALL_Recv, "from", source, tag, comm);
    int result = PMPI_Recv(buf, count, type, source, tag, comm, used);
    int arrived = 0;
    if (result == MPI_SUCCESS && source != MPI_PROC_NULL &&
        crosses(used->MPI_SOURCE, comm) &&
        PMPI_Get_count(used, type, &arrived) == MPI_SUCCESS)
        add_received(CALL_Recv, comm, type_bytes(type, arrived));
    return leave(result);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag,
              MPI_Comm comm, MPI_Request *request)
{
    enter(CALL_Irecv, 0, crosses(source, comm) ? type_bytes(type, count) : 0,
          comm);
    remember_peer("from", source, tag);
    keep_stacked(NULL, buf);
    void *into = stage_receive(buf, count, type, source, tag, comm);
    return opened(CALL_Irecv,
                  PMPI_Irecv(into, count, type, source, tag, comm, request),
                  request);
}

/* MPI requires a send-receive's two buffers to be apart, and does not
 * check it: one that overlaps the other delivers whatever the library's
 * order of copies makes of it. Stops the run, naming the call. */
static void refuse_overlap(const char *call, const void *sendbuf,
                           int sendcount, MPI_Datatype sendtype,
                           const void *recvbuf, int recvcount,
                           MPI_Datatype recvtype)
{
    const uintptr_t send = (uintptr_t)sendbuf, receive = (uintptr_t)recvbuf;
    const uint64_t sent = type_bytes(sendtype, sendcount);
    const uint64_t received = type_bytes(recvtype, recvcount);
    if (sent == 0 || received == 0 || send >= receive + received ||
        receive >= send + sent)
        return;
    /* The very same memory both ways is most often a step that sends the
     * piece it means to receive (a wrong index), not a missing buffer. */
    const char *same = send == receive
        ? "The same memory sent and received: does this step send the very "
          "piece it should receive (check which piece each is)? If not, "
        : "";
    fprintf(stderr, "comm ledger: rank %d: %s was given a receive buffer "
            "(%p, %llu bytes) that overlaps its send buffer (%p, %llu "
            "bytes): MPI requires the two apart, and what arrives then "
            "depends on the library. %s%seceive into a buffer of its own "
            "(then add or copy it where it belongs), and give each side the "
            "count of its own piece, in elements of its datatype (a count "
            "too large, or a wider datatype, makes a buffer reach into the "
            "other)%s%s%s\n", world_rank(),
            call, recvbuf, (unsigned long long)received, sendbuf,
            (unsigned long long)sent, same, same[0] ? "r" : "R",
            steps_current()[0] ? " (the rank was in " : "", steps_current(),
            steps_current()[0] ? ")" : "");
    abort_after_message();
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 int dest, int sendtag, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                 MPI_Status *status)
{
    refuse_overlap("MPI_Sendrecv", sendbuf, sendcount, sendtype, recvbuf,
                   recvcount, recvtype);
    MPI_Status local;
    MPI_Status *used = status == MPI_STATUS_IGNORE ? &local : status;
    enter(CALL_Sendrecv,
          message_to(CALL_Sendrecv, dest, comm, sendtype, sendcount), 0, comm);
    int result = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag,
                               recvbuf, recvcount, recvtype, source, recvtag,
                               comm, used);
    int arrived = 0;
    if (result == MPI_SUCCESS && source != MPI_PROC_NULL &&
        crosses(used->MPI_SOURCE, comm) &&
        PMPI_Get_count(used, recvtype, &arrived) == MPI_SUCCESS)
        add_received(CALL_Sendrecv, comm, type_bytes(recvtype, arrived));
    return leave(result);
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest,
                         int sendtag, int source, int recvtag, MPI_Comm comm,
                         MPI_Status *status)
{
    enter(CALL_Sendrecv_replace,
          message_to(CALL_Sendrecv_replace, dest, comm, type, count),
          crosses(source, comm) ? type_bytes(type, count) : 0, comm);
    return leave(PMPI_Sendrecv_replace(buf, count, type, dest, sendtag,
                                       source, recvtag, comm, status));
}

#if MPI_VERSION >= 4
int MPI_Isendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  int dest, int sendtag, void *recvbuf, int recvcount,
                  MPI_Datatype recvtype, int source, int recvtag,
                  MPI_Comm comm, MPI_Request *request)
{
    refuse_overlap("MPI_Isendrecv", sendbuf, sendcount, sendtype, recvbuf,
                   recvcount, recvtype);
    enter(CALL_Isendrecv,
          message_to(CALL_Isendrecv, dest, comm, sendtype, sendcount),
          crosses(source, comm) ? type_bytes(recvtype, recvcount) : 0, comm);
    keep_send_buffer(sendbuf, sendcount, sendtype);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Isendrecv,
                  PMPI_Isendrecv(sendbuf, sendcount, sendtype, dest, sendtag,
                                 recvbuf, recvcount, recvtype, source,
                                 recvtag, comm, request),
                  request);
}

int MPI_Isendrecv_replace(void *buf, int count, MPI_Datatype type, int dest,
                          int sendtag, int source, int recvtag, MPI_Comm comm,
                          MPI_Request *request)
{
    enter(CALL_Isendrecv_replace,
          message_to(CALL_Isendrecv_replace, dest, comm, type, count),
          crosses(source, comm) ? type_bytes(type, count) : 0, comm);
    keep_stacked(NULL, buf);
    return opened(CALL_Isendrecv_replace,
                  PMPI_Isendrecv_replace(buf, count, type, dest, sendtag,
                                         source, recvtag, comm, request),
                  request);
}
#endif

/* ---- completing requests ---- */

/* After enter of a Wait form: the call this rank is inside, for the
 * steps file, with the message of the first open point-to-point request
 * it waits for ("MPI_Wait for MPI_Isend to rank 1, tag 3"), so that a
 * deadlock's report says which. */
static void say_waiting(call_kind kind, int count,
                        const MPI_Request requests[])
{
    int waiting = 0;
    size_t first = open_count;
    for (int k = 0; requests != NULL && k < count; k++) {
        if (requests[k] == MPI_REQUEST_NULL)
            continue;
        size_t at = find_open(requests[k], &requests[k]);
        if (at == open_count || open_requests[at].way == NULL ||
            open_requests[at].peer == MPI_PROC_NULL)
            continue;
        if (waiting++ == 0)
            first = at;
    }
    if (waiting == 0)
        return;
    const open_request *r = &open_requests[first];
    char message[96], more[32] = "", text[STEPS_FIELD + 160];
    describe_message(message, sizeof message, r->way, r->peer, r->tag,
                     false);
    if (waiting > 1)
        snprintf(more, sizeof more, " (and %d more)", waiting - 1);
    snprintf(text, sizeof text, "%s for %s %s%s", ledger[kind].name,
             ledger[r->kind].name, message, more);
    steps_in_call(text);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    enter(CALL_Wait, 0, 0, MPI_COMM_NULL);
    say_waiting(CALL_Wait, 1, request);
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(1, request, small);
    int result = PMPI_Wait(request, status);
    explain_failure("MPI_Wait", result, before, 1);
    settle(before, request, 1, small);
    return leave(result);
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    enter(CALL_Waitall, 0, 0, MPI_COMM_NULL);
    say_waiting(CALL_Waitall, count, requests);
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(count, requests, small);
    int result = PMPI_Waitall(count, requests, statuses);
    explain_failure("MPI_Waitall", result, before, count);
    settle(before, requests, count, small);
    return leave(result);
}

/* MPI_Waitany and MPI_Testany may return any request that has completed,
 * and MPI libraries mostly return the first in the array, which is also
 * the first started: code that takes the k-th return for the k-th start
 * (dividing slice k, not slice *index) then works by chance. The ledger
 * returns the last one in the array that has completed, as MPI allows, so
 * that such code meets an order MPI does not promise. Into *index and
 * *status, with *flag 1; *flag 0 when none has completed yet. */
static int last_completed(int count, MPI_Request requests[], int *index,
                          MPI_Status *status, int *flag)
{
    *flag = 0;
    if (requests == NULL)
        return MPI_SUCCESS;
    for (int k = count - 1; k >= 0; k--) {
        if (requests[k] == MPI_REQUEST_NULL)
            continue;
        int result = PMPI_Test(&requests[k], flag, status);
        if (result != MPI_SUCCESS || *flag) {
            *index = k;
            return result;
        }
    }
    return MPI_SUCCESS;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index,
                MPI_Status *status)
{
    enter(CALL_Waitany, 0, 0, MPI_COMM_NULL);
    say_waiting(CALL_Waitany, count, requests);
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(count, requests, small);
    int done = 0;
    int result = last_completed(count, requests, index, status, &done);
    if (result == MPI_SUCCESS && !done)
        result = PMPI_Waitany(count, requests, index, status);
    explain_failure("MPI_Waitany", result, before, count);
    settle(before, requests, count, small);
    return leave(result);
}

int MPI_Waitsome(int count, MPI_Request requests[], int *done,
                 int indices[], MPI_Status statuses[])
{
    enter(CALL_Waitsome, 0, 0, MPI_COMM_NULL);
    say_waiting(CALL_Waitsome, count, requests);
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(count, requests, small);
    int result = PMPI_Waitsome(count, requests, done, indices, statuses);
    explain_failure("MPI_Waitsome", result, before, count);
    settle(before, requests, count, small);
    return leave(result);
}

/* The test forms may say a request is not complete yet until the
 * library has made progress on it, however soon its data arrived: on a
 * slower network, or another MPI, they do. Here the first test that
 * meets a request the ledger started, never tested and not seen complete
 * by MPI_Request_get_status, says not yet (flag 0, no request touched),
 * as such a library may. Code that tests until done tests again and goes
 * on; code that tests once and uses the data as if it had arrived meets
 * the requests it left open. True when it says not yet; every open
 * request of the array counts as tested from then on. */
static bool defer_first_test(int count, const MPI_Request requests[])
{
    bool deferred = false;
    for (int i = 0; requests != NULL && i < count; i++) {
        if (requests[i] == MPI_REQUEST_NULL)
            continue;
        for (size_t k = 0; k < open_count; k++)
            if (open_requests[k].handle == requests[i] &&
                !open_requests[k].tested) {
                open_requests[k].tested = true;
                deferred = true;
            }
    }
    return deferred;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    enter(CALL_Test, 0, 0, MPI_COMM_NULL);
    if (request != NULL && flag != NULL && defer_first_test(1, request)) {
        *flag = 0;
        return leave(MPI_SUCCESS);
    }
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(1, request, small);
    int result = PMPI_Test(request, flag, status);
    explain_failure("MPI_Test", result, before, 1);
    settle(before, request, 1, small);
    return leave(result);
}

int MPI_Testall(int count, MPI_Request requests[], int *flag,
                MPI_Status statuses[])
{
    enter(CALL_Testall, 0, 0, MPI_COMM_NULL);
    if (flag != NULL && count > 0 && defer_first_test(count, requests)) {
        *flag = 0;
        return leave(MPI_SUCCESS);
    }
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(count, requests, small);
    int result = PMPI_Testall(count, requests, flag, statuses);
    explain_failure("MPI_Testall", result, before, count);
    settle(before, requests, count, small);
    return leave(result);
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag,
                MPI_Status *status)
{
    enter(CALL_Testany, 0, 0, MPI_COMM_NULL);
    if (flag != NULL && index != NULL && count > 0 &&
        defer_first_test(count, requests)) {
        *flag = 0;
        *index = MPI_UNDEFINED;
        return leave(MPI_SUCCESS);
    }
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(count, requests, small);
    int result = last_completed(count, requests, index, status, flag);
    if (result == MPI_SUCCESS && !*flag)
        result = PMPI_Testany(count, requests, index, flag, status);
    explain_failure("MPI_Testany", result, before, count);
    settle(before, requests, count, small);
    return leave(result);
}

int MPI_Testsome(int count, MPI_Request requests[], int *done,
                 int indices[], MPI_Status statuses[])
{
    enter(CALL_Testsome, 0, 0, MPI_COMM_NULL);
    if (done != NULL && count > 0 && defer_first_test(count, requests)) {
        *done = 0;
        return leave(MPI_SUCCESS);
    }
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(count, requests, small);
    int result = PMPI_Testsome(count, requests, done, indices, statuses);
    explain_failure("MPI_Testsome", result, before, count);
    settle(before, requests, count, small);
    return leave(result);
}

/* The kept arguments of an open staged receive, or NULL. */
static kept_arguments *staged(const MPI_Request *request)
{
    size_t k = find_open(*request, request);
    return k < open_count && open_requests[k].kept.staged.staging != NULL
               ? &open_requests[k].kept : NULL;
}

/* A staged receive whose request is freed: no completion will copy its
 * data in, and MPI delivers it in its own time. So it is cancelled (MPI
 * completes a cancelled receive at once): if the data had already
 * arrived, it is copied in now; if not, the receive is posted again into
 * its own buffer, unstaged, and that request freed, as the caller asked.
 * (Request_free on a receive is rare: the MPI standard advises against it,
 * as nothing then says when the data is there.) */
static int release_staged(MPI_Request *request, kept_arguments *kept)
{
    MPI_Status status;
    int cancelled = 0, result = PMPI_Cancel(request);
    if (result == MPI_SUCCESS)
        result = PMPI_Wait(request, &status);
    if (result == MPI_SUCCESS)
        result = PMPI_Test_cancelled(&status, &cancelled);
    unstage(kept);
    if (result != MPI_SUCCESS || !cancelled)
        return result;
    const staged_receive *staged = &kept->staged;
    MPI_Request again;
    result = PMPI_Irecv(staged->into, staged->count, staged->type,
                        staged->source, staged->tag, staged->comm, &again);
    return result == MPI_SUCCESS ? PMPI_Request_free(&again) : result;
}

/* The call that started the open request at `request`, or NULL. */
static const char *started_by(const MPI_Request *request)
{
    size_t k = find_open(*request, request);
    return k < open_count ? ledger[open_requests[k].kind].name : NULL;
}

/* Released: MPI completes the operation in its own time, and the caller
 * has given up the handle. Not a non-blocking collective's: MPI makes
 * freeing one an error (MPI 4.1, section 6.12), and the caller could
 * never know when its result is there. */
int MPI_Request_free(MPI_Request *request)
{
    const char *call = request != NULL ? started_by(request) : NULL;
    if (call != NULL && strncmp(call, "MPI_I", 5) == 0 &&
        strstr(call, "send") == NULL && strstr(call, "recv") == NULL) {
        fprintf(stderr, "comm ledger: rank %d called MPI_Request_free on "
                "the request of %s, a non-blocking collective: MPI does not "
                "allow it (its result would be there at a time no code can "
                "know); complete it with MPI_Wait or MPI_Test, or their "
                "-all, -any and -some forms%s%s%s\n", world_rank(), call,
                steps_current()[0] ? " (the rank was in " : "",
                steps_current(), steps_current()[0] ? ")" : "");
        abort_after_message();
    }
    enter(CALL_Request_free, 0, 0, MPI_COMM_NULL);
    MPI_Request small[SMALL];
    MPI_Request *before = snapshot(1, request, small);
    kept_arguments *kept = request != NULL ? staged(request) : NULL;
    int result = kept != NULL ? release_staged(request, kept)
                              : PMPI_Request_free(request);
    settle(before, request, 1, small);
    return leave(result);
}

/* A request found complete without being freed: MPI has delivered its
 * data by now (MPI 4.1, section 3.7.3), and a correct program may read it
 * before the wait that frees the request. A staged one's data goes into
 * its own buffer now (after the check that a collective's result buffer
 * was not written meanwhile), not at that wait. */
int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    int result = PMPI_Request_get_status(request, flag, status);
    if (result != MPI_SUCCESS || !*flag || request == MPI_REQUEST_NULL)
        return result;
    /* Seen complete: a test that follows says so (defer_first_test). */
    for (size_t k = 0; k < open_count; k++)
        if (open_requests[k].handle == request)
            open_requests[k].tested = true;
    for (size_t k = 0; k < open_count; k++)
        if (open_requests[k].handle == request &&
            open_requests[k].kept.staged.staging != NULL) {
            device_access_begin();
            check_staged_result(open_requests[k].kind,
                                &open_requests[k].kept.staged);
            unstage(&open_requests[k].kept);
            device_access_end();
        }
    return result;
}

/* A cancelled request must still be completed by a Wait or Test form. */
int MPI_Cancel(MPI_Request *request)
{
    enter(CALL_Cancel, 0, 0, MPI_COMM_NULL);
    return leave(PMPI_Cancel(request));
}

int MPI_Finalize(void)
{
    const char *first = NULL;
    size_t open = comm_ledger_open_requests(&first);
    if (open > 0)
        fprintf(stderr, "comm ledger: rank %d: %zu MPI request%s never "
                "completed (the oldest started by %s): complete every "
                "request with MPI_Wait or MPI_Test, or their -all, -any and "
                "-some forms\n", world_rank(), open, open == 1 ? "" : "s",
                first);
    free(open_requests);
    open_requests = NULL;
    if (requests_hold_device) {
        requests_hold_device = false;
        device_access_end();
    }
    open_count = open_capacity = 0;
    return PMPI_Finalize();
}

/* ---- collectives ---- */

int MPI_Barrier(MPI_Comm comm)
{
    enter(CALL_Barrier, 0, 0, comm);
    return leave(PMPI_Barrier(comm));
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request)
{
    enter(CALL_Ibarrier, 0, 0, comm);
    return opened(CALL_Ibarrier, PMPI_Ibarrier(comm, request), request);
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype type, int root,
              MPI_Comm comm)
{
    count_bcast(CALL_Bcast, type, count, root, comm);
    return leave(PMPI_Bcast(buffer, count, type, root, comm));
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype type, int root,
               MPI_Comm comm, MPI_Request *request)
{
    count_bcast(CALL_Ibcast, type, count, root, comm);
    if (comm_rank(comm) == root)
        keep_send_buffer(buffer, count, type);
    keep_stacked(comm_rank(comm) == root ? buffer : NULL, comm_rank(comm) == root ? NULL : buffer);
    return opened(CALL_Ibcast,
                  PMPI_Ibcast(buffer, count, type, root, comm, request),
                  request);
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm)
{
    count_scatter(CALL_Scatter, (uint64_t)(comm_size(comm) - 1) *
                  type_bytes(sendtype, sendcount),
                  type_bytes(recvtype, recvcount), root, comm);
    return leave(PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                              recvtype, root, comm));
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request *request)
{
    count_scatter(CALL_Iscatter, (uint64_t)(comm_size(comm) - 1) *
                  type_bytes(sendtype, sendcount),
                  type_bytes(recvtype, recvcount), root, comm);
    if (comm_rank(comm) == root)
        keep_send_buffer(sendbuf, sendcount * comm_size(comm), sendtype);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Iscatter,
                  PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, root, comm, request),
                  request);
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
                 const int displs[], MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    uint64_t to_others = comm_rank(comm) == root
        ? others(sendcounts, comm_size(comm), root, sendtype) : 0;
    count_scatter(CALL_Scatterv, to_others, type_bytes(recvtype, recvcount),
                  root, comm);
    return leave(PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
                               recvcount, recvtype, root, comm));
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
                  const int displs[], MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root,
                  MPI_Comm comm, MPI_Request *request)
{
    uint64_t to_others = comm_rank(comm) == root
        ? others(sendcounts, comm_size(comm), root, sendtype) : 0;
    if (comm_rank(comm) == root)
        keep_arguments(comm_size(comm), 2, "sendcounts", sendcounts,
                       "displs", displs);
    count_scatter(CALL_Iscatterv, to_others, type_bytes(recvtype, recvcount),
                  root, comm);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Iscatterv,
                  PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype,
                                 recvbuf, recvcount, recvtype, root, comm,
                                 request),
                  request);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm)
{
    count_gather(CALL_Gather, type_bytes(sendtype, sendcount),
                 (uint64_t)(comm_size(comm) - 1) *
                     type_bytes(recvtype, recvcount), root, comm);
    return leave(PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                             recvtype, root, comm));
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm, MPI_Request *request)
{
    count_gather(CALL_Igather, type_bytes(sendtype, sendcount),
                 (uint64_t)(comm_size(comm) - 1) *
                     type_bytes(recvtype, recvcount), root, comm);
    keep_send_buffer(sendbuf, sendcount, sendtype);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Igather,
                  PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, root, comm, request),
                  request);
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int displs[],
                MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    uint64_t from_others = comm_rank(comm) == root
        ? others(recvcounts, comm_size(comm), root, recvtype) : 0;
    count_gather(CALL_Gatherv, type_bytes(sendtype, sendcount), from_others,
                 root, comm);
    return leave(PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf,
                              recvcounts, displs, recvtype, root, comm));
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, const int recvcounts[], const int displs[],
                 MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request)
{
    uint64_t from_others = comm_rank(comm) == root
        ? others(recvcounts, comm_size(comm), root, recvtype) : 0;
    if (comm_rank(comm) == root)
        keep_arguments(comm_size(comm), 2, "recvcounts", recvcounts,
                       "displs", displs);
    count_gather(CALL_Igatherv, type_bytes(sendtype, sendcount), from_others,
                 root, comm);
    keep_send_buffer(sendbuf, sendcount, sendtype);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Igatherv,
                  PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf,
                                recvcounts, displs, recvtype, root, comm,
                                request),
                  request);
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm)
{
    uint64_t part = type_bytes(recvtype, recvcount);
    uint64_t peers = (uint64_t)(comm_size(comm) - 1);
    enter(CALL_Allgather, peers * part, peers * part, comm);
    return leave(PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, comm));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, int recvcount, MPI_Datatype recvtype,
                   MPI_Comm comm, MPI_Request *request)
{
    uint64_t part = type_bytes(recvtype, recvcount);
    uint64_t peers = (uint64_t)(comm_size(comm) - 1);
    enter(CALL_Iallgather, peers * part, peers * part, comm);
    keep_send_buffer(sendbuf, sendcount, sendtype);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Iallgather,
                  PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf,
                                  recvcount, recvtype, comm, request),
                  request);
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int displs[],
                   MPI_Datatype recvtype, MPI_Comm comm)
{
    count_allgatherv(CALL_Allgatherv, recvcounts, recvtype, comm);
    return leave(PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcounts, displs, recvtype, comm));
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                    void *recvbuf, const int recvcounts[], const int displs[],
                    MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *request)
{
    keep_arguments(comm_size(comm), 2, "recvcounts", recvcounts, "displs",
                   displs);
    count_allgatherv(CALL_Iallgatherv, recvcounts, recvtype, comm);
    keep_send_buffer(sendbuf, sendcount, sendtype);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Iallgatherv,
                  PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                   recvcounts, displs, recvtype, comm,
                                   request),
                  request);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    uint64_t bytes = type_bytes(type, count);
    count_gather(CALL_Reduce, bytes, (uint64_t)(comm_size(comm) - 1) * bytes,
                 root, comm);
    return leave(PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *request)
{
    uint64_t bytes = type_bytes(type, count);
    count_gather(CALL_Ireduce, bytes,
                 (uint64_t)(comm_size(comm) - 1) * bytes, root, comm);
    keep_send_buffer(sendbuf, count, type);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Ireduce,
                  PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm,
                               request),
                  request);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    uint64_t volume = allreduce_volume(type, count, comm);
    enter(CALL_Allreduce, volume, volume, comm);
    return leave(PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                   MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    uint64_t volume = allreduce_volume(type, count, comm);
    enter(CALL_Iallreduce, volume, volume, comm);
    keep_send_buffer(sendbuf, count, type);
    keep_stacked(sendbuf, recvbuf);
    void *into = stage_result(recvbuf, count, type);
    return opened(CALL_Iallreduce,
                  PMPI_Iallreduce(sendbuf, into, count, type, op, comm,
                                  request),
                  request);
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
                       const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm)
{
    count_reduce_scatter(CALL_Reduce_scatter, recvcounts, type, comm);
    return leave(PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op,
                                     comm));
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
                        const int recvcounts[], MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm, MPI_Request *request)
{
    keep_arguments(comm_size(comm), 1, "recvcounts", recvcounts);
    count_reduce_scatter(CALL_Ireduce_scatter, recvcounts, type, comm);
    {
        int size = comm_size(comm), total = 0;
        for (int r = 0; recvcounts != NULL && r < size; r++)
            total += recvcounts[r];
        keep_send_buffer(sendbuf, total, type);
    }
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Ireduce_scatter,
                  PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op,
                                       comm, request),
                  request);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf,
                             int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm)
{
    uint64_t part = (uint64_t)(comm_size(comm) - 1) *
                    type_bytes(type, recvcount);
    enter(CALL_Reduce_scatter_block, part, part, comm);
    return leave(PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type,
                                           op, comm));
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf,
                              int recvcount, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    uint64_t part = (uint64_t)(comm_size(comm) - 1) *
                    type_bytes(type, recvcount);
    enter(CALL_Ireduce_scatter_block, part, part, comm);
    keep_send_buffer(sendbuf, recvcount * comm_size(comm), type);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Ireduce_scatter_block,
                  PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount,
                                             type, op, comm, request),
                  request);
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 MPI_Comm comm)
{
    uint64_t peers = (uint64_t)(comm_size(comm) - 1);
    enter(CALL_Alltoall, peers * type_bytes(sendtype, sendcount),
          peers * type_bytes(recvtype, recvcount), comm);
    return leave(PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, comm));
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm, MPI_Request *request)
{
    uint64_t peers = (uint64_t)(comm_size(comm) - 1);
    enter(CALL_Ialltoall, peers * type_bytes(sendtype, sendcount),
          peers * type_bytes(recvtype, recvcount), comm);
    keep_send_buffer(sendbuf, sendcount * comm_size(comm), sendtype);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Ialltoall,
                  PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcount, recvtype, comm, request),
                  request);
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
                  const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                  const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    count_alltoallv(CALL_Alltoallv, sendcounts, sendtype, recvcounts,
                    recvtype, comm);
    return leave(PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype,
                                recvbuf, recvcounts, rdispls, recvtype, comm));
}

int MPI_Ialltoallv(const void *sendbuf, const int sendcounts[],
                   const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int rdispls[],
                   MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request)
{
    keep_arguments(comm_size(comm), 4, "sendcounts", sendcounts, "sdispls",
                   sdispls, "recvcounts", recvcounts, "rdispls", rdispls);
    count_alltoallv(CALL_Ialltoallv, sendcounts, sendtype, recvcounts,
                    recvtype, comm);
    keep_stacked(sendbuf, recvbuf);
    return opened(CALL_Ialltoallv,
                  PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype,
                                  recvbuf, recvcounts, rdispls, recvtype,
                                  comm, request),
                  request);
}

/* ---- reading the ledger ---- */

comm_counts comm_ledger_of(const char *call)
{
    for (int k = 0; k < CALL_KINDS; k++)
        if (strcmp(ledger[k].name, call) == 0)
            return ledger[k].counts;
    comm_counts none = { 0 };
    return none;
}

comm_counts comm_ledger_total(void)
{
    comm_counts total = { 0 };
    for (int k = 0; k < CALL_KINDS; k++) {
        total.calls += ledger[k].counts.calls;
        total.messages += ledger[k].counts.messages;
        total.bytes_sent += ledger[k].counts.bytes_sent;
        total.bytes_received += ledger[k].counts.bytes_received;
        total.seconds += ledger[k].counts.seconds;
    }
    return total;
}

/* 128 KiB: twice the largest frame a student's function may have
 * (scripts/check-submission.sh refuses larger ones), filled with a value
 * no count is (negative). noinline: its frame must lie below the
 * caller's, where the dead frames were; volatile: the stores must be
 * made. */
__attribute__((noinline)) void comm_ledger_overwrite_dead_frames(void)
{
    check_frames((uintptr_t)__builtin_dwarf_cfa());
    volatile int below[32768];
    for (size_t k = 0; k < sizeof below / sizeof below[0]; k++)
        below[k] = -0x5a5a5a5b;
}

void comm_ledger_reset(void)
{
    for (int k = 0; k < CALL_KINDS; k++) {
        comm_counts zero = { 0 };
        ledger[k].counts = zero;
    }
    named_count = 0;
}

comm_counts comm_ledger_on(const char *name)
{
    for (int k = 0; k < named_count; k++)
        if (strcmp(named[k].name, name) == 0)
            return named[k].counts;
    return (comm_counts){ 0 };
}

void comm_ledger_write_by_comm(FILE *out)
{
    for (int k = 0; k < named_count; k++)
        fprintf(out, "comm_on %s %llu %llu %llu %llu\n",
                named[k].name[0] ? named[k].name : "(unnamed)",
                (unsigned long long)named[k].counts.calls,
                (unsigned long long)named[k].counts.messages,
                (unsigned long long)named[k].counts.bytes_sent,
                (unsigned long long)named[k].counts.bytes_received);
}

void comm_ledger_write(FILE *out)
{
    for (int k = 0; k < CALL_KINDS; k++)
        if (ledger[k].counts.calls > 0)
            fprintf(out, "comm %s %llu %llu %llu\n", ledger[k].name,
                    (unsigned long long)ledger[k].counts.calls,
                    (unsigned long long)ledger[k].counts.bytes_sent,
                    (unsigned long long)ledger[k].counts.bytes_received);
    const char *first = NULL;
    size_t open = comm_ledger_open_requests(&first);
    fprintf(out, "requests_open %zu%s%s\n", open, first ? " " : "",
            first ? first : "");
}
