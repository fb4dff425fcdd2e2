/* How many bytes of model state each data-parallel rank holds under ZeRO's
 * stages, by the formulas of Rajbhandari et al., "ZeRO: Memory
 * Optimizations Toward Training Trillion Parameter Models" (SC'20,
 * arXiv 1910.02054), section 5.
 *
 * Model state is three things per parameter: the parameter as forward and
 * backward use it (2 bytes in fp16 or bf16), its gradient (2 bytes), and
 * the optimizer's state (K bytes; 12 for mixed-precision Adam: an fp32
 * master copy, momentum and variance, 4 bytes each). Plain data parallelism
 * keeps all three on every rank. Each ZeRO stage partitions one more of
 * them into Nd slices, one per rank:
 *
 *     stage 0, baseline      (2 + 2 + K) Ψ
 *     stage 1, P_os           2Ψ + 2Ψ + KΨ/Nd
 *     stage 2, P_os+g         2Ψ + (2 + K)Ψ/Nd
 *     stage 3, P_os+g+p       (2 + 2 + K)Ψ / Nd
 *
 * Arithmetic here is on whole numbers, never floating point: a count is
 * "replicated + sharded/Nd" bytes, held as the two whole numbers and Nd,
 * so comparing it with a device's capacity is exact. 64 bits hold a
 * trillion-parameter model's (2+2+12)·10^12 bytes a million times over;
 * a sum that would not fit is refused, not wrapped. (long double would not
 * do: on some platforms it is no wider than double, whose 53 bits cannot
 * hold every whole number past 9·10^15.)
 *
 * Every function that can be given bad input returns 0, or -1 with one line
 * in `error` saying what is wrong; none of them exits. */
#ifndef ZZ_ZERO_MEMORY_H
#define ZZ_ZERO_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { ZERO_STAGES = 4 };   /* stages 0 (plain data parallel) to 3 */

/* The three kinds of model state, in the order the stages partition them
 * backwards: stage 1 the optimizer's, stage 2 also the gradients, stage 3
 * also the parameters. */
typedef enum {
    ZERO_PARAMETERS,
    ZERO_GRADIENTS,
    ZERO_OPTIMIZER_STATE,
    ZERO_STATE_KINDS
} zero_state_kind;

/* A model, as far as its memory goes. */
typedef struct {
    uint64_t parameters;       /* Ψ */
    uint64_t parameter_bytes;  /* per parameter in the working precision: 2 */
    uint64_t gradient_bytes;   /* per gradient: 2 */
    uint64_t optimizer_bytes;  /* K, per parameter: 12 for mixed-precision Adam */
} zero_model;

/* Bytes on one rank, exactly: replicated + sharded / ranks. */
typedef struct {
    uint64_t replicated;  /* state every rank holds whole */
    uint64_t sharded;     /* state split over the ranks: all ranks together */
    uint64_t ranks;       /* Nd, at least 1 */
} zero_bytes;

/* Whether `stage` (0..3) partitions `kind` over the ranks. */
bool zero_stage_partitions(int stage, zero_state_kind kind);

/* The paper's name of a stage: "baseline", "P_os", "P_os+g", "P_os+g+p";
 * "?" for a stage outside 0..3. */
const char *zero_stage_name(int stage);

/* Bytes of `kind` for one parameter of `model`. */
uint64_t zero_kind_bytes(const zero_model *model, zero_state_kind kind);

/* The model-state bytes on each of `ranks` ranks at `stage`, by the formula
 * above. Refuses a stage outside 0..3, no ranks, and a model whose state
 * would not fit in 64 bits. */
int zero_bytes_per_rank(const zero_model *model, int stage, uint64_t ranks,
                        zero_bytes *bytes, char *error, size_t error_len);

/* replicated + sharded/ranks, to double precision (for printing). */
double zero_bytes_value(zero_bytes bytes);

/* The smallest whole number of bytes that holds it: replicated +
 * ceil(sharded/ranks). */
uint64_t zero_bytes_ceiling(zero_bytes bytes);

/* Whether it fits in `capacity` bytes, decided exactly. */
bool zero_bytes_fit(zero_bytes bytes, uint64_t capacity);

