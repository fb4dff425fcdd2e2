/* A test program for the collectives (common/collectives.h), run on 1 to 4
 * ranks by tests/common/test_mpi.c, which judges what it writes:
 *
 *   collectives_probe OUT_DIR TOTAL SEED LAYERS OFFSET COUNT CAP
 *
 * TOTAL elements split by the balanced block partition; LAYERS, sizes
 * separated by commas that add up to TOTAL, the layers of the per-layer
 * calls; [OFFSET, OFFSET + COUNT) a small range; CAP a memory cap in bytes
 * under which the whole-buffer reduce-scatter is tried once more. The
 * values come from SEED (tests/common/collectives_values.h). Each rank
 * writes what every call left it, as NAME-RANK.bin:
 *   rs_whole, rs_layers, rs_small, rs_inplace    its block of sums (fp32);
 *       rs_layers and rs_small start as COLLECTIVES_GUARD32
 *   rs16_whole, rs16_layers, rs16_inplace   the same from the contributions
 *       rounded to bf16, summed widened, each sum rounded to bf16
 *   ag16_whole, ag16_small      the bf16 buffer gathered, with one guard
 *                               element before and after it
 *   ag16_layers, ag16_inplace   the bf16 buffer, gathered layer by layer,
 *                               and in place
 *   ag32_whole                  the fp32 buffer gathered
 * and OUT_DIR/rank-RANK.txt: "chunk C" (COLLECTIVES_CHUNK_ELEMENTS),
 * "traffic NAME SENT RECEIVED" in bytes from the communication ledger for
 * each call above (the in-place ones excepted), "comm_peak_f32 BYTES"
 * (the communication buffers' peak before the bf16 calls), "capped CODE
 * MESSAGE" for the call under CAP, "badrange CODE MESSAGE" for a range past
 * the end, "requests_open N", and the memory ledger (memory_ledger_write).
 * Only the contributions are held through the memory ledger (as
 * "gradients"), so the bytes held when the cap is tried are 4 * TOTAL. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bf16.h"
#include "check_mpi.h"
#include "collectives.h"
#include "collectives_values.h"
#include "comm_ledger.h"
#include "memory_ledger.h"
#include "partition.h"
#include "steps.h"

static int rank, ranks;
static const char *out_dir;

static _Noreturn void fail(const char *why)
{
    fprintf(stderr, "collectives_probe: rank %d: %s\n", rank, why);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1); /* MPI_Abort does not return; this tells the compiler so */
}

/* At least one byte, so that an empty block is a valid pointer too. */
static void *allocate(size_t count, size_t size)
{
    void *block = malloc(count * size + 1);
    if (block == NULL)
        fail("out of memory");
    return block;
}

static size_t parse_size(const char *text, const char *what)
{
    char *end;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
        if (rank == 0)
            fprintf(stderr, "collectives_probe: %s: not a number: '%s'\n",
                    what, text);
        mpi_exit_all(2);
    }
    return (size_t)value;
}

static void write_binary(const char *name, const void *data, size_t size,
                         size_t count)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%d.bin", out_dir, name, rank);
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(data, size, count, file) != count ||
        fclose(file) != 0)
        fail("cannot write an output file");
}

/* One call's bytes, as the communication ledger counted them since the
 * last reset. */
static void write_traffic(FILE *report, const char *name)
{
    comm_counts counts = comm_ledger_total();
    fprintf(report, "traffic %s %llu %llu\n", name,
            (unsigned long long)counts.bytes_sent,
            (unsigned long long)counts.bytes_received);
}

static void check(int result, const char *error)
{
    if (result != 0)
        fail(error);
}

static void fill_f32(float *values, size_t count, uint32_t bits)
{
    for (size_t k = 0; k < count; k++)
        memcpy(&values[k], &bits, sizeof bits);
}

static void fill_u16(uint16_t *values, size_t count, uint16_t bits)
{
    for (size_t k = 0; k < count; k++)
        values[k] = bits;
}

