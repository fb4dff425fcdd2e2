/* Unit tests of common/zero_memory.h: the ZeRO paper's per-rank model-state
 * formulas, against the test's own evaluation of them for random models,
 * against every number the paper prints in Table 1 and Figure 1, and the
 * partition-rounded form against the totals; ZeRO-Offload's device and host
 * bytes the same ways, and against the ZeRO-Offload paper's statements;
 * tensor_memory.h's activation formula on cells worked by hand. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "partition.h"
#include "rng.h"
#include "tensor_memory.h"
#include "zero_memory.h"

/* The paper's rows (section 5, Figure 1), written out as a table of which
 * kinds each stage divides by Nd, in the order parameters, gradients,
 * optimizer state. */
static const bool divided_by_nd[ZERO_STAGES][3] = {
    { false, false, false }, /* baseline: (2 + 2 + K)Ψ */
    { false, false, true },  /* P_os: 2Ψ + 2Ψ + KΨ/Nd */
    { false, true, true },   /* P_os+g: 2Ψ + (2 + K)Ψ/Nd */
    { true, true, true },    /* P_os+g+p: (2 + 2 + K)Ψ/Nd */
};

typedef struct {
    uint64_t psi, bytes[3], nd;
} model_case;

/* Nd times one rank's bytes at `stage`: a kind divided by Nd contributes
 * its bytes times Ψ once, a kind every rank keeps contributes it Nd times.
 * Whole numbers, so exact; the random cases are sized to stay below 2^64
 * (at most 48 bytes per parameter, Ψ <= 10^13, Nd <= 2^14: < 8·10^18). */
static uint64_t nd_times_rank_bytes(const model_case *m, int stage,
                                    uint64_t nd)
{
    uint64_t sum = 0;
    for (int kind = 0; kind < 3; kind++)
        sum += m->bytes[kind] * m->psi * (divided_by_nd[stage][kind] ? 1 : nd);
    return sum;
}

/* The bytes every rank keeps whole, however many ranks there are. */
static uint64_t kept_whole(const model_case *m, int stage)
{
    uint64_t sum = 0;
    for (int kind = 0; kind < 3; kind++)
        if (!divided_by_nd[stage][kind])
            sum += m->bytes[kind] * m->psi;
    return sum;
}

/* Whether one rank's share fits in `capacity` when there are nd ranks:
 * share <= capacity  <=>  nd * share <= nd * capacity (both whole). */
static bool fits_on(const model_case *m, int stage, uint64_t nd,
                    uint64_t capacity)
{
    return nd_times_rank_bytes(m, stage, nd) <= capacity * nd;
}

static zero_model library_model(const model_case *m)
{
    zero_model model = { m->psi, m->bytes[0], m->bytes[1], m->bytes[2] };
    return model;
}

/* A random model: Ψ up to 10^13 (sometimes tiny, so that Ψ < Nd leaves
 * ranks with empty slices), 0..8 bytes per parameter and per gradient,
 * K = 0..32, Nd = 1..2^14 spread over its orders of magnitude. */
static model_case random_case(rng_t *rng, uint64_t max_nd)
{
    model_case m;
    uint64_t r = rng_next_u64(rng);
    m.psi = r % 4 == 0 ? rng_next_u64(rng) % 100 + 1
                       : rng_next_u64(rng) % UINT64_C(10000000000000) + 1;
    m.bytes[0] = rng_next_u64(rng) % 9;
    m.bytes[1] = rng_next_u64(rng) % 9;
    m.bytes[2] = rng_next_u64(rng) % 33;
    int bits = (int)(rng_next_u64(rng) % 15); /* Nd below 2^bits .. */
    m.nd = rng_next_u64(rng) % ((UINT64_C(1) << bits)) + 1;
    if (m.nd > max_nd)
        m.nd = m.nd % max_nd + 1;
    return m;
}

#define CASE_FMT "Ψ=%llu, %llu+%llu+%llu bytes, Nd=%llu, stage %d"
#define CASE_ARGS(m, stage)                                                    \
    (unsigned long long)(m).psi, (unsigned long long)(m).bytes[0],             \
        (unsigned long long)(m).bytes[1], (unsigned long long)(m).bytes[2],    \
        (unsigned long long)(m).nd, (stage)

/* (a) The library against the formulas evaluated here, for 400 random
 * models at every stage: the bytes exactly, their value as a double, their
 * ceiling, and the stage's partitioning. */
