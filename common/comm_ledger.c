/* The communication ledger, on MPI's profiling interface. */
#include "comm_ledger.h"

#include <string.h>

#include <mpi.h>

#include "steps.h"

typedef enum {
    CALL_SEND, CALL_SSEND, CALL_ISEND, CALL_RECV, CALL_IRECV, CALL_SENDRECV,
    CALL_BCAST, CALL_SCATTER, CALL_SCATTERV, CALL_GATHER, CALL_GATHERV,
    CALL_ALLGATHER, CALL_ALLGATHERV, CALL_REDUCE, CALL_ALLREDUCE,
    CALL_IALLREDUCE, CALL_REDUCE_SCATTER, CALL_REDUCE_SCATTER_BLOCK,
    CALL_ALLTOALL, CALL_BARRIER, CALL_WAIT, CALL_WAITALL,
    CALL_BSEND, CALL_RSEND, CALL_ISSEND, CALL_SENDRECV_REPLACE, CALL_IBCAST,
    CALL_IGATHER, CALL_IGATHERV, CALL_ISCATTER, CALL_ISCATTERV,
    CALL_IALLGATHER, CALL_IALLGATHERV, CALL_IREDUCE, CALL_IREDUCE_SCATTER,
    CALL_IREDUCE_SCATTER_BLOCK, CALL_ALLTOALLV, CALL_KINDS
} call_kind;

static const char *const call_names[CALL_KINDS] = {
    "MPI_Send", "MPI_Ssend", "MPI_Isend", "MPI_Recv", "MPI_Irecv",
    "MPI_Sendrecv", "MPI_Bcast", "MPI_Scatter", "MPI_Scatterv", "MPI_Gather",
    "MPI_Gatherv", "MPI_Allgather", "MPI_Allgatherv", "MPI_Reduce",
    "MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce_scatter",
    "MPI_Reduce_scatter_block", "MPI_Alltoall", "MPI_Barrier", "MPI_Wait",
    "MPI_Waitall", "MPI_Bsend", "MPI_Rsend", "MPI_Issend",
    "MPI_Sendrecv_replace", "MPI_Ibcast", "MPI_Igather", "MPI_Igatherv",
    "MPI_Iscatter", "MPI_Iscatterv", "MPI_Iallgather", "MPI_Iallgatherv",
    "MPI_Ireduce", "MPI_Ireduce_scatter", "MPI_Ireduce_scatter_block",
    "MPI_Alltoallv"
};
_Static_assert(sizeof call_names / sizeof call_names[0] == CALL_KINDS,
               "a name for every call");

static comm_counts ledger[CALL_KINDS];

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

/* Counts a call and marks it as the one this rank is inside. */
static void enter(call_kind kind, uint64_t sent, uint64_t received)
{
    ledger[kind].calls++;
    ledger[kind].bytes_sent += sent;
    ledger[kind].bytes_received += received;
    steps_in_call(call_names[kind]);
}

