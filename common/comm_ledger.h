/* The communication ledger: bytes each rank sends and receives, by MPI call,
 * the time it spends inside each, and the requests it has left open.
 *
 * It sits on MPI's profiling interface: this library defines MPI_Send,
 * MPI_Bcast, ... and passes each call on to the real one (PMPI_Send, ...)
 * after counting it. Every MPI program of the toolkit links it, so whatever
 * a student's code calls is counted, with no change to that code.
 *
 * Bytes are counted as the data that must cross between ranks, not as any
 * one MPI library happens to move it (a tree broadcast forwards data through
 * intermediate ranks; that is the library's business). For a communicator
 * of P ranks and a rank `me`, with every count in bytes:
 *
 *   Send, Ssend, Bsend, Rsend, Isend, Issend, Ibsend, Irsend
 *                             sent += count        (MPI_PROC_NULL, or the
 *                             rank itself: nothing; a message to itself
 *                             crosses to no other rank)
 *   Recv                      received += the count that arrived (from
 *                             another rank)
 *   Irecv                     received += the count posted (an upper bound;
 *                             nothing from MPI_PROC_NULL or itself)
 *   Sendrecv(_replace)        both of the above
 *   Isendrecv(_replace)       (MPI 4) sent += count; received += the count
 *                             posted
 *   Bcast                     root: sent += (P-1)*count; others: received += count
 *   Scatter(v)                root: sent += what goes to the others;
 *                             others: received += their part
 *   Gather(v)                 others: sent += their part;
 *                             root: received += the others' parts
 *   Allgather(v)              sent += (P-1)*own part; received += the others' parts
 *   Reduce                    others: sent += count; root: received += (P-1)*count
 *   Reduce_scatter(_block)    sent += the blocks the others own;
 *                             received += (P-1)*own block
 *   Allreduce, Iallreduce     sent = received += 2(P-1)/P*count, the volume of a
 *                             bandwidth-optimal allreduce (reduce-scatter, then
 *                             allgather: Patarasuk and Yuan, JPDC 2009)
 *   Alltoall(v), Ialltoall(v) sent += what goes to the others;
 *                             received += what comes from them
 *   Barrier, Ibarrier         a call, no bytes
 *
 * The non-blocking forms (Ibcast, Igather(v), Iscatter(v), Iallgather(v),
 * Ireduce, Ireduce_scatter(_block), Iallreduce) count as their blocking
 * twins, when they are started. Calls on communicators other than
 * MPI_COMM_WORLD count the same way, with P their size.
 *
 * Requests. Every request a counted call starts is open until a Wait or
 * Test form completes it (Wait, Waitall, Waitany, Waitsome, Test, Testall,
 * Testany, Testsome, each counted as a call) or MPI_Request_free releases
 * it (a non-blocking collective's request, which MPI does not let a
 * program free, stops the program, status 1, naming the call). The
 * requests still open are written with the ledger, and MPI_Finalize
 * says on standard error how many a rank never completed: a request never
 * completed is a receive whose data may never have arrived, or a send
 * whose buffer was reused too early, however right the numbers look.
 *
 * Arguments. MPI reads a non-blocking call's arrays of counts and
 * displacements (MPI_Iallgatherv's recvcounts and displs, ...) until its
 * request completes, and some libraries read them only then: the ledger
 * copies them when the call starts and compares when the request
 * completes. Changed (an array on the stack of a function that has
 * returned), the program stops, status 1, naming the call and the array.
 * So does a send buffer (sampled at the start and at the completion)
 * written, or left to die on such a stack, before its request completed.
 *
 * Refused. What the ledger cannot count stops the program (status 1, one
 * line saying why): persistent requests (MPI_Send_init and its kin,
 * MPI_Start, MPI_Startall), one-sided communication (creating a window:
 * MPI_Win_create, MPI_Win_allocate(_shared), MPI_Win_create_dynamic) and
 * the neighbourhood collectives (MPI_Neighbor_* and MPI_Ineighbor_*).
 * scripts/check-submission.sh refuses them, and every other call that is
 * not counted, in a student's files before they are built; this is the
 * second line, for code that was not checked. */