START_TEST(bytes_per_rank_match_the_formulas)
{
    rng_t rng = rng_seeded(6);
    char error[256];
    for (int k = 0; k < 400; k++) {
        model_case m = random_case(&rng, UINT64_C(1) << 14);
        zero_model model = library_model(&m);
        for (int stage = 0; stage < ZERO_STAGES; stage++) {
            for (int kind = 0; kind < 3; kind++)
                ck_assert_msg(zero_stage_partitions(stage,
                                                    (zero_state_kind)kind) ==
                                  divided_by_nd[stage][kind],
                              "stage %d partitions kind %d wrongly", stage,
                              kind);
            zero_bytes got;
            int rc = zero_bytes_per_rank(&model, stage, m.nd, &got, error,
                                         sizeof error);
            ck_assert_msg(rc == 0, CASE_FMT ": refused: %s",
                          CASE_ARGS(m, stage), error);
            uint64_t expected = nd_times_rank_bytes(&m, stage, m.nd);
            ck_assert_msg(got.ranks == m.nd &&
                              got.replicated * m.nd + got.sharded == expected,
                          CASE_FMT ": %llu + %llu/%llu bytes per rank, the "
                          "formula says %llu/%llu", CASE_ARGS(m, stage),
                          (unsigned long long)got.replicated,
                          (unsigned long long)got.sharded,
                          (unsigned long long)got.ranks,
                          (unsigned long long)expected,
                          (unsigned long long)m.nd);
            /* The double has three roundings (the whole part, the
             * fraction, their sum), the long double reference up to two
             * (where long double is just double): 8 units of 2^-53 in
             * all, 4 DBL_EPSILON. */
            long double reference = (long double)expected / (long double)m.nd;
            double value = zero_bytes_value(got);
            ck_assert_msg(fabsl((long double)value - reference) <=
                              4 * DBL_EPSILON * reference,
                          CASE_FMT ": value %.17g, reference %.17Lg",
                          CASE_ARGS(m, stage), value, reference);
            uint64_t ceiling = (expected + m.nd - 1) / m.nd;
            ck_assert_msg(zero_bytes_ceiling(got) == ceiling,
                          CASE_FMT ": ceiling %llu, expected %llu",
                          CASE_ARGS(m, stage),
                          (unsigned long long)zero_bytes_ceiling(got),
                          (unsigned long long)ceiling);
            ck_assert(zero_bytes_fit(got, ceiling));
            ck_assert(ceiling == 0 || !zero_bytes_fit(got, ceiling - 1));
        }
    }
}
END_TEST

/* Checks zero_devices_needed's answer for one case and capacity against
 * fits_on: the count it gives fits and one fewer does not (fitting only
 * gets easier with more ranks, so that proves it the smallest); "never"
 * only when the part every rank keeps fills the device. */
static void check_devices(const model_case *m, int stage, uint64_t capacity)
{
    enum { LARGEST_CHECKED = 1 << 14 }; /* where fits_on stays below 2^64 */
    zero_model model = library_model(m);
    char error[256];
    uint64_t devices = 99;
    int rc = zero_devices_needed(&model, stage, capacity, &devices, error,
                                 sizeof error);
    uint64_t whole = kept_whole(m, stage);
    uint64_t divided = nd_times_rank_bytes(m, stage, 1) - whole;
    if (rc == ZERO_NEVER_FITS) {
        ck_assert_msg(devices == 0 &&
                          (whole > capacity ||
                           (whole == capacity && divided > 0)),
                      CASE_FMT ", %llu-byte devices: never fits, but %llu "
                      "bytes are kept whole and %llu divided",
                      CASE_ARGS(*m, stage), (unsigned long long)capacity,
                      (unsigned long long)whole,
                      (unsigned long long)divided);
        ck_assert(!fits_on(m, stage, LARGEST_CHECKED, capacity));
        return;
    }
    ck_assert_msg(rc == 0 && devices >= 1, CASE_FMT ", %llu-byte devices: "
                  "returned %d, %llu devices (%s)", CASE_ARGS(*m, stage),
                  (unsigned long long)capacity, rc,
                  (unsigned long long)devices, error);
    if (devices > LARGEST_CHECKED) {
        ck_assert_msg(!fits_on(m, stage, LARGEST_CHECKED, capacity),
                      CASE_FMT ", %llu-byte devices: %llu needed, but %d fit",
                      CASE_ARGS(*m, stage), (unsigned long long)capacity,
                      (unsigned long long)devices, LARGEST_CHECKED);
        return;
    }
    ck_assert_msg(fits_on(m, stage, devices, capacity) &&
                      (devices == 1 ||
                       !fits_on(m, stage, devices - 1, capacity)),
                  CASE_FMT ", %llu-byte devices: %llu needed, but that does "
                  "not fit or one fewer does", CASE_ARGS(*m, stage),
                  (unsigned long long)capacity, (unsigned long long)devices);
}

