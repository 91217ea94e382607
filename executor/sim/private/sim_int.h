/* SPDX-License-Identifier: MIT
 * Private to the simulator: the simulated world (ranks, buffers with written-shadows, channel
 * semaphores, proxies, blocks) shared by sim_core.c (scheduler), sim_ops.c (op semantics),
 * sim_proxy.c (port-channel FIFO), sim_check.c (inputs and references), sim_reduce.c (math). */
#ifndef PCL_SIM_INT_H
#define PCL_SIM_INT_H

#include <stdint.h>
#include "sim.h"

/* ---- Arithmetic (sim_reduce.c) ------------------------------------------------------------ */
double pcl_sim_dtype_max(ncclDataType_t t); /* largest finite value (floats) */
double pcl_sim_load(ncclDataType_t t, const void *p);
void pcl_sim_store(ncclDataType_t t, void *p, double v);
/* acc[i] = acc[i] op src[i] for n elements (avg reduces as sum). */
void pcl_sim_reduce(ncclDataType_t t, ncclRedOp_t op, void *acc, const void *src, size_t n);
/* THE avg post-scale (see sim.h). */
void pcl_sim_avg_scale(ncclDataType_t t, void *buf, size_t n, int nranks);
double pcl_sim_ulp(ncclDataType_t t, double v);

/* ---- World ---------------------------------------------------------------------------------- */
#define SIM_TAG_HOST 0xffffffu /* writer id of host-written input bytes */
#define SIM_FIFO_CAP 512u      /* port-channel FIFO depth per rank (MSCCL++ default) */
#define SIM_MAX_OPERANDS PCL_PLAN_MAX_OP_BUFS
#define SIM_STEP_MAX (64u << 10) /* bytes one op processes per inner step (temp size) */
#define SIM_BUDGET_INF UINT64_MAX
#define SIM_CTRL_COST 64 /* budget a control op (signal, wait, ...) consumes */

enum { SIM_TRIG_DATA = 1, SIM_TRIG_FLAG = 2, SIM_TRIG_SYNC = 4 };

/* A host allocation with a shadow: one tag per 4-byte word = (call tag << 24) | writer id;
 * 0 = never written. Buffer offsets the simulator uses are always multiples of 4. */
typedef struct {
  uint8_t *data;
  uint32_t *tag;
  uint64_t bytes;
} sim_mem_t;

/* One operand of the op being executed, resolved for this call. */
typedef struct {
  int owner;      /* rank owning the buffer */
  int type;       /* pcl_plan_buf_t */
  int packet;     /* addressed as LL packets (scratch only) */
  int remote;     /* reached through a channel */
  uint64_t off;   /* payload byte offset inside the buffer (before x2 and the half offset) */
  uint64_t bytes; /* payload bytes */
  sim_mem_t *mem;
  uint64_t abs; /* byte offset in mem of payload position 0 (packets: of packet 0) */
} sim_operand_t;

typedef struct {
  sim_mem_t *src_mem, *dst_mem;
  uint64_t src_abs, dst_abs, bytes, done;
  uint8_t kind;           /* SIM_TRIG_* bits */
  int sig_rank, sig_chan; /* FLAG: the port channel whose inbound counter is bumped */
  uint32_t ctag;          /* pushing rank's call tag: the source bytes must carry it */
  uint32_t wid;           /* pushing op (global op id) */
} sim_trigger_t;

typedef struct {
  sim_trigger_t *ring; /* SIM_FIFO_CAP entries */
  uint64_t head;       /* pushed */
  uint64_t tail;       /* completed */
} sim_proxy_t;

typedef struct {
  int pc;   /* flat op index of the current (or pipeline) op */
  int done; /* finished this call's ops */
  /* pipeline in progress */
  int in_pipe, pipe_inner;
  uint64_t pipe_iter, pipe_iters;
  /* current op */
  int started;
  int phase;
  uint64_t pos;
  uint64_t len; /* payload bytes of the op (after tbg and pipeline window) */
  int nsrc, ndst;
  sim_operand_t src[SIM_MAX_OPERANDS], dst[SIM_MAX_OPERANDS];
  uint64_t target[PCL_PLAN_MAX_OP_SEMS]; /* wait targets / flush FIFO positions */
  uint64_t bar_passes[PCL_PLAN_MAX_BARRIERS];
  char why[320]; /* why the block is blocked (for deadlock reports) */
} sim_block_t;

