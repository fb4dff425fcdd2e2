/* Reduce-scatter and allgather over a flat buffer, with the summation order
 * and the traffic fixed, for ZeRO (lesson 06).
 *
 * The buffer holds `total` elements, split by the balanced block partition
 * (partition.h): rank r of the communicator's P owns the elements
 * [begin_r, end_r) = block_range(total, P, r). Every ZeRO stage uses this
 * one partition, also when it works a layer at a time, so both collectives
 * act on any range [offset, offset + count) of the buffer: a layer, or the
 * whole. `own` is always the storage of the rank's whole block, own[0] being
 * element begin_r, whatever the range.
 *
 * What is fixed, and why it is not MPI_Reduce_scatter or MPI_Allgatherv:
 *   - the sum of element i is ((c_0 + c_1) + c_2) + ... + c_{P-1} in fp32,
 *     the P ranks' contributions added in rank order whatever order they
 *     arrive in. A per-layer reduce-scatter therefore gives bitwise the sums
 *     of one over the whole buffer, and ZeRO gives bitwise the weights of
 *     plain data parallel with the same order. MPI's own reduction may add
 *     in any order (a tree, a ring) that changes with P and the message size.
 *   - the exchange is pairwise: a rank sends each peer exactly the peer's
 *     part of the range, and nothing is relayed. For the range R and this
 *     rank's block B, in elements:
 *         reduce-scatter   sent |R| - |R ∩ B|,      received (P-1)|R ∩ B|
 *         allgather        sent (P-1)|R ∩ B|,       received |R| - |R ∩ B|
 *     For the whole buffer each is Ψ(P-1)/P, up to the partition's rounding:
 *     the volume of a bandwidth-optimal reduce-scatter or allgather.
 *     (Pairwise is P-1 messages a rank at once, fine on one node and a few;
 *     a ring, lesson 05's, sends as much with 2 neighbours only.)
 *
 * The messages carry the tags COLLECTIVES_TAG_* on `comm`: a caller that
 * has other messages on the same communicator in flight at the same time
 * (or receives from MPI_ANY_SOURCE there) gives the collectives a
 * communicator of their own (MPI_Comm_dup). Every rank of `comm` calls a
 * collective with the same total, offset and count.
 *
 * Errors: 0 on success; otherwise MPI's error code (when an MPI call failed;
 * the communicator must return errors, as mpi_check_init sets) or -1, with
 * one line in `error` ("reduce-scatter: rank 2: ..."). After an MPI error
 * the exchange is broken half-way: the caller ends the job (MPI_Abort); a
 * receive buffer that a posted receive may still write into is then left
 * allocated rather than freed under it. */
#ifndef ZZ_COLLECTIVES_H
#define ZZ_COLLECTIVES_H

#include <stddef.h>

#include <mpi.h>

#include "bf16.h"

/* A reduce-scatter moves its contributions in chunks of at most this many
 * elements from each peer, and adds a chunk as soon as all P-1 have come,
 * so a rank holds (P-1) * CHUNK fp32 elements of receive buffer (recorded
 * in the memory ledger as "comm"; the bf16 form as much again for its
 * widened sends), never P-1 copies of its whole part.
 * 8192 fp32 = 32 KiB a peer: at P = 4 the three receive buffers and the
 * chunk of sums they make, 128 KiB, stay in a core's L2 cache while they
 * are added; and a 32 KiB message takes several microseconds at
 * shared-memory or network bandwidth (5-25 GB/s), against about a
 * microsecond of latency, so the extra messages cost little. */
enum { COLLECTIVES_CHUNK_ELEMENTS = 8192 };

/* The tags of the collectives' messages, one for each kind: when ranks
 * disagree on which collective comes next (one skipped a call the others
 * made), a reduce-scatter's message can never be taken for an allgather's,
 * and the job waits, where the harness names each rank's step and call,
 * instead of going on with data in the wrong place. */
enum {
    COLLECTIVES_TAG_REDUCE_SCATTER = 6006,
    COLLECTIVES_TAG_ALLGATHER = 6007
};

/* For every element i of [offset, offset + count) that this rank owns:
 *     own[i - begin] = sum over ranks r = 0, 1, ..., P-1, in that order,
 * in fp32, of rank r's contributions[i - offset].
 * contributions is (count) fp32, this rank's for the range; own is this
 * rank's block, (end - begin) fp32. Owned elements outside the range are
 * left as they were. In place is allowed: own may be the owned part of the
 * very buffer `contributions` lies in (own + (i - begin) and contributions
 * + (i - offset) the same address for every i); any other overlap is not. */
int collective_reduce_scatter_f32(const float *contributions, float *own,
                                  size_t total, size_t offset, size_t count,
                                  MPI_Comm comm, char *error,
                                  size_t error_len);

/* The same for bf16 contributions, as ZeRO reduces bf16 gradients: each
 * travels widened to fp32 (exactly: every bf16 is a float), the owner adds
 * the P of them in rank order in fp32 as above, and rounds the sum once:
 *     own[i - begin] = bf16_from_float(sum over r = 0..P-1 of
 *                                      bf16_to_float(rank r's contribution))
 * Summing in bf16 would round P-1 times, and differently for each P. The
 * same messages, elements and order as collective_reduce_scatter_f32, so
 * the same traffic (fp32 elements); the chunks are widened as they are
 * sent, so the communication buffer is (P-1) chunks more, (P-1) send
 * slots as large as the largest part sent, or CHUNK: never an fp32 copy
 * of the range. In place is allowed as above (own the owned part of the
 * bf16 buffer that contributions lies in). */
int collective_reduce_scatter_bf16(const bf16 *contributions, bf16 *own,
                                   size_t total, size_t offset, size_t count,
                                   MPI_Comm comm, char *error,
                                   size_t error_len);

/* For every element i of [offset, offset + count):
 *     out[i - offset] = own[i - begin] of the rank that owns i.
 * own is this rank's block, (end - begin) elements of `type`; out is
 * (count) elements of `type`: MPI_UINT16_T for bf16, MPI_FLOAT for fp32,
 * any type whose elements lie without gaps. Nothing outside out[0, count)
 * is written. In place is allowed: own may be the owned part of out's
 * buffer (out + (i - offset) and own + (i - begin) the same address). Each
 * peer's part goes in one message, so it must fit MPI's int count. */
int collective_allgather(const void *own, void *out, MPI_Datatype type,
                         size_t total, size_t offset, size_t count,
                         MPI_Comm comm, char *error, size_t error_len);

#endif