/* (a) continued: the device count, for capacities just at and above one
 * rank's share at some Nd (the answer is then at most that Nd), one byte
 * below it, and at and below the part kept whole ("never"). */
START_TEST(devices_needed_is_the_smallest_that_fits)
{
    rng_t rng = rng_seeded(7);
    for (int k = 0; k < 300; k++) {
        model_case m = random_case(&rng, UINT64_C(1) << 12);
        for (int stage = 0; stage < ZERO_STAGES; stage++) {
            uint64_t share = (nd_times_rank_bytes(&m, stage, m.nd) + m.nd -
                              1) / m.nd;
            uint64_t whole = kept_whole(&m, stage);
            check_devices(&m, stage, share);
            check_devices(&m, stage, share + rng_next_u64(&rng) % 1000);
            if (share > 0)
                check_devices(&m, stage, share - 1);
            check_devices(&m, stage, whole);
            if (whole > 0)
                check_devices(&m, stage, whole - 1);
        }
    }
    /* Worked by hand: 128B parameters on the paper's 32 GB V100s need
     * exactly 64 at stage 3 (2048 GB / 64 = 32 GB, no byte to spare), and
     * no number at stages 0-2, where 2 or 4 bytes per parameter (256 or
     * 512 GB) stay on every device. */
    zero_model big = { 128000000000u, 2, 2, 12 };
    uint64_t devices;
    char error[256];
    ck_assert(zero_devices_needed(&big, 3, 32000000000u, &devices, error,
                                  sizeof error) == 0 && devices == 64);
    ck_assert(zero_devices_needed(&big, 3, 31999999999u, &devices, error,
                                  sizeof error) == 0 && devices == 65);
    for (int stage = 0; stage < 3; stage++)
        ck_assert(zero_devices_needed(&big, stage, 32000000000u, &devices,
                                      error, sizeof error) ==
                      ZERO_NEVER_FITS && devices == 0);
    /* 7.5B on one 141 GB H200: 120 GB fits one, at any stage. */
    zero_model small = { 7500000000u, 2, 2, 12 };
    for (int stage = 0; stage < ZERO_STAGES; stage++)
        ck_assert(zero_devices_needed(&small, stage, 141000000000u, &devices,
                                      error, sizeof error) == 0 &&
                  devices == 1);
}
END_TEST

/* (b) The numbers the paper prints, in decimal GB, as printed: Table 1's
 * rows (the baseline column, 120, 2048 and 16000 GB, is the same for every
 * Nd), and Figure 1's example. */
static const struct {
    const char *where;
    uint64_t psi, nd;
    const char *printed[ZERO_STAGES];
} paper[] = {
    { "Table 1", 7500000000u, 1, { "120", "120", "120", "120" } },
    { "Table 1", 7500000000u, 4, { "120", "52.5", "41.3", "30" } },
    { "Table 1", 7500000000u, 16, { "120", "35.6", "21.6", "7.5" } },
    { "Table 1", 7500000000u, 64, { "120", "31.4", "16.6", "1.88" } },
    { "Table 1", 7500000000u, 256, { "120", "30.4", "15.4", "0.47" } },
    { "Table 1", 7500000000u, 1024, { "120", "30.1", "15.1", "0.12" } },
    { "Table 1", 128000000000u, 1, { "2048", "2048", "2048", "2048" } },
    { "Table 1", 128000000000u, 4, { "2048", "896", "704", "512" } },
    { "Table 1", 128000000000u, 16, { "2048", "608", "368", "128" } },
    { "Table 1", 128000000000u, 64, { "2048", "536", "284", "32" } },
    { "Table 1", 128000000000u, 256, { "2048", "518", "263", "8" } },
    { "Table 1", 128000000000u, 1024, { "2048", "513", "257", "2" } },
    { "Table 1", 1000000000000u, 1, { "16000", "16000", "16000", "16000" } },
    { "Table 1", 1000000000000u, 4, { "16000", "7000", "5500", "4000" } },
    { "Table 1", 1000000000000u, 16, { "16000", "4750", "2875", "1000" } },
    { "Table 1", 1000000000000u, 64, { "16000", "4187", "2218", "250" } },
    { "Table 1", 1000000000000u, 256, { "16000", "4046", "2054", "62.5" } },
    { "Table 1", 1000000000000u, 1024, { "16000", "4011", "2013", "15.6" } },
    { "Figure 1", 7500000000u, 64, { "120", "31.4", "16.6", "1.9" } },
};