static int leave(int result)
{
    steps_in_call(NULL);
    return result;
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

/* The byte models of the header, shared by each call's forms. */

static void count_send(call_kind kind, MPI_Datatype type, int count, int dest)
{
    enter(kind, dest == MPI_PROC_NULL ? 0 : type_bytes(type, count), 0);
}

static void count_bcast(call_kind kind, MPI_Datatype type, int count,
                        int root, MPI_Comm comm)
{
    uint64_t bytes = type_bytes(type, count);
    if (comm_rank(comm) == root)
        enter(kind, (uint64_t)(comm_size(comm) - 1) * bytes, 0);
    else
        enter(kind, 0, bytes);
}

static void count_gather(call_kind kind, uint64_t own, uint64_t from_others,
                         int root, MPI_Comm comm)
{
    if (comm_rank(comm) == root)
        enter(kind, 0, from_others);
    else
        enter(kind, own, 0);
}

static void count_scatter(call_kind kind, uint64_t to_others, uint64_t own,
                          int root, MPI_Comm comm)
{
    if (comm_rank(comm) == root)
        enter(kind, to_others, 0);
    else
        enter(kind, 0, own);
}

/* ---- point to point ---- */

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
             MPI_Comm comm)
{
    count_send(CALL_SEND, type, count, dest);
    return leave(PMPI_Send(buf, count, type, dest, tag, comm));
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm)
{
    count_send(CALL_SSEND, type, count, dest);
    return leave(PMPI_Ssend(buf, count, type, dest, tag, comm));
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm, MPI_Request *request)
{
    count_send(CALL_ISEND, type, count, dest);
    return leave(PMPI_Isend(buf, count, type, dest, tag, comm, request));
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag,
             MPI_Comm comm, MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *used = status == MPI_STATUS_IGNORE ? &local : status;
    enter(CALL_RECV, 0, 0);
    int result = PMPI_Recv(buf, count, type, source, tag, comm, used);
    int arrived = 0;
    if (result == MPI_SUCCESS && source != MPI_PROC_NULL &&
        PMPI_Get_count(used, type, &arrived) == MPI_SUCCESS)
        ledger[CALL_RECV].bytes_received += type_bytes(type, arrived);
    return leave(result);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag,
              MPI_Comm comm, MPI_Request *request)
{
    enter(CALL_IRECV, 0,
          source == MPI_PROC_NULL ? 0 : type_bytes(type, count));
    return leave(PMPI_Irecv(buf, count, type, source, tag, comm, request));
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 int dest, int sendtag, void *recvbuf, int recvcount,
                 MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                 MPI_Status *status)
{
    MPI_Status local;
    MPI_Status *used = status == MPI_STATUS_IGNORE ? &local : status;
    enter(CALL_SENDRECV,
          dest == MPI_PROC_NULL ? 0 : type_bytes(sendtype, sendcount), 0);
    int result = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag,
                               recvbuf, recvcount, recvtype, source, recvtag,
                               comm, used);
    int arrived = 0;
    if (result == MPI_SUCCESS && source != MPI_PROC_NULL &&
        PMPI_Get_count(used, recvtype, &arrived) == MPI_SUCCESS)
        ledger[CALL_SENDRECV].bytes_received += type_bytes(recvtype, arrived);
    return leave(result);
}

int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    enter(CALL_WAIT, 0, 0);
    return leave(PMPI_Wait(request, status));
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[])
{
    enter(CALL_WAITALL, 0, 0);
    return leave(PMPI_Waitall(count, requests, statuses));
}

/* ---- collectives ---- */

int MPI_Barrier(MPI_Comm comm)
{
    enter(CALL_BARRIER, 0, 0);
    return leave(PMPI_Barrier(comm));
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype type, int root,
              MPI_Comm comm)
{
    count_bcast(CALL_BCAST, type, count, root, comm);
    return leave(PMPI_Bcast(buffer, count, type, root, comm));
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm)
{
    count_scatter(CALL_SCATTER, (uint64_t)(comm_size(comm) - 1) *
                  type_bytes(sendtype, sendcount),
                  type_bytes(recvtype, recvcount), root, comm);
    return leave(PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                              recvtype, root, comm));
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[],
                 const int displs[], MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    uint64_t to_others = comm_rank(comm) == root
        ? others(sendcounts, comm_size(comm), root, sendtype) : 0;
    count_scatter(CALL_SCATTERV, to_others, type_bytes(recvtype, recvcount),
                  root, comm);
    return leave(PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf,
                               recvcount, recvtype, root, comm));
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
               MPI_Comm comm)
{
    count_gather(CALL_GATHER, type_bytes(sendtype, sendcount),
                 (uint64_t)(comm_size(comm) - 1) *
                     type_bytes(recvtype, recvcount), root, comm);
    return leave(PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                             recvtype, root, comm));
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, const int recvcounts[], const int displs[],
                MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    uint64_t from_others = comm_rank(comm) == root
        ? others(recvcounts, comm_size(comm), root, recvtype) : 0;
    count_gather(CALL_GATHERV, type_bytes(sendtype, sendcount), from_others,
                 root, comm);
    return leave(PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf,
                              recvcounts, displs, recvtype, root, comm));
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                  void *recvbuf, int recvcount, MPI_Datatype recvtype,
                  MPI_Comm comm)
{
    uint64_t part = type_bytes(recvtype, recvcount);
    uint64_t peers = (uint64_t)(comm_size(comm) - 1);
    enter(CALL_ALLGATHER, peers * part, peers * part);
    return leave(PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf,
                                recvcount, recvtype, comm));
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, const int recvcounts[], const int displs[],
                   MPI_Datatype recvtype, MPI_Comm comm)
{
    int size = comm_size(comm), me = comm_rank(comm);
    /* With MPI_IN_PLACE the own part is already in recvbuf. */
    uint64_t own = type_bytes(recvtype, recvcounts[me]);
    enter(CALL_ALLGATHERV, (uint64_t)(size - 1) * own,
          others(recvcounts, size, me, recvtype));
    return leave(PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcounts, displs, recvtype, comm));
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count,
               MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    uint64_t bytes = type_bytes(type, count);
    count_gather(CALL_REDUCE, bytes, (uint64_t)(comm_size(comm) - 1) * bytes,
                 root, comm);
    return leave(PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm));
}

