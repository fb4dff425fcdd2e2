/* Reduce-scatter and allgather over a flat buffer, pairwise, with the sum
 * in rank order; bf16 contributions travel widened to fp32. */
#include "collectives.h"

#include "device.h"
#include "memory_ledger.h"
#include "partition.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Elements [begin, end) of the flat buffer; empty when begin == end. */
typedef struct {
    size_t begin, end;
} span;

static size_t span_length(span s)
{
    return s.end - s.begin;
}

/* Rank `rank`'s block of the partition, clipped to [first, last): the
 * elements of the range that it owns, and so sums or sends. */
static span owned_in(size_t total, int ranks, int rank, size_t first,
                     size_t last)
{
    size_t begin, end;
    block_range(total, (size_t)ranks, (size_t)rank, &begin, &end);
    span s = { begin > first ? begin : first, end < last ? end : last };
    if (s.end < s.begin)
        s.end = s.begin;
    return s;
}

/* Where a peer's chunk lands in the receive buffer: one slot per peer, in
 * rank order, skipping this rank. */
static size_t slot_of(int peer, int rank)
{
    return (size_t)(peer < rank ? peer : peer - 1);
}

/* An MPI call failed: one line naming it (and the peer, when >= 0), MPI's
 * own explanation, and MPI's code returned. */
static int mpi_failed(int code, const char *what, int rank, const char *call,
                      int peer, char *error, size_t error_len)
{
    char explanation[MPI_MAX_ERROR_STRING];
    int length = 0;
    if (MPI_Error_string(code, explanation, &length) != MPI_SUCCESS)
        snprintf(explanation, sizeof explanation, "MPI error %d", code);
    char with[32] = "";
    if (peer >= 0)
        snprintf(with, sizeof with, " (rank %d)", peer);
    snprintf(error, error_len, "%s: rank %d: %s%s failed: %s", what, rank,
             call, with, explanation);
    return code;
}

/* What both collectives check first: this rank's place in `comm`, and a
 * range that lies inside the buffer. 0, or the error. */
static int start(const char *what, size_t total, size_t offset, size_t count,
                 MPI_Comm comm, int *rank, int *ranks, char *error,
                 size_t error_len)
{
    int result = MPI_Comm_rank(comm, rank);
    if (result != MPI_SUCCESS)
        return mpi_failed(result, what, -1, "MPI_Comm_rank", -1, error,
                          error_len);
    result = MPI_Comm_size(comm, ranks);
    if (result != MPI_SUCCESS)
        return mpi_failed(result, what, *rank, "MPI_Comm_size", -1, error,
                          error_len);
    /* MPI promises a size of at least 1; saying so here also tells the
     * compiler that P-1 peers' worth of requests is a sane size. */
    if (*ranks < 1) {
        snprintf(error, error_len, "%s: rank %d: a communicator of %d ranks",
                 what, *rank, *ranks);
        return -1;
    }
    if (offset > total || count > total - offset) {
        snprintf(error, error_len, "%s: rank %d: the range [%zu, %zu + %zu) "
                 "is not inside the buffer of %zu elements", what, *rank,
                 offset, offset, count, total);
        return -1;
    }
    return 0;
}

/* The two reduce-scatters' one body. The contributions are fp32, or bf16
 * (`widen`) that travel as fp32: each chunk is widened into a send buffer
 * just before it goes, so no fp32 copy of the whole range is ever made.
 * The sums go to `own` as fp32, or rounded once to bf16 (`narrow`). */