/* The unit of a printed number's last digit: 0.01 for "1.88", 1 for "4187". */
static double last_digit_unit(const char *printed)
{
    const char *point = strchr(printed, '.');
    return point == NULL ? 1.0 : pow(10.0, -(double)strlen(point + 1));
}

/* Within one unit of the last printed digit: the paper rounds some cells
 * half up (41.25 -> 41.3) and cuts others down (4187.5 -> 4187, 513.5 ->
 * 513), so either way the exact value is less than one unit away. A wrong
 * formula is far further: sharding one kind too many or too few moves
 * every cell with Nd > 1 by at least 2Ψ(1 - 1/Nd) bytes: 11.25 GB or more
 * in this table, where a unit is at most 1 GB. */
START_TEST(paper_table_1_and_figure_1_reproduced)
{
    char error[256];
    for (size_t row = 0; row < sizeof paper / sizeof paper[0]; row++) {
        zero_model model = { paper[row].psi, 2, 2, 12 };
        for (int stage = 0; stage < ZERO_STAGES; stage++) {
            zero_bytes bytes;
            ck_assert_msg(zero_bytes_per_rank(&model, stage, paper[row].nd,
                                              &bytes, error,
                                              sizeof error) == 0,
                          "%s", error);
            double gb = zero_bytes_value(bytes) / 1e9;
            double printed = strtod(paper[row].printed[stage], NULL);
            double unit = last_digit_unit(paper[row].printed[stage]);
            ck_assert_msg(fabs(gb - printed) <= unit * (1 + 1e-9),
                          "%s, Ψ = %.4g, Nd = %llu, %s: %.6g GB, the paper "
                          "prints %s", paper[row].where,
                          (double)paper[row].psi,
                          (unsigned long long)paper[row].nd,
                          zero_stage_name(stage), gb,
                          paper[row].printed[stage]);
        }
    }
}
END_TEST

/* (c) The partition-rounded form: every rank's bytes of each kind, from the
 * test's own table and partition.h's block sizes; summed over the ranks,
 * exactly Nd times the formula's per-rank bytes (a partitioned kind comes
 * to its bytes times Ψ, not a byte lost or doubled); each rank equal to the
 * formula when Nd divides Ψ, and otherwise off by less than one parameter's
 * partitioned bytes. */
START_TEST(partitioned_ranks_add_up_to_the_totals)
{
    rng_t rng = rng_seeded(8);
    char error[256];
    for (int k = 0; k < 300; k++) {
        model_case m = random_case(&rng, 100);
        if (k % 3 == 0) /* Nd dividing Ψ: no rounding anywhere */
            m.psi = m.nd * (rng_next_u64(&rng) % 1000000 + 1);
        zero_model model = library_model(&m);
        for (int stage = 0; stage < ZERO_STAGES; stage++) {
            zero_bytes formula;
            ck_assert(zero_bytes_per_rank(&model, stage, m.nd, &formula,
                                          error, sizeof error) == 0);
            uint64_t divided_per_parameter = 0;
            for (int kind = 0; kind < 3; kind++)
                if (divided_by_nd[stage][kind])
                    divided_per_parameter += m.bytes[kind];
            uint64_t kind_sum[3] = { 0, 0, 0 }, all = 0;
            for (uint64_t rank = 0; rank < m.nd; rank++) {
                uint64_t bytes[ZERO_STATE_KINDS];
                ck_assert_msg(zero_rank_state_bytes(&model, stage, m.nd, rank,
                                                    bytes, error,
                                                    sizeof error) == 0,
                              "%s", error);
                uint64_t rank_total = 0;
                for (int kind = 0; kind < 3; kind++) {
                    uint64_t count = divided_by_nd[stage][kind]
                                         ? block_size(m.psi, m.nd, rank)
                                         : m.psi;
                    ck_assert_msg(bytes[kind] == m.bytes[kind] * count,
                                  CASE_FMT ", rank %llu, kind %d: %llu bytes, "
                                  "expected %llu", CASE_ARGS(m, stage),
                                  (unsigned long long)rank, kind,
                                  (unsigned long long)bytes[kind],
                                  (unsigned long long)(m.bytes[kind] * count));
                    kind_sum[kind] += bytes[kind];
                    rank_total += bytes[kind];
                }
                all += rank_total;
                uint64_t exact = nd_times_rank_bytes(&m, stage, m.nd);
                uint64_t scaled = rank_total * m.nd;
                uint64_t off = scaled > exact ? scaled - exact : exact - scaled;
                if (m.psi % m.nd == 0)
                    ck_assert_msg(off == 0, CASE_FMT ", rank %llu: %llu bytes, "
                                  "the formula %llu/%llu", CASE_ARGS(m, stage),
                                  (unsigned long long)rank,
                                  (unsigned long long)rank_total,
                                  (unsigned long long)exact,
                                  (unsigned long long)m.nd);
                else
                    ck_assert_msg(off < divided_per_parameter * m.nd ||
                                      (off == 0 && divided_per_parameter == 0),
                                  CASE_FMT ", rank %llu: %llu bytes, more "
                                  "than one parameter from the formula "
                                  "%llu/%llu", CASE_ARGS(m, stage),
                                  (unsigned long long)rank,
                                  (unsigned long long)rank_total,
                                  (unsigned long long)exact,
                                  (unsigned long long)m.nd);
            }
            for (int kind = 0; kind < 3; kind++) {
                uint64_t whole = m.bytes[kind] * m.psi;
                uint64_t expected = divided_by_nd[stage][kind]
                                        ? whole
                                        : whole * m.nd;
                ck_assert_msg(kind_sum[kind] == expected, CASE_FMT ", kind "
                              "%d: the ranks hold %llu bytes in all, not %llu",
                              CASE_ARGS(m, stage), kind,
                              (unsigned long long)kind_sum[kind],
                              (unsigned long long)expected);
            }
            ck_assert(all == formula.replicated * m.nd + formula.sharded);
        }
    }
}
END_TEST