static uint64_t allreduce_volume(MPI_Datatype type, int count, MPI_Comm comm)
{
    int size = comm_size(comm);
    return 2 * (uint64_t)(size - 1) * type_bytes(type, count) /
           (uint64_t)size;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                  MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    uint64_t volume = allreduce_volume(type, count, comm);
    enter(CALL_ALLREDUCE, volume, volume);
    return leave(PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                   MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request)
{
    uint64_t volume = allreduce_volume(type, count, comm);
    enter(CALL_IALLREDUCE, volume, volume);
    return leave(PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm,
                                 request));
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf,
                       const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm)
{
    int size = comm_size(comm), me = comm_rank(comm);
    enter(CALL_REDUCE_SCATTER, others(recvcounts, size, me, type),
          (uint64_t)(size - 1) * type_bytes(type, recvcounts[me]));
    return leave(PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op,
                                     comm));
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf,
                             int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm)
{
    uint64_t part = (uint64_t)(comm_size(comm) - 1) *
                    type_bytes(type, recvcount);
    enter(CALL_REDUCE_SCATTER_BLOCK, part, part);
    return leave(PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type,
                                           op, comm));
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 MPI_Comm comm)
{
    uint64_t peers = (uint64_t)(comm_size(comm) - 1);
    enter(CALL_ALLTOALL, peers * type_bytes(sendtype, sendcount),
          peers * type_bytes(recvtype, recvcount));
    return leave(PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, comm));
}

/* ---- the other forms of each call, counted alike ---- */

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm)
{
    count_send(CALL_BSEND, type, count, dest);
    return leave(PMPI_Bsend(buf, count, type, dest, tag, comm));
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm)
{
    count_send(CALL_RSEND, type, count, dest);
    return leave(PMPI_Rsend(buf, count, type, dest, tag, comm));
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest,
               int tag, MPI_Comm comm, MPI_Request *request)
{
    count_send(CALL_ISSEND, type, count, dest);
    return leave(PMPI_Issend(buf, count, type, dest, tag, comm, request));
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest,
                         int sendtag, int source, int recvtag, MPI_Comm comm,
                         MPI_Status *status)
{
    enter(CALL_SENDRECV_REPLACE,
          dest == MPI_PROC_NULL ? 0 : type_bytes(type, count),
          source == MPI_PROC_NULL ? 0 : type_bytes(type, count));
    return leave(PMPI_Sendrecv_replace(buf, count, type, dest, sendtag,
                                       source, recvtag, comm, status));
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype type, int root,
               MPI_Comm comm, MPI_Request *request)
{
    count_bcast(CALL_IBCAST, type, count, root, comm);
    return leave(PMPI_Ibcast(buffer, count, type, root, comm, request));
}

int MPI_Igather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                MPI_Comm comm, MPI_Request *request)
{
    count_gather(CALL_IGATHER, type_bytes(sendtype, sendcount),
                 (uint64_t)(comm_size(comm) - 1) *
                     type_bytes(recvtype, recvcount), root, comm);
    return leave(PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf,
                              recvcount, recvtype, root, comm, request));
}

int MPI_Igatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, const int recvcounts[], const int displs[],
                 MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request *request)
{
    uint64_t from_others = comm_rank(comm) == root
        ? others(recvcounts, comm_size(comm), root, recvtype) : 0;
    count_gather(CALL_IGATHERV, type_bytes(sendtype, sendcount), from_others,
                 root, comm);
    return leave(PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf,
                               recvcounts, displs, recvtype, root, comm,
                               request));
}