static int reduce_scatter(const void *contributions, bool widen, void *own,
                          bool narrow, size_t total, size_t offset,
                          size_t count, MPI_Comm comm, char *error,
                          size_t error_len)
{
    const char *what = "reduce-scatter";
    int rank, ranks;
    int result = start(what, total, offset, count, comm, &rank, &ranks, error,
                       error_len);
    if (result != 0)
        return result;
    const float *from32 = contributions;
    const bf16 *from16 = contributions;
    float *own32 = own;
    bf16 *own16 = own;
    const size_t last = offset + count, chunk = COLLECTIVES_CHUNK_ELEMENTS;
    size_t begin, end;
    block_range(total, (size_t)ranks, (size_t)rank, &begin, &end);
    const span mine = owned_in(total, ranks, rank, offset, last);

    /* Every rank runs the same rounds: as many as the largest part of the
     * range needs chunks. In round k each part's k-th chunk (if it has one)
     * goes to its owner from every other rank. */
    size_t rounds = 0, largest = 0;
    for (int peer = 0; peer < ranks; peer++) {
        size_t length = span_length(owned_in(total, ranks, peer, offset, last));
        size_t needed = (length + chunk - 1) / chunk;
        if (needed > rounds)
            rounds = needed;
        if (peer != rank && length > largest)
            largest = length;
    }

    /* A slot of `stride` elements per peer: no bigger than this rank's part
     * needs, so a small layer costs a small buffer. Widened contributions
     * need a send slot per peer too, as big as the largest part sent. */
    const size_t peers = ranks > 1 ? (size_t)(ranks - 1) : 0;
    const size_t stride = span_length(mine) < chunk ? span_length(mine) : chunk;
    const size_t send_stride = !widen ? 0 : largest < chunk ? largest : chunk;
    float *received = NULL, *sending = NULL;
    MPI_Request *requests = NULL;
    if (peers > 0) {
        if (stride + send_stride > 0) {
            if (peers > SIZE_MAX / sizeof(float) / (stride + send_stride)) {
                snprintf(error, error_len, "%s: rank %d: %zu peers' buffers "
                         "are too large to address", what, rank, peers);
                return -1;
            }
            /* One block: the receive slots, then the send slots. */
            received = ledger_alloc(MEMORY_COMM, peers *
                                    (stride + send_stride) * sizeof(float));
            if (received == NULL) {
                snprintf(error, error_len, "%s: %s", what,
                         memory_ledger_last_error());
                return -1;
            }
            sending = received + peers * stride;
        }
        /* Bookkeeping, 2(P-1) handles: not data, so not on the ledger. */
        requests = malloc(2 * peers * sizeof *requests);
        if (requests == NULL) {
            ledger_free(received);
            snprintf(error, error_len, "%s: rank %d: no memory for %zu MPI "
                     "requests", what, rank, 2 * peers);
            return -1;
        }
    }

    /* Set while a posted receive may still write into `received`: after
     * an MPI error it is then not freed (see collectives.h). */
    bool receiving = false;
    for (size_t round = 0; round < rounds && result == 0; round++) {
        int posted = 0;
        const size_t first = mine.begin + round * chunk;
        const size_t length = first < mine.end ?
            (mine.end - first < chunk ? mine.end - first : chunk) : 0;
        /* Receives first, so the peers' chunks need not wait unexpected. */
        for (int peer = 0; peer < ranks && length > 0 && result == 0; peer++) {
            if (peer == rank)
                continue;
            result = MPI_Irecv(received + slot_of(peer, rank) * stride,
                               (int)length, MPI_FLOAT, peer,
                               COLLECTIVES_TAG_REDUCE_SCATTER,
                               comm, &requests[posted]);
            if (result != MPI_SUCCESS)
                mpi_failed(result, what, rank, "MPI_Irecv", peer, error,
                           error_len);
            else {
                posted++;
                receiving = true;
            }
        }
        for (int peer = 0; peer < ranks && result == 0; peer++) {
            if (peer == rank)
                continue;
            span theirs = owned_in(total, ranks, peer, offset, last);
            size_t at = theirs.begin + round * chunk;
            if (at >= theirs.end)
                continue;
            size_t length_out = theirs.end - at < chunk ? theirs.end - at
                                                        : chunk;
            const float *out = from32 + (at - offset);
            if (widen) {
                float *slot = sending + slot_of(peer, rank) * send_stride;
                bf16_to_floats(slot, from16 + (at - offset), length_out);
                out = slot;
            }
            result = MPI_Isend(out, (int)length_out, MPI_FLOAT, peer,
                               COLLECTIVES_TAG_REDUCE_SCATTER, comm,
                               &requests[posted]);
            if (result != MPI_SUCCESS)
                mpi_failed(result, what, rank, "MPI_Isend", peer, error,
                           error_len);
            else
                posted++;
        }
        if (result == 0 && posted > 0) {
            result = MPI_Waitall(posted, requests, MPI_STATUSES_IGNORE);
            if (result != MPI_SUCCESS)
                mpi_failed(result, what, rank, "MPI_Waitall", -1, error,
                           error_len);
            else
                receiving = false;
        }
        if (result != 0)
            break;
        /* The chunk's sums, each added in rank order in fp32: rank 0's
         * term, then rank 1's, ... (this rank's own from contributions).
         * Each element is read before its own slot is written, which is
         * what makes the in-place call safe. */
        for (size_t k = 0; k < length; k++) {
            const size_t i = first + k;
            const float mine_term = widen ? bf16_to_float(from16[i - offset])
                                          : from32[i - offset];
            float sum = rank == 0 ? mine_term
                                  : received[slot_of(0, rank) * stride + k];
            for (int peer = 1; peer < ranks; peer++)
                sum += peer == rank
                           ? mine_term
                           : received[slot_of(peer, rank) * stride + k];
            if (narrow)
                own16[i - begin] = bf16_from_float(sum);
            else
                own32[i - begin] = sum;
        }
    }
    free(requests);
    if (!receiving)
        ledger_free(received);
    return result;
}

/* The collectives sum and move their buffers in place, and lesson 07's
 * are a cpu device's memory: each runs with the device's memory open
 * (device.h; nothing without a device). */
int collective_reduce_scatter_f32(const float *contributions, float *own,
                                  size_t total, size_t offset, size_t count,
                                  MPI_Comm comm, char *error,
                                  size_t error_len)
{
    device_access_begin();
    int result = reduce_scatter(contributions, false, own, false, total,
                                offset, count, comm, error, error_len);
    device_access_end();
    return result;
}