/* ZeRO-Offload's bytes, evaluated here: the device keeps p bytes of every
 * parameter; the host K bytes of every parameter of the rank's slice, and
 * stages g + p of them (gradients down, parameters up), 2g + p with the
 * delayed update, which holds two steps' gradients. */
static uint64_t offload_staging_per_parameter(const model_case *m,
                                              bool delayed)
{
    return (delayed ? 2 : 1) * m->bytes[1] + m->bytes[0];
}

/* The balanced partition, written out here: Ψ = base·Nd + extra, and the
 * first `extra` ranks own one parameter more. */
static uint64_t slice_of(uint64_t psi, uint64_t nd, uint64_t rank)
{
    return psi / nd + (rank < psi % nd ? 1 : 0);
}

/* (d) Offload, for 400 random models, without and with the delayed update:
 * the Ψ/Nd form exactly (Nd times a rank's host bytes is the per-parameter
 * bytes times Ψ; the device's are the same on every rank), and, for up to
 * 100 ranks, each rank's bytes from its own slice. Those add up to the
 * totals, and match stage 2's: offload keeps stage 2's parameters on the
 * device and moves its optimizer state, byte for byte, to the host. */
START_TEST(offload_bytes_match_the_formulas)
{
    rng_t rng = rng_seeded(9);
    char error[256];
    for (int k = 0; k < 400; k++) {
        model_case m = random_case(&rng, k % 2 ? 100 : UINT64_C(1) << 14);
        zero_model model = library_model(&m);
        for (int delayed = 0; delayed < 2; delayed++) {
            uint64_t staging = offload_staging_per_parameter(&m, delayed);
            zero_offload_bytes got;
            ck_assert_msg(zero_offload_bytes_per_rank(&model, m.nd, delayed,
                                                      &got, error,
                                                      sizeof error) == 0,
                          CASE_FMT ", delayed %d: refused: %s",
                          CASE_ARGS(m, 2), delayed, error);
            const struct {
                const char *what;
                zero_bytes bytes;
                uint64_t replicated, sharded;
            } parts[] = {
                { "device", got.device, m.bytes[0] * m.psi, 0 },
                { "host optimizer", got.host_optimizer, 0,
                  m.bytes[2] * m.psi },
                { "host staging", got.host_staging, 0, staging * m.psi },
                { "host", got.host, 0, (m.bytes[2] + staging) * m.psi },
            };
            for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++)
                ck_assert_msg(parts[p].bytes.ranks == m.nd &&
                                  parts[p].bytes.replicated ==
                                      parts[p].replicated &&
                                  parts[p].bytes.sharded == parts[p].sharded,
                              CASE_FMT ", delayed %d, %s: %llu + %llu/%llu, "
                              "expected %llu + %llu/%llu", CASE_ARGS(m, 2),
                              delayed, parts[p].what,
                              (unsigned long long)parts[p].bytes.replicated,
                              (unsigned long long)parts[p].bytes.sharded,
                              (unsigned long long)parts[p].bytes.ranks,
                              (unsigned long long)parts[p].replicated,
                              (unsigned long long)parts[p].sharded,
                              (unsigned long long)m.nd);
            if (m.nd > 100)
                continue;
            uint64_t host_sum = 0, staging_sum = 0;
            for (uint64_t rank = 0; rank < m.nd; rank++) {
                zero_offload_rank_bytes mine;
                uint64_t stage2[ZERO_STATE_KINDS];
                ck_assert_msg(zero_rank_offload_bytes(&model, m.nd, rank,
                                                      delayed, &mine, error,
                                                      sizeof error) == 0 &&
                                  zero_rank_state_bytes(&model, 2, m.nd, rank,
                                                        stage2, error,
                                                        sizeof error) == 0,
                              "%s", error);
                uint64_t slice = slice_of(m.psi, m.nd, rank);
                ck_assert_msg(mine.device == m.bytes[0] * m.psi &&
                                  mine.host_optimizer == m.bytes[2] * slice &&
                                  mine.host_staging == staging * slice &&
                                  mine.host == (m.bytes[2] + staging) * slice,
                              CASE_FMT ", delayed %d, rank %llu (slice %llu): "
                              "device %llu, host %llu + %llu = %llu",
                              CASE_ARGS(m, 2), delayed,
                              (unsigned long long)rank,
                              (unsigned long long)slice,
                              (unsigned long long)mine.device,
                              (unsigned long long)mine.host_optimizer,
                              (unsigned long long)mine.host_staging,
                              (unsigned long long)mine.host);
                ck_assert(mine.device == stage2[ZERO_PARAMETERS] &&
                          mine.host_optimizer == stage2[ZERO_OPTIMIZER_STATE]);
                host_sum += mine.host;
                staging_sum += mine.host_staging;
            }
            ck_assert(host_sum == got.host.sharded &&
                      staging_sum == got.host_staging.sharded);
        }
    }
}
END_TEST