int MPI_Iscatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request *request)
{
    count_scatter(CALL_ISCATTER, (uint64_t)(comm_size(comm) - 1) *
                  type_bytes(sendtype, sendcount),
                  type_bytes(recvtype, recvcount), root, comm);
    return leave(PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, root, comm, request));
}

int MPI_Iscatterv(const void *sendbuf, const int sendcounts[],
                  const int displs[], MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root,
                  MPI_Comm comm, MPI_Request *request)
{
    uint64_t to_others = comm_rank(comm) == root
        ? others(sendcounts, comm_size(comm), root, sendtype) : 0;
    count_scatter(CALL_ISCATTERV, to_others, type_bytes(recvtype, recvcount),
                  root, comm);
    return leave(PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype,
                                recvbuf, recvcount, recvtype, root, comm,
                                request));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                   void *recvbuf, int recvcount, MPI_Datatype recvtype,
                   MPI_Comm comm, MPI_Request *request)
{
    uint64_t part = type_bytes(recvtype, recvcount);
    uint64_t peers = (uint64_t)(comm_size(comm) - 1);
    enter(CALL_IALLGATHER, peers * part, peers * part);
    return leave(PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf,
                                 recvcount, recvtype, comm, request));
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                    void *recvbuf, const int recvcounts[], const int displs[],
                    MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *request)
{
    int size = comm_size(comm), me = comm_rank(comm);
    enter(CALL_IALLGATHERV,
          (uint64_t)(size - 1) * type_bytes(recvtype, recvcounts[me]),
          others(recvcounts, size, me, recvtype));
    return leave(PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                  recvcounts, displs, recvtype, comm,
                                  request));
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count,
                MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *request)
{
    uint64_t bytes = type_bytes(type, count);
    count_gather(CALL_IREDUCE, bytes,
                 (uint64_t)(comm_size(comm) - 1) * bytes, root, comm);
    return leave(PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm,
                              request));
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf,
                        const int recvcounts[], MPI_Datatype type, MPI_Op op,
                        MPI_Comm comm, MPI_Request *request)
{
    int size = comm_size(comm), me = comm_rank(comm);
    enter(CALL_IREDUCE_SCATTER, others(recvcounts, size, me, type),
          (uint64_t)(size - 1) * type_bytes(type, recvcounts[me]));
    return leave(PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op,
                                      comm, request));
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf,
                              int recvcount, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request *request)
{
    uint64_t part = (uint64_t)(comm_size(comm) - 1) *
                    type_bytes(type, recvcount);
    enter(CALL_IREDUCE_SCATTER_BLOCK, part, part);
    return leave(PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount,
                                            type, op, comm, request));
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[],
                  const int sdispls[], MPI_Datatype sendtype, void *recvbuf,
                  const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm)
{
    int size = comm_size(comm), me = comm_rank(comm);
    enter(CALL_ALLTOALLV, others(sendcounts, size, me, sendtype),
          others(recvcounts, size, me, recvtype));
    return leave(PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype,
                                recvbuf, recvcounts, rdispls, recvtype, comm));
}

/* ---- reading the ledger ---- */

comm_counts comm_ledger_of(const char *call)
{
    for (int k = 0; k < CALL_KINDS; k++)
        if (strcmp(call_names[k], call) == 0)
            return ledger[k];
    comm_counts none = { 0, 0, 0 };
    return none;
}

comm_counts comm_ledger_total(void)
{
    comm_counts total = { 0, 0, 0 };
    for (int k = 0; k < CALL_KINDS; k++) {
        total.calls += ledger[k].calls;
        total.bytes_sent += ledger[k].bytes_sent;
        total.bytes_received += ledger[k].bytes_received;
    }
    return total;
}

void comm_ledger_reset(void)
{
    memset(ledger, 0, sizeof ledger);
}

void comm_ledger_write(FILE *out)
{
    for (int k = 0; k < CALL_KINDS; k++)
        if (ledger[k].calls > 0)
            fprintf(out, "comm %s %llu %llu %llu\n", call_names[k],
                    (unsigned long long)ledger[k].calls,
                    (unsigned long long)ledger[k].bytes_sent,
                    (unsigned long long)ledger[k].bytes_received);
}