int main(int argc, char **argv)
{
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_init();
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
    steps_open(rank);
    if (argc != 8) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np P collectives_probe OUT_DIR "
                    "TOTAL SEED LAYERS OFFSET COUNT CAP\n");
        mpi_exit_all(2);
    }
    out_dir = argv[1];
    const size_t total = parse_size(argv[2], "TOTAL");
    const uint64_t seed = parse_size(argv[3], "SEED");
    const size_t small_offset = parse_size(argv[5], "OFFSET");
    const size_t small_count = parse_size(argv[6], "COUNT");
    const size_t cap = parse_size(argv[7], "CAP");
    size_t layer_count = 1;
    for (const char *c = argv[4]; *c; c++)
        layer_count += *c == ',';
    size_t *layers = allocate(layer_count, sizeof *layers), sum = 0;
    char *list = argv[4];
    for (size_t l = 0; l < layer_count; l++) {
        char *comma = strchr(list, ',');
        if (comma != NULL)
            *comma = '\0';
        layers[l] = parse_size(list, "LAYERS");
        sum += layers[l];
        if (comma != NULL)
            list = comma + 1;
    }
    if (total == 0 || sum != total || small_offset > total ||
        small_count > total - small_offset) {
        if (rank == 0)
            fprintf(stderr, "collectives_probe: the layers must add up to "
                    "TOTAL > 0, and the small range lie inside it\n");
        mpi_exit_all(2);
    }
    FILE *report = mpi_report_open_or_exit("collectives_probe", out_dir,
                                           rank);
    fprintf(report, "chunk %d\n", (int)COLLECTIVES_CHUNK_ELEMENTS);

    size_t begin, end;
    block_range(total, (size_t)ranks, (size_t)rank, &begin, &end);
    const size_t owned = end - begin;
    char error[512];

    /* ---- reduce-scatter ---- */
    float *contributions = ledger_alloc(MEMORY_GRADIENTS,
                                        total * sizeof(float));
    if (contributions == NULL)
        fail(memory_ledger_last_error());
    for (size_t i = 0; i < total; i++)
        contributions[i] = collectives_contribution(seed, rank, i);
    float *sums = allocate(owned, sizeof(float));

    steps_enter("probe: reduce-scatter of the whole buffer");
    comm_ledger_reset();
    check(collective_reduce_scatter_f32(contributions, sums, total, 0, total,
                                        MPI_COMM_WORLD, error, sizeof error),
          error);
    write_traffic(report, "rs_whole");
    write_binary("rs_whole", sums, sizeof(float), owned);

    steps_enter("probe: reduce-scatter layer by layer");
    fill_f32(sums, owned, COLLECTIVES_GUARD32);
    comm_ledger_reset();
    for (size_t l = 0, at = 0; l < layer_count; at += layers[l], l++)
        check(collective_reduce_scatter_f32(contributions + at, sums, total,
                                            at, layers[l], MPI_COMM_WORLD,
                                            error, sizeof error), error);
    write_traffic(report, "rs_layers");
    write_binary("rs_layers", sums, sizeof(float), owned);

    steps_enter("probe: reduce-scatter of a small range");
    fill_f32(sums, owned, COLLECTIVES_GUARD32);
    comm_ledger_reset();
    check(collective_reduce_scatter_f32(contributions + small_offset, sums,
                                        total, small_offset, small_count,
                                        MPI_COMM_WORLD, error, sizeof error),
          error);
    write_traffic(report, "rs_small");
    write_binary("rs_small", sums, sizeof(float), owned);

    steps_enter("probe: reduce-scatter in place");
    float *buffer = allocate(total, sizeof(float));
    memcpy(buffer, contributions, total * sizeof(float));
    check(collective_reduce_scatter_f32(buffer, buffer + begin, total, 0,
                                        total, MPI_COMM_WORLD, error,
                                        sizeof error), error);
    write_binary("rs_inplace", buffer + begin, sizeof(float), owned);
    free(buffer);
    /* The fp32 reduce-scatters' communication buffers, before the bf16
     * ones add their send slots. */
    fprintf(report, "comm_peak_f32 %zu\n", memory_ledger_peak(MEMORY_COMM));

    /* ---- reduce-scatter of bf16 contributions, widened ---- */
    uint16_t *contributions16 = allocate(total, sizeof *contributions16);
    for (size_t i = 0; i < total; i++)
        contributions16[i] = bf16_from_float(
            collectives_contribution(seed, rank, i));
    uint16_t *sums16 = allocate(owned, sizeof *sums16);

    steps_enter("probe: bf16 reduce-scatter of the whole buffer");
    comm_ledger_reset();
    check(collective_reduce_scatter_bf16(contributions16, sums16, total, 0,
                                         total, MPI_COMM_WORLD, error,
                                         sizeof error), error);
    write_traffic(report, "rs16_whole");
    write_binary("rs16_whole", sums16, sizeof *sums16, owned);

    steps_enter("probe: bf16 reduce-scatter layer by layer");
    fill_u16(sums16, owned, COLLECTIVES_GUARD16);
    comm_ledger_reset();
    for (size_t l = 0, at = 0; l < layer_count; at += layers[l], l++)
        check(collective_reduce_scatter_bf16(contributions16 + at, sums16,
                                             total, at, layers[l],
                                             MPI_COMM_WORLD, error,
                                             sizeof error), error);
    write_traffic(report, "rs16_layers");
    write_binary("rs16_layers", sums16, sizeof *sums16, owned);

    steps_enter("probe: bf16 reduce-scatter in place");
    check(collective_reduce_scatter_bf16(contributions16,
                                         contributions16 + begin, total, 0,
                                         total, MPI_COMM_WORLD, error,
                                         sizeof error), error);
    write_binary("rs16_inplace", contributions16 + begin,
                 sizeof *contributions16, owned);
    free(contributions16);
    free(sums16);

    /* ---- allgather ---- */
    uint16_t *own16 = allocate(owned, sizeof *own16);
    for (size_t k = 0; k < owned; k++)
        own16[k] = collectives_bf16(seed, begin + k);
    uint16_t *gathered = allocate(total + 2, sizeof *gathered);

    steps_enter("probe: allgather of the whole bf16 buffer");
    fill_u16(gathered, total + 2, COLLECTIVES_GUARD16);
    comm_ledger_reset();
    check(collective_allgather(own16, gathered + 1, MPI_UINT16_T, total, 0,
                               total, MPI_COMM_WORLD, error, sizeof error),
          error);
    write_traffic(report, "ag16_whole");
    write_binary("ag16_whole", gathered, sizeof *gathered, total + 2);

    steps_enter("probe: allgather layer by layer");
    fill_u16(gathered, total, COLLECTIVES_GUARD16);
    comm_ledger_reset();
    for (size_t l = 0, at = 0; l < layer_count; at += layers[l], l++)
        check(collective_allgather(own16, gathered + at, MPI_UINT16_T, total,
                                   at, layers[l], MPI_COMM_WORLD, error,
                                   sizeof error), error);
    write_traffic(report, "ag16_layers");
    write_binary("ag16_layers", gathered, sizeof *gathered, total);

    steps_enter("probe: allgather of a small range");
    fill_u16(gathered, small_count + 2, COLLECTIVES_GUARD16);
    comm_ledger_reset();
    check(collective_allgather(own16, gathered + 1, MPI_UINT16_T, total,
                               small_offset, small_count, MPI_COMM_WORLD,
                               error, sizeof error), error);
    write_traffic(report, "ag16_small");
    write_binary("ag16_small", gathered, sizeof *gathered, small_count + 2);

    steps_enter("probe: allgather in place");
    fill_u16(gathered, total, COLLECTIVES_GUARD16);
    memcpy(gathered + begin, own16, owned * sizeof *own16);
    check(collective_allgather(gathered + begin, gathered, MPI_UINT16_T,
                               total, 0, total, MPI_COMM_WORLD, error,
                               sizeof error), error);
    write_binary("ag16_inplace", gathered, sizeof *gathered, total);
    free(gathered);
    free(own16);

    steps_enter("probe: allgather of an fp32 buffer");
    float *own32 = allocate(owned, sizeof *own32);
    float *gathered32 = allocate(total, sizeof *gathered32);
    for (size_t k = 0; k < owned; k++)
        own32[k] = collectives_f32(seed, begin + k);
    fill_f32(gathered32, total, COLLECTIVES_GUARD32);
    comm_ledger_reset();
    check(collective_allgather(own32, gathered32, MPI_FLOAT, total, 0, total,
                               MPI_COMM_WORLD, error, sizeof error), error);
    write_traffic(report, "ag32_whole");
    write_binary("ag32_whole", gathered32, sizeof *gathered32, total);
    free(gathered32);
    free(own32);

    /* ---- refusals: each rank judges alike, before any message ---- */
    steps_enter("probe: reduce-scatter under a cap");
    memory_ledger_set_cap(cap, rank);
    int result = collective_reduce_scatter_f32(contributions, sums, total, 0,
                                               total, MPI_COMM_WORLD, error,
                                               sizeof error);
    fprintf(report, "capped %d%s%s\n", result, result != 0 ? " " : "",
            result != 0 ? error : "");
    memory_ledger_set_cap(MEMORY_LEDGER_NO_CAP, rank);
    result = collective_reduce_scatter_f32(contributions, sums, total, total,
                                           1, MPI_COMM_WORLD, error,
                                           sizeof error);
    fprintf(report, "badrange %d%s%s\n", result, result != 0 ? " " : "",
            result != 0 ? error : "");

    steps_enter("probe: done");
    fprintf(report, "requests_open %zu\n", comm_ledger_open_requests(NULL));
    ledger_free(contributions);
    free(sums);
    free(layers);
    memory_ledger_write(report);
    if (fclose(report) != 0)
        fail("cannot write its report");
    MPI_CHECK(MPI_Finalize());
    return 0;
}