int collective_reduce_scatter_bf16(const bf16 *contributions, bf16 *own,
                                   size_t total, size_t offset, size_t count,
                                   MPI_Comm comm, char *error,
                                   size_t error_len)
{
    device_access_begin();
    int result = reduce_scatter(contributions, true, own, true, total,
                                offset, count, comm, error, error_len);
    device_access_end();
    return result;
}

static int allgather(const void *own, void *out, MPI_Datatype type,
                     size_t total, size_t offset, size_t count,
                     MPI_Comm comm, char *error, size_t error_len);

int collective_allgather(const void *own, void *out, MPI_Datatype type,
                         size_t total, size_t offset, size_t count,
                         MPI_Comm comm, char *error, size_t error_len)
{
    device_access_begin();
    int result = allgather(own, out, type, total, offset, count, comm,
                           error, error_len);
    device_access_end();
    return result;
}

static int allgather(const void *own, void *out, MPI_Datatype type,
                     size_t total, size_t offset, size_t count,
                     MPI_Comm comm, char *error, size_t error_len)
{
    const char *what = "allgather";
    int rank, ranks;
    int result = start(what, total, offset, count, comm, &rank, &ranks, error,
                       error_len);
    if (result != 0)
        return result;
    /* Addresses are computed in bytes, so an element must be its size
     * apart from the next. */
    int size;
    MPI_Aint lower, extent;
    result = MPI_Type_size(type, &size);
    if (result != MPI_SUCCESS)
        return mpi_failed(result, what, rank, "MPI_Type_size", -1, error,
                          error_len);
    result = MPI_Type_get_extent(type, &lower, &extent);
    if (result != MPI_SUCCESS)
        return mpi_failed(result, what, rank, "MPI_Type_get_extent", -1,
                          error, error_len);
    if (size <= 0 || lower != 0 || extent != size) {
        snprintf(error, error_len, "%s: rank %d: the element type must lie "
                 "without gaps (size %d, extent %ld)", what, rank, size,
                 (long)extent);
        return -1;
    }
    const size_t last = offset + count, element = (size_t)size;
    size_t begin, end;
    block_range(total, (size_t)ranks, (size_t)rank, &begin, &end);
    const span mine = owned_in(total, ranks, rank, offset, last);
    /* Every rank judges every part alike, so all refuse together before
     * any message is sent. */
    for (int peer = 0; peer < ranks; peer++) {
        size_t length = span_length(owned_in(total, ranks, peer, offset, last));
        if (length > (size_t)INT_MAX) {
            snprintf(error, error_len, "%s: rank %d: rank %d's part, %zu "
                     "elements, is more than one MPI message can count", what,
                     rank, peer, length);
            return -1;
        }
    }
    char *into = out;
    const char *from = own;
    /* This rank's own part, copied before any send reads it (in place it
     * is already there). */
    if (span_length(mine) > 0 &&
        into + (mine.begin - offset) * element !=
            from + (mine.begin - begin) * element)
        memmove(into + (mine.begin - offset) * element,
                from + (mine.begin - begin) * element,
                span_length(mine) * element);
    if (ranks == 1)
        return 0;

    const size_t peers = ranks > 1 ? (size_t)(ranks - 1) : 0;
    MPI_Request *requests = malloc(2 * peers * sizeof *requests);
    if (requests == NULL) {
        snprintf(error, error_len, "%s: rank %d: no memory for %zu MPI "
                 "requests", what, rank, 2 * peers);
        return -1;
    }
    int posted = 0;
    for (int peer = 0; peer < ranks && result == 0; peer++) {
        span theirs = owned_in(total, ranks, peer, offset, last);
        if (peer == rank || span_length(theirs) == 0)
            continue;
        result = MPI_Irecv(into + (theirs.begin - offset) * element,
                           (int)span_length(theirs), type, peer,
                           COLLECTIVES_TAG_ALLGATHER, comm,
                           &requests[posted]);
        if (result != MPI_SUCCESS)
            mpi_failed(result, what, rank, "MPI_Irecv", peer, error, error_len);
        else
            posted++;
    }
    for (int peer = 0; peer < ranks && span_length(mine) > 0 && result == 0;
         peer++) {
        if (peer == rank)
            continue;
        result = MPI_Isend(from + (mine.begin - begin) * element,
                           (int)span_length(mine), type, peer,
                           COLLECTIVES_TAG_ALLGATHER, comm,
                           &requests[posted]);
        if (result != MPI_SUCCESS)
            mpi_failed(result, what, rank, "MPI_Isend", peer, error, error_len);
        else
            posted++;
    }
    if (result == 0 && posted > 0) {
        result = MPI_Waitall(posted, requests, MPI_STATUSES_IGNORE);
        if (result != MPI_SUCCESS)
            mpi_failed(result, what, rank, "MPI_Waitall", -1, error,
                       error_len);
    }
    free(requests);
    return result;
}
