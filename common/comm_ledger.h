/* The communication ledger: bytes each rank sends and receives, by MPI call.
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
 *   Send, Ssend, Bsend, Rsend, Isend, Issend
 *                             sent += count        (MPI_PROC_NULL: nothing)
 *   Recv                      received += the count that arrived
 *   Irecv                     received += the count posted (an upper bound)
 *   Sendrecv(_replace)        both of the above
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
 *   Alltoall                  sent = received += (P-1)*count
 *   Alltoallv                 sent += what goes to the others;
 *                             received += what comes from them
 *   Barrier                   a call, no bytes
 *
 * The non-blocking forms (Ibcast, Igather(v), Iscatter(v), Iallgather(v),
 * Ireduce, Ireduce_scatter(_block), Iallreduce) count as their blocking
 * twins, when they are started. Calls on communicators other than
 * MPI_COMM_WORLD count the same way, with P their size. One-sided
 * communication (MPI_Put, MPI_Get) is not counted: the lessons do not use
 * it, and a test that checks the total bytes sees it as bytes missing. */
#ifndef ZZ_COMM_LEDGER_H
#define ZZ_COMM_LEDGER_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    uint64_t calls;
    uint64_t bytes_sent;
    uint64_t bytes_received;
} comm_counts;

/* The counts for one call by name ("MPI_Allgatherv"); zeros if unknown. */
comm_counts comm_ledger_of(const char *call);

/* All calls added up. */
comm_counts comm_ledger_total(void);

/* Back to zero: a driver resets after its own set-up communication. */
void comm_ledger_reset(void);

/* Writes "comm NAME CALLS SENT RECEIVED" for every call made at least once. */
void comm_ledger_write(FILE *out);

#endif