#ifndef ZZ_COMM_LEDGER_H
#define ZZ_COMM_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    uint64_t calls;
    /* The point-to-point messages it sent to another rank: a send to
     * MPI_PROC_NULL or to the rank itself is a call, and no message (nor
     * are its bytes counted). comm_ledger_write leaves it out. */
    uint64_t messages;
    uint64_t bytes_sent;
    uint64_t bytes_received;
    /* Wall seconds this rank spent inside the call, summed over its
     * calls, each from entering it to its return: waiting for the other
     * ranks included, which is most of it when they arrive late. A non-blocking call's is the call alone
     * (starting the operation); the time its completion takes is the Wait
     * or Test form's that completes it. Read by given code (a driver's
     * time split); comm_ledger_write leaves it out, so the written
     * ledger's format is the same with and without it. */
    double seconds;
} comm_counts;

/* From now on, MPI_Send and MPI_Isend complete only once the matching
 * receive has started, as MPI_Ssend and MPI_Issend do. MPI allows a
 * standard-mode send either way, and buffers small messages: a program
 * whose order of sends and receives works only because a message was
 * buffered deadlocks on larger ones, and with this it deadlocks on every
 * size, where a time limit can name where each rank waits. A correct
 * program runs as before. A driver calls it (lesson 09's). */
void comm_ledger_send_synchronously(void);

/* The counts for one call by name ("MPI_Allgatherv"); zeros if unknown. */
comm_counts comm_ledger_of(const char *call);

/* All calls added up: .seconds is the time this rank spent inside MPI. */
comm_counts comm_ledger_total(void);

/* The counts of the calls made on communicators named `name`
 * (MPI_Comm_set_name; "MPI_COMM_WORLD"; "" for those never named), all
 * calls added up; zeros for a name no call used. The Wait and Test forms
 * name no communicator: their calls are not in it (the bytes of the
 * requests they complete are, under the call that started them). */
comm_counts comm_ledger_on(const char *name);

/* One line "comm_on NAME CALLS MESSAGES SENT RECEIVED" a communicator's
 * name ("(unnamed)" for ""), in the order first used. Lesson 10's report:
 * the bytes on tp, pp and dp. */
void comm_ledger_write_by_comm(FILE *out);

/* Back to zero: a driver resets after its own set-up communication. The
 * open requests are not forgotten: a request stays open until completed. */
void comm_ledger_reset(void);

/* Whether this rank is inside an MPI call now (one of the ledger's): given
 * code that counts what a student's code allocates leaves out what MPI
 * allocates for itself. It allocates nothing, and may be called from
 * inside malloc. */
bool comm_ledger_inside_call(void);

/* How many requests are open now; *first_call (when not NULL) names the
 * call that started the oldest of them ("MPI_Iallreduce"), or is NULL when
 * none is open. */
size_t comm_ledger_open_requests(const char **first_call);

/* How many of the open requests were started by `call` ("MPI_Iallgatherv");
 * 0 for a call the ledger does not know. *received (when not NULL): the
 * bytes they were counted to receive when they started, added up. Given
 * code reads it to see what a student's code left running when it
 * returned (lesson 06's prefetch: the next layer's gather, and not a
 * stand-in of no bytes). */
size_t comm_ledger_open_requests_of(const char *call, uint64_t *received);

/* Given code calls it right after a student's function that starts a
 * non-blocking call returns (lesson 05's start_layer_average, lesson 06's
 * stage3_prefetched). First, a buffer of an open request that lay on that
 * function's stack (or any other below the caller's frame) stops the run,
 * naming the buffer and the call: MPI may read or write it until the
 * request completes, and the next calls will use that memory. Then it
 * overwrites the stack below the caller's frame, so that arrays of counts
 * or displacements left there are certain to change before the request
 * completes, and the ledger's check at completion sees it (whatever the
 * next calls would have written there). */
void comm_ledger_overwrite_dead_frames(void);

/* Given code calls it where a real program would compute for a while (a
 * layer's backward): MPI moves the open requests' data on, without
 * completing any of them (MPI_Request_get_status, which leaves each as it
 * was), until every one has its data or `seconds` have passed. Code that
 * tests a request later then finds it done, as it would after a long
 * backward: a program that forgets what MPI_Test completed shows it every
 * time, not only on a slow run. */
void comm_ledger_let_requests_finish(double seconds);

/* Writes "comm NAME CALLS SENT RECEIVED" for every call made at least once,
 * then "requests_open N", followed by the oldest one's call when N > 0. */
void comm_ledger_write(FILE *out);

#endif