/* (e) The ZeRO-Offload paper (Ren et al., arXiv 2101.06840): the device
 * holds 2M bytes of model state for M parameters, and at least 4M bytes
 * cross the bus each step (2M of gradients down, 2M of parameters up), on
 * one rank. For Ψ = 7.5B on one device: 15 GB on it; on the host 12·7.5B =
 * 90 GB of optimizer state and 30 GB staged, 45 GB with the delayed
 * update. On 64 ranks the host's part divides by 64, the device's does
 * not. Worked out by hand, in bytes. */
START_TEST(offload_paper_figures)
{
    const struct {
        uint64_t ranks;
        bool delayed;
        uint64_t device, optimizer, staging, host;
    } cases[] = {
        { 1, false, 15000000000u, 90000000000u, 30000000000u,
          120000000000u },
        { 1, true, 15000000000u, 90000000000u, 45000000000u,
          135000000000u },
        { 64, false, 15000000000u, 1406250000u, 468750000u, 1875000000u },
        { 64, true, 15000000000u, 1406250000u, 703125000u, 2109375000u },
    };
    zero_model model = { 7500000000u, 2, 2, 12 };
    char error[256];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        zero_offload_bytes got;
        zero_offload_rank_bytes rank0;
        ck_assert(zero_offload_bytes_per_rank(&model, cases[c].ranks,
                                              cases[c].delayed, &got, error,
                                              sizeof error) == 0);
        ck_assert(zero_rank_offload_bytes(&model, cases[c].ranks, 0,
                                          cases[c].delayed, &rank0, error,
                                          sizeof error) == 0);
        /* 64 divides 7.5B: the rounded and the exact forms agree. */
        const uint64_t exact[] = {
            zero_bytes_ceiling(got.device),
            zero_bytes_ceiling(got.host_optimizer),
            zero_bytes_ceiling(got.host_staging),
            zero_bytes_ceiling(got.host),
        };
        const uint64_t rounded[] = { rank0.device, rank0.host_optimizer,
                                     rank0.host_staging, rank0.host };
        const uint64_t want[] = { cases[c].device, cases[c].optimizer,
                                  cases[c].staging, cases[c].host };
        const char *what[] = { "device", "host optimizer", "host staging",
                               "host" };
        for (int k = 0; k < 4; k++)
            ck_assert_msg(exact[k] == want[k] && rounded[k] == want[k],
                          "7.5B on %llu ranks%s, %s: %llu bytes (rank 0: "
                          "%llu), the paper's formulas give %llu",
                          (unsigned long long)cases[c].ranks,
                          cases[c].delayed ? " with DPU" : "", what[k],
                          (unsigned long long)exact[k],
                          (unsigned long long)rounded[k],
                          (unsigned long long)want[k]);
    }
    /* 2M on the device, 4M staged (what crosses), for M from 1 to 10^6. */
    rng_t rng = rng_seeded(10);
    for (int k = 0; k < 100; k++) {
        zero_model mixed = { rng_next_u64(&rng) % 1000000 + 1, 2, 2, 12 };
        zero_offload_rank_bytes one;
        ck_assert(zero_rank_offload_bytes(&mixed, 1, 0, false, &one, error,
                                          sizeof error) == 0);
        ck_assert(one.device == 2 * mixed.parameters &&
                  one.host_staging == 4 * mixed.parameters &&
                  one.host == 16 * mixed.parameters);
    }
}
END_TEST

