/* SPDX-License-Identifier: MIT
 * CPU simulator: runs a parsed plan for all ranks on host memory with the GPU executor's
 * semantics (LL packets and flags, double scratch, memory and port channels, semaphores,
 * barriers, pipelines) and checks every rank's result against the collective's definition. */
#ifndef PCL_SIM_H
#define PCL_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#include "plan.h"

/* ---- Semantics this simulator defines (the GPU executor must match them) -----------------
 *
 * Reduction of a reduce op: its "reduce_op" when the plan gives one (PCL_PLAN_RED_NONE means
 * "the call's op"); a call with ncclAvg reduces with sum.
 *
 * avg — THE definition: the plan runs with sum; when a rank's blocks have all finished, the
 * rank's result region (allreduce: its whole output; reducescatter: its output; reduce: the
 * root's output) is divided by nranks:
 *   floats: sum then multiply by 1/n in fp32 (fp64 for double), rounded back to the dtype
 *           (fp16/bf16/fp8 go through fp32);
 *   integers: the sum wraps in the dtype (two's complement), then divides, truncating toward 0.
 *
 * Other reductions: integer sum/prod wrap; min/max compare as the dtype. Floats are computed in
 * double and rounded once to the dtype (round to nearest even); fp8 results saturate to the
 * largest finite value (e4m3: 448, e5m2: 57344) as CUDA's __NV_SATFINITE does; fp16/bf16 overflow
 * to infinity.
 *
 * Packets: LL16 = {data u32, flag u32, data u32, flag u32} (8 payload bytes), valid only when both
 * flags equal the call's flag; LL8 = {data u32, flag u32} (4 payload bytes). Packet ops address
 * scratch at 2x the payload offset. A read of a packet whose flag is not this call's flag waits.
 *
 * Scratch: every scratch access (local or remote, packet or plain) adds the half offset
 * (flag & 1) * H when use_double_scratch_buffer is set, where H is a CONSTANT half of the
 * communicator's scratch (here: the largest scratch_half_bytes over every rank and every size
 * simulated). A size-dependent H would let consecutive calls of different sizes overlap halves.
 *
 * Operand sizes: an op moves src[0]'s byte range (dst[0]'s when it has no source); all operands
 * must be that size. tbg_info slices every operand (pcl_plan_tbg_slice); a pipeline's iteration i
 * then takes the window [i*unit, i*unit + unit) of each operand (clamped; an empty window skips
 * the op); with reuse_resources the window's offset in scratch operands wraps modulo chunk_bytes.
 *
 * Semaphores: channel semaphores are monotonic per direction: signal adds 1 to the peer's
 * inbound counter of the paired channel; wait increments its expected count and waits until
 * inbound >= expected. Port signals travel through the rank's proxy FIFO, in order after the
 * rank's earlier port puts. Device semaphores (sem_acquire/sem_release) and barrier counters
 * persist across calls. Port puts copy asynchronously: complete only after a flush (or a wait on
 * the signal that follows them at the peer).
 *
 * Buffers: in-place plans get in-place buffers (allgather: input = output + rank*in_bytes;
 * reducescatter: output = input + rank*out_bytes; others: input == output); an in-place plan
 * with "outofplace_ok" is also run on separate buffers. Broadcast and reduce use root 0.
 *
 * Calls: each size runs twice in a row with the flag advanced; a rank starts its next call as
 * soon as all its blocks finished the previous one (ranks drift, as GPUs do), then its host
 * refills its input with the next call's data. Flags start at 1 and never reset. */

typedef enum {
  PCL_SIM_PASS = 0,
  PCL_SIM_WRONG,    /* an output differs from the collective's definition */
  PCL_SIM_DEADLOCK, /* no block can progress while some are unfinished */
  PCL_SIM_UNINIT,   /* an op read bytes nothing wrote in this call (or a later call overwrote) */
  PCL_SIM_ERROR,    /* an op the simulator cannot run as written (range, unsupported form) */
  PCL_SIM_SKIPPED,  /* nothing to check (dtype/op not applicable, no runnable size, ...) */
} pcl_sim_verdict_t;

typedef enum { PCL_SIM_LL16 = 0, PCL_SIM_LL8 = 1 } pcl_sim_packet_t;

/* Scheduling policies, chosen by the seed: seed 0 = round-robin, 1 = greedy in rank order (rank
 * 0 runs ahead as far as it can), 2 = greedy in reverse rank order, >= 3 = random order, random
 * step sizes and random rank bias (seeded). */
#define PCL_SIM_MAX_SIZES 64

typedef struct {
  ncclDataType_t dtype;
  ncclRedOp_t op;              /* ignored for non-reducing collectives */
  const uint64_t *sizes;       /* message sizes (registry semantics); NULL = automatic */
  int nsizes;
  uint64_t seed;               /* first seed */
  int nseeds;                  /* seeds seed .. seed+nseeds-1, default 4 */
  pcl_sim_packet_t packet;
  int calls_per_size;          /* default 2 */
  uint64_t max_bytes;          /* automatic sizes: cap of the largest size (0 = default) */
  int verbose;                 /* 1: INFO lines per size; 2: also per call */
  int call_op_everywhere;      /* 1: every reduce op uses the call's op, whatever its reduce_op
                                  says (what-if runs; see planccl-plan --any-op) */
} pcl_sim_opts_t;

typedef struct {
  pcl_sim_verdict_t verdict;
  char message[4096];          /* empty on PASS; otherwise the first failure, pointing at an op */
  int nsizes;                  /* sizes actually run */
  uint64_t sizes[PCL_SIM_MAX_SIZES];
  uint64_t failed_size;        /* size and seed of the failure (if any) */
  uint64_t failed_seed;
  uint64_t steps;              /* scheduler steps, summed over seeds */
} pcl_sim_result_t;

void pcl_sim_opts_init(pcl_sim_opts_t *opts);

/* Simulates `plan` for every size and seed in opts. Returns ncclSuccess when the simulation
 * ran (whatever the verdict), ncclSystemError when memory ran out, ncclInvalidArgument for bad
 * options. */
ncclResult_t pcl_sim_run(const pcl_plan_t *plan, const pcl_sim_opts_t *opts,
                         pcl_sim_result_t *result);

/* 1 when every reduce op of the plan can serve a call with `op` (see reduce_op above). */
int pcl_sim_plan_supports_op(const pcl_plan_t *plan, ncclRedOp_t op);

/* The sizes pcl_sim_run would pick automatically (at most `max`); returns how many. */
int pcl_sim_auto_sizes(const pcl_plan_t *plan, uint64_t max_bytes, uint64_t *sizes, int max);

const char *pcl_sim_verdict_name(pcl_sim_verdict_t v); /* "PASS", "WRONG", ... */
const char *pcl_sim_dtype_name(ncclDataType_t t);      /* "fp32", "bf16", "e4m3", ... */
int pcl_sim_dtype_from_name(const char *s);            /* -1 when unknown */
const char *pcl_sim_op_name(ncclRedOp_t op);           /* "sum", "prod", "max", "min", "avg" */
int pcl_sim_op_from_name(const char *s);               /* -1 when unknown */

#endif
