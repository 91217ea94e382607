/* SPDX-License-Identifier: MIT
 * CPU simulator: runs a parsed plan for all ranks on host memory with the GPU executor's
 * semantics (LL packets and flags, double scratch, memory and port channels, semaphores,
 * barriers, pipelines) and checks every rank's result against the collective's definition. */
#ifndef PCL_SIM_H
#define PCL_SIM_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#include "dtype.h" /* dtype names and sizes (common/dtypes.def) */
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
 * Other reductions: integer sum/prod wrap; min/max compare as the dtype. An op reduces its
 * sources pairwise in src_buff order, acc = src[0], then acc = acc OP src[k] for k = 1, 2, ...,
 * rounding acc to the dtype after every step, exactly as the kernel does (pcl_kred: fp32 and fp64
 * in their own precision, fp16/bf16/fp8 in fp32). Both give the correctly rounded result of each
 * step: the simulator computes a step in double and rounds once to the dtype (a step on two
 * fp16/bf16/fp8 values is exact in double; for fp32, and for the kernel's fp32 step on the small
 * types, rounding twice is innocuous because the wider precision is >= 2p + 2 bits). Rounding is
 * to nearest even; fp8 results saturate to the largest finite value (e4m3: 448, e5m2: 57344) as
 * CUDA's __NV_SATFINITE does; fp16/bf16 overflow to infinity. max = (acc < x ? x : acc) and
 * min = (x < acc ? x : acc), as the kernel writes them (a signed zero keeps acc's sign). So the
 * GPU executor's results equal the simulator's bit for bit, for inputs without NaN (NaN payloads
 * are not modelled). The check against the collective's definition reduces in rank order and
 * compares floats with the reordering bound where inputs make rounding possible (else exactly).
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
 * with "outofplace_ok" is also run on separate buffers (layout ALL). Broadcast and reduce use
 * root 0.
 *
 * Calls: each size runs calls_per_size times (default 2) in a row with the flag advanced; a rank
 * starts its next call as soon as all its blocks finished the previous one (ranks drift, as GPUs
 * do), then its host refills its input with the next call's data. Flags start at 1 and never
 * reset. Every seed (and every buffer layout) runs the whole call sequence on a fresh world.
 *
 * Inputs (deterministic in seed, call and rank): floats are small integers for sum/avg (every
 * partial sum exact, so any reduction order gives the same bits), +-1/+-2 for prod; with
 * rounding_inputs, floats carry full random mantissas so that sums and products round and the
 * reduction order shows in the last bits (the check then allows the reordering bound). */

typedef enum {
  PCL_SIM_PASS = 0,
  PCL_SIM_WRONG,    /* an output differs from the collective's definition */
  PCL_SIM_DEADLOCK, /* no block can progress while some are unfinished */
  PCL_SIM_UNINIT,   /* an op read bytes nothing wrote in this call (or a later call overwrote) */
  PCL_SIM_ERROR,    /* an op the simulator cannot run as written (range, unsupported form) */
  PCL_SIM_SKIPPED,  /* nothing to check (dtype/op not applicable, no runnable size, ...) */
} pcl_sim_verdict_t;

typedef enum { PCL_SIM_LL16 = 0, PCL_SIM_LL8 = 1 } pcl_sim_packet_t;

/* Scheduling policies. PCL_SIM_SCHED_BY_SEED (the default) picks one from the seed: seed 0 =
 * round-robin, 1 = greedy in rank order (rank 0 runs ahead as far as it can), 2 = greedy in
 * reverse rank order, >= 3 = random order, random step sizes and random rank bias (seeded). The
 * others force one policy for every seed (the random one still seeded by the seed). */
typedef enum {
  PCL_SIM_SCHED_BY_SEED = 0,
  PCL_SIM_SCHED_ROUND_ROBIN,
  PCL_SIM_SCHED_GREEDY_UP,
  PCL_SIM_SCHED_GREEDY_DOWN,
  PCL_SIM_SCHED_RANDOM,
} pcl_sim_sched_t;

/* Buffer layouts to run. ALL (the default): the plan's own (in-place buffers for an in-place
 * plan), and for an in-place plan with "outofplace_ok" also separate buffers, one after the
 * other. INPLACE / OUTOFPLACE: only that one; a plan that cannot run it is SKIPPED (in-place
 * layout: in-place plans; separate buffers: out-of-place plans and outofplace_ok ones). */
typedef enum {
  PCL_SIM_LAYOUT_ALL = 0,
  PCL_SIM_LAYOUT_INPLACE,
  PCL_SIM_LAYOUT_OUTOFPLACE,
} pcl_sim_layout_t;

/* What one rank computed in one call, handed to pcl_sim_opts_t.capture when the rank finished
 * the call (all its blocks done, after the avg post-scale and the check). The buffers belong to
 * the simulator and are valid only during the callback.
 *
 * input: the call's input on this rank exactly as the host wrote it before the call (pristine,
 * also for in-place layouts, where the plan may have overwritten it since), in_bytes long.
 * output: the rank's output buffer as the user sees it, out_bytes long:
 *   allreduce:     recvbuff, count elements (in place: the same buffer as the input);
 *   allgather:     recvbuff, nranks x in_bytes; slot k is rank k's input (in place: the input
 *                  was slot `rank` of this buffer);
 *   reducescatter: recvbuff, in_bytes / nranks, this rank's reduced block (in place: the bytes
 *                  at input + rank x out_bytes);
 *   reduce:        recvbuff; the reduction on the root (rank 0) only; on the other ranks
 *                  whatever the plan left there (undefined, compare the root only);
 *   broadcast:     recvbuff, the root's (rank 0's) input on every rank (in place: the input
 *                  buffer). */
typedef struct {
  uint64_t size; /* the call's message size (registry semantics) */
  uint64_t seed; /* the run's seed (inputs and, by default, the schedule) */
  int call;      /* index of the call in its run (0 .. nsizes x calls_per_size - 1) */
  int rank;
  int inplace;    /* 1: in-place buffers, 0: separate input and output */
  int checked_ok; /* 1: this rank's result matched the collective's definition */
  const uint8_t *input;
  uint64_t in_bytes;
  const uint8_t *output;
  uint64_t out_bytes;
} pcl_sim_capture_t;

typedef void (*pcl_sim_capture_fn)(void *arg, const pcl_sim_capture_t *cap);
/* Fills rank's input of call `call` (in_bytes) instead of the generated inputs. */
typedef void (*pcl_sim_input_fn)(void *arg, int call, int rank, uint8_t *buf, uint64_t bytes);

#define PCL_SIM_MAX_SIZES 64

/* Start from pcl_sim_opts_init (schedule, layout, rounding_inputs and capture default to 0 /
 * NULL). Exactly one case: sizes = &size, nsizes = 1, nseeds = 1, calls_per_size = 1 and
 * layout INPLACE or OUTOFPLACE; a passing run then calls the capture hook exactly once per
 * rank (inputs and outputs of that one call). */
typedef struct {
  ncclDataType_t dtype;
  ncclRedOp_t op;        /* ignored for non-reducing collectives */
  const uint64_t *sizes; /* message sizes (registry semantics); NULL = automatic */
  int nsizes;
  uint64_t seed; /* first seed */
  int nseeds;    /* seeds seed .. seed+nseeds-1, default 4 */
  pcl_sim_packet_t packet;
  int calls_per_size;         /* default 2 */
  uint64_t max_bytes;         /* automatic sizes: cap of the largest size (0 = default) */
  int verbose;                /* 1: INFO lines per size; 2: also per call */
  int call_op_everywhere;     /* 1: every reduce op uses the call's op, whatever its reduce_op
                                 says (what-if runs; see planccl-plan --any-op) */
  pcl_sim_sched_t schedule;   /* default PCL_SIM_SCHED_BY_SEED */
  pcl_sim_layout_t layout;    /* default PCL_SIM_LAYOUT_ALL */
  int rounding_inputs;        /* 1: float inputs that make reductions round (see Inputs) */
  pcl_sim_capture_fn capture; /* optional: called once per rank and call (see above) */
  void *capture_arg;
  /* Optional: the caller's inputs (e.g. a slice of another call's, to check one segment of a
   * call the executor splits); the check against the collective's definition uses them too. */
  pcl_sim_input_fn input;
  void *input_arg;
} pcl_sim_opts_t;

typedef struct {
  pcl_sim_verdict_t verdict;
  char message[4096]; /* empty on PASS; otherwise the first failure, pointing at an op */
  int nsizes;         /* sizes actually run */
  uint64_t sizes[PCL_SIM_MAX_SIZES];
  uint64_t failed_size; /* size and seed of the failure (if any) */
  uint64_t failed_seed;
  uint64_t steps; /* scheduler steps, summed over seeds */
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
const char *pcl_sim_op_name(ncclRedOp_t op);           /* "sum", "prod", "max", "min", "avg" */
int pcl_sim_op_from_name(const char *s);               /* -1 when unknown */

#endif