typedef struct {
  int rank;
  const pcl_plan_gpu_t *gpu;
  pcl_plan_layout_t layout;               /* of the current call */
  sim_mem_t mem_in, mem_out, mem_scratch; /* in-place: mem_in unused */
  sim_mem_t *view_mem[PCL_PLAN_BUF_COUNT];
  uint64_t view_off[PCL_PLAN_BUF_COUNT];
  uint64_t view_bytes[PCL_PLAN_BUF_COUNT];
  int call; /* index of the current call; == ncalls when finished */
  uint32_t flag, ctag;
  int blocks_done;
  sim_block_t *blocks;
  uint64_t *inbound[2], *expected[2]; /* per memory / port channel */
  int64_t *sems;
  uint64_t bar_arrivals[PCL_PLAN_MAX_BARRIERS];
  sim_proxy_t proxy;
} sim_rank_t;

/* One call of the sequence (each size twice). Inputs of all ranks are generated when the first
 * rank starts the call and freed once every rank has checked its result. */
typedef struct {
  uint64_t size, in_bytes, out_bytes;
  uint8_t **inputs; /* [n], NULL until generated */
  uint8_t *reduced; /* cache: reduction of all inputs (out_bytes or in_bytes long) */
  int nchecked;
} sim_call_t;

typedef struct sim {
  const pcl_plan_t *plan;
  const pcl_sim_opts_t *opts;
  int n;
  ncclDataType_t dt;
  ncclRedOp_t op;
  size_t es;     /* element size */
  uint32_t P;    /* packet payload bytes: 8 (LL16) or 4 (LL8) */
  uint64_t half; /* constant scratch half (double scratch) */
  sim_rank_t *ranks;
  int ncalls;
  sim_call_t *calls;
  uint64_t seed;
  uint64_t rng;
  int *gop_base; /* [rank * max_blocks + block]: global op id of op 0 */
  uint8_t *tmp_acc, *tmp_src;
  uint64_t steps;
  int failed;
  pcl_sim_verdict_t verdict;
  char *msg;
  size_t msglen;
  uint64_t cur_size;
  int inplace; /* buffers of this run: the plan's in-place layout, or separate */
} sim_t;

/* ---- sim_core.c ------------------------------------------------------------------------------ */
/* Records the first failure (later ones are ignored); returns 0 so callers can `return fail()`. */
int sim_fail(sim_t *s, pcl_sim_verdict_t v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "gpus[r].threadblocks[b].ops[i]" (or ".ops[p].ops[j]" inside a pipeline) + " (name)". */
void sim_op_path(const sim_t *s, int rank, int block, int flat, char *buf, size_t len);
/* Describes a writer id for messages: "gpus[..]...(name)", "the host" or "nothing". */
void sim_writer_desc(const sim_t *s, uint32_t tag, char *buf, size_t len);
uint64_t sim_rand(sim_t *s);

/* ---- sim_ops.c ------------------------------------------------------------------------------- */
enum { SIM_OP_DONE = 0, SIM_OP_MORE = 1, SIM_OP_BLOCKED = 2, SIM_OP_FAILED = 3 };
/* Runs the block's current op with `budget` bytes of work; *used gets what it consumed. */
int sim_op_exec(sim_t *s, sim_rank_t *r, int b, const pcl_plan_op_t *op, int flat, uint64_t budget,
                uint64_t *used);

/* ---- sim_proxy.c ----------------------------------------------------------------------------- */
/* Pushes a trigger on rank r's FIFO; 0 when the FIFO is full (the caller waits). */
int sim_proxy_push(sim_t *s, sim_rank_t *r, const sim_trigger_t *t);
/* Lets rank r's proxy work `budget` bytes; returns 1 if it progressed. */
int sim_proxy_step(sim_t *s, sim_rank_t *r, uint64_t budget);

/* ---- sim_check.c ----------------------------------------------------------------------------- */
/* Fills `buf` with rank's input for call `call` (deterministic in seed, call, rank). */
void sim_gen_input(sim_t *s, int call, int rank, uint8_t *buf, uint64_t bytes);
/* Checks rank r's result of its current call (after the avg post-scale); 0 on mismatch. */
int sim_check_rank(sim_t *s, sim_rank_t *r, sim_call_t *c);
/* Applies the avg post-scale to rank r's result region when the call's op is avg. */
void sim_avg_finish(sim_t *s, sim_rank_t *r, sim_call_t *c);

#endif