enum { ZERO_NEVER_FITS = 1 };

/* The fewest ranks, each with `capacity` bytes, on which `stage` fits the
 * model's state: returns 0 with the count in *devices, or ZERO_NEVER_FITS
 * (with *devices = 0) when no number is enough: the replicated part alone
 * is too big (stage 0 whenever the model is; stages 1 and 2 when 4Ψ or 2Ψ
 * is), or fills the device with no room for a slice. -1 on bad input. */
int zero_devices_needed(const zero_model *model, int stage, uint64_t capacity,
                        uint64_t *devices, char *error, size_t error_len);

/* The same state as a concrete flat buffer of Ψ parameters, split by the
 * balanced block partition (partition.h): rank `rank` of `ranks` owns
 * block_size(Ψ, ranks, rank) parameters, so its slice is one parameter
 * more or less than Ψ/ranks. bytes[kind] is what that rank holds of each
 * kind: the kind's bytes times Ψ when the stage keeps it whole, times the
 * rank's block when it partitions it. Summed over the ranks, a partitioned
 * kind comes to exactly its bytes times Ψ. Also refuses rank >= ranks and
 * a Ψ that is not a size_t. */
int zero_rank_state_bytes(const zero_model *model, int stage, uint64_t ranks,
                          uint64_t rank, uint64_t bytes[ZERO_STATE_KINDS],
                          char *error, size_t error_len);

/* ZeRO-Offload (Ren et al., "ZeRO-Offload: Democratizing Billion-Scale
 * Model Training", USENIX ATC'21, arXiv 2101.06840), on stage 2's
 * partition: the device keeps the parameters whole and runs forward and
 * backward; each rank's slice of the optimizer's state, and the optimizer's
 * step, live on the host. With p, g and K a parameter's, gradient's and
 * optimizer's bytes (2, 2, 12 in mixed precision), per rank:
 *
 *     device   pΨ               the parameters forward and backward read
 *     host     KΨ/Nd            the slice's optimizer state (master, m, v)
 *            + (g + p)Ψ/Nd      staging: the slice's gradients coming down
 *                               and its new parameters going up
 *
 * so 2Ψ on the device and 16Ψ/Nd on the host in mixed precision. Staging is
 * also what crosses the bus each step: 4Ψ on one rank, the paper's "at least
 * 4M bytes". With the delayed parameter update the host updates step i
 * while the device makes step i+1's gradients, so the gradients are staged
 * twice: (2g + p)Ψ/Nd, 6Ψ/Nd. Not model state, so not counted here: the
 * gradients in flight on the device (a layer or two before they go down)
 * and the activations. A host serving several ranks holds the sum of
 * theirs. */
typedef struct {
    zero_bytes device;          /* pΨ: replicated, sharded 0 */
    zero_bytes host_optimizer;  /* KΨ/Nd */
    zero_bytes host_staging;    /* (g + p)Ψ/Nd, or (2g + p)Ψ/Nd delayed */
    zero_bytes host;            /* host_optimizer + host_staging */
} zero_offload_bytes;

/* The same for one rank of the balanced partition: S = block_size(Ψ,
 * ranks, rank) parameters in its slice, and each host figure the bytes per
 * parameter times S (device: times Ψ). */
typedef struct {
    uint64_t device, host_optimizer, host_staging, host;
} zero_offload_rank_bytes;

/* The formulas above, per rank of `ranks`, with or without the delayed
 * parameter update. Refuses no ranks and a model whose state, or whose
 * host bytes with a second gradient buffer, would not fit in 64 bits. */
int zero_offload_bytes_per_rank(const zero_model *model, uint64_t ranks,
                                bool delayed_update, zero_offload_bytes *bytes,
                                char *error, size_t error_len);

/* What rank `rank` of `ranks` holds, exactly, with the partition's
 * rounding: what lesson 07's driver allocates. Also refuses rank >= ranks
 * and a Ψ that is not a size_t. */
int zero_rank_offload_bytes(const zero_model *model, uint64_t ranks,
                            uint64_t rank, bool delayed_update,
                            zero_offload_rank_bytes *bytes, char *error,
                            size_t error_len);

#endif