/* A message is one line that says something. */
static void expect_refusal(int rc, const char *error, const char *word)
{
    ck_assert_msg(rc == -1, "bad input accepted (returned %d)", rc);
    ck_assert_msg(error[0] != '\0' && strchr(error, '\n') == NULL &&
                      strstr(error, word) != NULL,
                  "the message '%s' should be one line naming '%s'", error,
                  word);
}

START_TEST(bad_input_is_refused_with_a_reason)
{
    zero_model model = { 1000, 2, 2, 12 };
    zero_bytes bytes;
    uint64_t devices, per_kind[ZERO_STATE_KINDS];
    char error[256] = "";
    expect_refusal(zero_bytes_per_rank(&model, 4, 8, &bytes, error,
                                       sizeof error), error, "stage 4");
    error[0] = '\0';
    expect_refusal(zero_bytes_per_rank(&model, -1, 8, &bytes, error,
                                       sizeof error), error, "stage -1");
    error[0] = '\0';
    expect_refusal(zero_bytes_per_rank(&model, 1, 0, &bytes, error,
                                       sizeof error), error, "0 ranks");
    error[0] = '\0';
    expect_refusal(zero_rank_state_bytes(&model, 3, 8, 8, per_kind, error,
                                         sizeof error), error, "rank 8");
    /* 16 bytes times 2^60 parameters is 2^64: one past what fits. */
    zero_model huge = { UINT64_C(1) << 60, 2, 2, 12 };
    error[0] = '\0';
    expect_refusal(zero_bytes_per_rank(&huge, 0, 1, &bytes, error,
                                       sizeof error), error, "2^64");
    error[0] = '\0';
    expect_refusal(zero_devices_needed(&huge, 3, 1000, &devices, error,
                                       sizeof error), error, "2^64");
    /* One parameter fewer fits, at 2^64 - 16 bytes. */
    huge.parameters--;
    ck_assert(zero_bytes_per_rank(&huge, 0, 1, &bytes, error,
                                  sizeof error) == 0 &&
              bytes.replicated == UINT64_MAX - 15);
    zero_offload_bytes offload;
    zero_offload_rank_bytes offload_rank;
    error[0] = '\0';
    expect_refusal(zero_offload_bytes_per_rank(&model, 0, false, &offload,
                                               error, sizeof error),
                   error, "0 ranks");
    error[0] = '\0';
    expect_refusal(zero_rank_offload_bytes(&model, 8, 8, true, &offload_rank,
                                           error, sizeof error), error,
                   "rank 8");
    /* 2^60 - 1 parameters: the model's 16 bytes each fit, and so do the
     * host's 12 + 2 + 2; the delayed update's 12 + 4 + 2 do not. */
    error[0] = '\0';
    ck_assert(zero_offload_bytes_per_rank(&huge, 1, false, &offload, error,
                                          sizeof error) == 0 &&
              offload.host.sharded == UINT64_MAX - 15);
    expect_refusal(zero_offload_bytes_per_rank(&huge, 1, true, &offload,
                                               error, sizeof error),
                   error, "2^64");
    huge.parameters++;
    error[0] = '\0';
    expect_refusal(zero_offload_bytes_per_rank(&huge, 1, false, &offload,
                                               error, sizeof error),
                   error, "2^64");
    ck_assert_str_eq(zero_stage_name(2), "P_os+g");
    ck_assert_str_eq(zero_stage_name(7), "?");
}
END_TEST

/* Korthikanti et al.'s activation formula per transformer layer
 * (tensor_memory.h), on cells worked by hand here:
 *   s 2048, b 1, h 12288, a 96 (a GPT-3 175B layer), t 8: sbh = 25165824
 *   and 5as/h = 80, so 114 sbh = 2868903936 bytes without parallelism,
 *   (10 + 3 + 10) sbh = 578813952 with tensor parallelism and
 *   (4.25 + 10) sbh = 358612992 with sequence parallelism too;
 *   s 512, b 4, h 1024, a 16, t 3 (no whole quotient): sbh = 2097152,
 *   5as^2b = 83886080, so 74 sbh = 155189248 whole, 10 sbh + (24 sbh +
 *   5as^2b)/3 = 20971520 + 134217728/3, and (34 sbh + 5as^2b)/3 =
 *   155189248/3;
 * and each against the published expression evaluated in double, to
 * within 1e-12 of it (a few roundings of double on numbers under 2^33). */
