/* The planner of lesson 10 (memory_calculator --plan): for a transformer of
 * Ψ parameters on N devices, H of them a host, every layout (tp, pp, dp,
 * ZeRO stage) that fits a device, with what each device holds and what
 * each axis sends per step, and which axes cross hosts.
 *
 * The model is L identical transformer layers of Ψ/L parameters each
 * (embeddings left out), trained in mixed precision: p and g bytes a
 * parameter and gradient (2 each) and K of optimizer state (12), 16-bit
 * activations. A step is m micro-batches of b sequences of s tokens; h is
 * the hidden size, a the heads. The ranks of a layout are laid out with
 * tensor-parallel ranks adjacent, then pipeline stages, then replicas:
 *
 *     rank = (d · pp + p) · tp + t,       host = rank / H
 *
 * so that a tp group shares a host whenever tp divides H (lesson 10's
 * grid). For the device that holds the most, with Lp = ceil(L / pp) the
 * layers of the first stage (the balanced partition gives the first
 * stages the extra layers) and Ψd = ceil(Ψ · Lp / (L · tp)) its
 * parameters:
 *
 *   model state   ZeRO's formula for Ψd over dp ranks at the stage
 *                 (zero_memory.h), rounded up to whole bytes
 *   activations   Lp · f · A, A one layer's bytes with tensor and sequence
 *                 parallelism (Korthikanti et al.: tensor_memory.h),
 *                 rounded up, and f the micro-batches in flight on the
 *                 first stage: m for GPipe, min(m, pp) for 1F1B
 *
 * Bytes a device sends per step, the most any device of the layout sends.
 * A ring reduce-scatter or allgather of X items over k ranks under the
 * balanced partition sends every block but one from each rank: at most
 * X - floor(X / k) items, 0 for k = 1. An allreduce is the two.
 *
 *   tp   each layer, each micro-batch: forward an allgather before and a
 *        reduce-scatter after attention and after the MLP (sequence
 *        parallelism), backward the same four: 8 rings over the s·b rows
 *        of h values, 2 bytes each:
 *            16 · m · Lp · h · (sb - floor(sb / tp))
 *   pp   each micro-batch, its activations to the next stage and their
 *        gradient back to the one before, each tp rank its rows' block
 *        (sequence parallelism): a middle stage sends both, an end stage
 *        one (none on one stage):
 *            m · (2 for pp >= 3, 1 for pp = 2) · 2 · ceil(sb / tp) · h
 *   dp   the gradients of Ψd: stage 0 an allreduce of g-byte gradients,
 *        stages 1 and 2 a reduce-scatter of them and an allgather of the
 *        p-byte parameters, stage 3 that and a second allgather of the
 *        parameters (forward and backward each gather them):
 *            (Ψd - floor(Ψd / dp)) · (2g, g + p, or g + 2p)
 *
 * An axis crosses hosts when one of its groups has ranks on two hosts; the
 * bytes that cross hosts are the sum of the bytes of the axes that cross
 * (an upper bound: a ring that crosses sends only some of its steps over
 * the link). Layouts are kept where tp divides the heads, pp is at most
 * L, tp · pp divides N, and the device's state and activations fit; with
 * dp = 1 only stage 0 (the stages are equal there). They are sorted by the
 * bytes that cross hosts, then by the bytes a device holds, then by tp, pp
 * and stage. Every function here returns 0, or -1 with one line in
 * `error`; none exits. */
#ifndef ZZ_PARALLEL_PLAN_H
#define ZZ_PARALLEL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor_memory.h"

typedef struct {
    uint64_t parameters;        /* Ψ */
    uint64_t layers;            /* L */
    transformer_shape shape;    /* s, b (a micro-batch), h, a */
    uint64_t micro_batches;     /* m a step */
    bool gpipe;                 /* all forwards, then all backwards; else 1F1B */
    uint64_t parameter_bytes;   /* p: 2 */
    uint64_t gradient_bytes;    /* g: 2 */
    uint64_t optimizer_bytes;   /* K: 12 */
} plan_model;

typedef struct {
    uint64_t devices;           /* N */
    uint64_t per_host;          /* H */
    uint64_t capacity;          /* bytes of one device */
} plan_cluster;

enum { PLAN_TP, PLAN_PP, PLAN_DP, PLAN_AXES };

typedef struct {
    uint64_t tp, pp, dp;
    int stage;                  /* ZeRO's, over dp */
    uint64_t stage_layers;      /* Lp */
    uint64_t parameters;        /* Ψd */
    uint64_t state;             /* bytes of model state */
    uint64_t activations;       /* bytes */
    uint64_t sent[PLAN_AXES];   /* bytes a device sends a step, by axis */
    bool crosses[PLAN_AXES];    /* whether the axis has a group on two hosts */
    uint64_t crossing;          /* the sum of sent[] over the axes that cross */
    bool fits;                  /* state + activations <= capacity */
} plan_layout;

/* What the device that holds the most of layout (tp, pp, N / (tp pp),
 * stage) holds and sends. Refuses sizes of 0, a tp that does not divide
 * the heads, a pp above L, tp · pp not dividing N, a stage outside 0..3,
 * and numbers past 64 bits. */
int plan_layout_of(const plan_model *model, const plan_cluster *cluster,
                   uint64_t tp, uint64_t pp, int stage, plan_layout *layout,
                   char *error, size_t error_len);

/* Every layout that fits, sorted as above: the first `most` of them into
 * `layouts`, how many fit in *count (which may be more than `most`). */
int plan_layouts(const plan_model *model, const plan_cluster *cluster,
                 plan_layout *layouts, size_t most, size_t *count,
                 char *error, size_t error_len);

#endif