START_TEST(transformer_activation_bytes_worked_cells)
{
    static const struct {
        transformer_shape shape;
        uint64_t t;
        zero_bytes want[3]; /* none, tensor, tensor + sequence */
    } cells[] = {
        { { 2048, 1, 12288, 96 }, 8,
          { { 2868903936u, 0, 1 }, { 251658240u, 2617245696u, 8 },
            { 0, 2868903936u, 8 } } },
        { { 512, 4, 1024, 16 }, 3,
          { { 155189248u, 0, 1 }, { 20971520u, 134217728u, 3 },
            { 0, 155189248u, 3 } } },
    };
    for (size_t c = 0; c < sizeof cells / sizeof cells[0]; c++) {
        const transformer_shape *x = &cells[c].shape;
        const double s = (double)x->sequence, b = (double)x->micro_batch,
                     h = (double)x->hidden, a = (double)x->heads,
                     t = (double)cells[c].t;
        const double published[3] = {
            s * b * h * (34 + 5 * a * s / h),
            s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
            s * b * h * (34 / t + 5 * a * s / (h * t)),
        };
        for (int kind = 0; kind < 3; kind++) {
            zero_bytes got;
            char error[160] = "";
            ck_assert_msg(transformer_activation_bytes(
                              x, (tensor_parallelism)kind, cells[c].t, &got,
                              error, sizeof error) == 0, "%s", error);
            ck_assert_msg(got.replicated == cells[c].want[kind].replicated &&
                              got.sharded == cells[c].want[kind].sharded &&
                              got.ranks == cells[c].want[kind].ranks,
                          "cell %zu, kind %d: %llu + %llu/%llu bytes, worked "
                          "by hand %llu + %llu/%llu", c, kind,
                          (unsigned long long)got.replicated,
                          (unsigned long long)got.sharded,
                          (unsigned long long)got.ranks,
                          (unsigned long long)cells[c].want[kind].replicated,
                          (unsigned long long)cells[c].want[kind].sharded,
                          (unsigned long long)cells[c].want[kind].ranks);
            ck_assert_msg(fabs(zero_bytes_value(got) - published[kind]) <=
                              1e-12 * published[kind],
                          "cell %zu, kind %d: %.17g, the published formula "
                          "%.17g", c, kind, zero_bytes_value(got),
                          published[kind]);
        }
    }
    zero_bytes unused;
    char error[160] = "";
    const transformer_shape empty = { 0, 1, 1, 1 },
                            huge = { UINT64_C(1) << 32, 1, UINT64_C(1) << 32,
                                     1 };
    expect_refusal(transformer_activation_bytes(&empty, TENSOR_PARALLEL, 2,
                                                &unused, error, sizeof error),
                   error, "at least 1");
    expect_refusal(transformer_activation_bytes(&huge, TENSOR_PARALLEL, 2,
                                                &unused, error, sizeof error),
                   error, "2^64");
    expect_refusal(transformer_activation_bytes(&cells[0].shape,
                                                TENSOR_PARALLEL, 0, &unused,
                                                error, sizeof error),
                   error, "at least 1 rank");
}
END_TEST

Suite *lesson_suite(void)
{
    Suite *suite = suite_create("zero_memory");
    harness_add(suite, "zero memory: bytes per rank as the formulas say, "
                "400 random models", bytes_per_rank_match_the_formulas, 0, 10);
    harness_add(suite, "zero memory: fewest devices that fit, or never",
                devices_needed_is_the_smallest_that_fits, 0, 10);
    harness_add(suite, "zero memory: the paper's Table 1 and Figure 1, cell "
                "by cell", paper_table_1_and_figure_1_reproduced, 0, 10);
    harness_add(suite, "zero memory: partitioned ranks add up to the totals",
                partitioned_ranks_add_up_to_the_totals, 0, 10);
    harness_add(suite, "zero memory: offload's device and host bytes as the "
                "formulas say", offload_bytes_match_the_formulas, 0, 10);
    harness_add(suite, "zero memory: offload, the ZeRO-Offload paper's "
                "figures", offload_paper_figures, 0, 10);
    harness_add(suite, "tensor memory: Korthikanti et al.'s activations per "
                "transformer layer, worked cells",
                transformer_activation_bytes_worked_cells, 0, 10);
    harness_add(suite, "zero memory: bad input refused with a reason",
                bad_input_is_refused_with_a_reason, 0, 10);
    return suite;
}
