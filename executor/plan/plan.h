/* SPDX-License-Identifier: MIT
 * Parsed execution plans: the immutable C form of an MSCCL++ executor JSON plan (reference
 * mscclpp.md §2), the loader/validator entry points, and the chunk -> byte layout math that the
 * executor and the CPU simulator use for one message size. */
#ifndef PCL_PLAN_H
#define PCL_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>

/* ---- Limits (checked by the validator; they mirror the kernel's device structs) ------------ */
#define PCL_PLAN_MAX_GPUS 1024  /* len(gpus) */
#define PCL_PLAN_MAX_BLOCKS 132 /* blocks per rank: one per SM, grid barriers need co-residency */
#define PCL_PLAN_MAX_OPS_PER_BLOCK                                                                 \
  64 /* flattened: a pipeline op and each of its inner ops count 1 */
#define PCL_PLAN_MAX_BLOCK_CHANNELS 16 /* per channel type (memory, port, switch) per block */
#define PCL_PLAN_MAX_BLOCK_RBUFS 16    /* remote-buffer slots per access type per block */
#define PCL_PLAN_MAX_OP_CHANNELS 16    /* channel_ids per op (a port op: one per dst_buff entry) */
/* Nominal local refs per side (MSCCL++'s split): only the total PCL_PLAN_MAX_OP_BUFS is
 * enforced, since reduce-packet ops read 1 + (n-1) local slots. */
#define PCL_PLAN_MAX_OP_LOCAL_BUFS 2
/* Remote (or switch) buffer refs per op side: 2 + 14 = 16 refs, what the interpreter's handlers
 * take per side (kernel_abi.h, PCL_KABI_MAX_OP_REFS); MSCCL++'s 2 x 8-GPU packet reduce-scatter
 * reads 14 scratch slots in one op. */
#define PCL_PLAN_MAX_OP_REMOTE_BUFS 14
#define PCL_PLAN_MAX_OP_BUFS (PCL_PLAN_MAX_OP_LOCAL_BUFS + PCL_PLAN_MAX_OP_REMOTE_BUFS)
#define PCL_PLAN_MAX_BARRIERS 16             /* barrier_id in [0, 16) */
#define PCL_PLAN_MAX_OP_SEMS 16              /* semaphore_ids per op */
#define PCL_PLAN_MAX_SEMAPHORES 256          /* semaphores per gpu */
#define PCL_PLAN_MAX_THREADS 1024            /* num_threads_per_block */
#define PCL_PLAN_MAX_BUF_BYTES 0xffffffffull /* device offsets are uint32: < 4 GiB per buffer */

/* ---- Enumerations ---------------------------------------------------------------------- */
typedef enum {
  PCL_PLAN_COLL_ALLREDUCE = 0,
  PCL_PLAN_COLL_ALLGATHER,
  PCL_PLAN_COLL_REDUCESCATTER,
  PCL_PLAN_COLL_BROADCAST,
  PCL_PLAN_COLL_REDUCE, /* planccl: "reduce" (MSCCL++ has no such collective string) */
  PCL_PLAN_COLL_ALLTOALL,
  PCL_PLAN_COLL_SENDRECV,
  PCL_PLAN_COLL_TEST,
  PCL_PLAN_COLL_CUSTOM,
  PCL_PLAN_COLL_COUNT
} pcl_plan_coll_t;

typedef enum { PCL_PLAN_PROTO_SIMPLE = 0, PCL_PLAN_PROTO_LL = 1 } pcl_plan_proto_t;

/* Buffer types ("i", "o", "s"). Used as array indices: keep the values. */
typedef enum {
  PCL_PLAN_BUF_INPUT = 0,
  PCL_PLAN_BUF_OUTPUT = 1,
  PCL_PLAN_BUF_SCRATCH = 2,
  PCL_PLAN_BUF_COUNT = 3,
  PCL_PLAN_BUF_NONE = 255
} pcl_plan_buf_t;

/* Channel types. Used as array indices (memory/port/switch): keep the values. */
typedef enum {
  PCL_PLAN_CHAN_MEMORY = 0,
  PCL_PLAN_CHAN_PORT = 1,
  PCL_PLAN_CHAN_SWITCH = 2,
  PCL_PLAN_CHAN_COUNT = 3,
  PCL_PLAN_CHAN_NONE = 255 /* op without channel ("none" or absent) */
} pcl_plan_chan_t;

/* Every op of mscclpp.md §2.6. Old v0.7 names are mapped when loading: rrc->RRE, rrcs->RRES,
 * rs->RES, rspkt->RESPKT, rpkt->REPKT, tpkt->CPKT (to packets), and channel types sm->memory,
 * proxy->port, nvls->switch. A v0.7 "cpkt" meant "copy out of packets": it is mapped to UPKT
 * when the plan is in the old dialect (it uses any old-only op or channel name, see
 * pcl_plan_t.legacy_names); otherwise "cpkt" is the current COPY_PACKETS. */
typedef enum {
#define PCL_OP(id, ...) PCL_PLAN_OP_##id,
#include "ops.def"
#undef PCL_OP
  PCL_PLAN_OP_COUNT
} pcl_plan_op_type_t;

/* What the op table (common/ops.def) says of each op; the validator, the simulator and the
 * program builder read it instead of listing ops themselves. */
#define PCL_OPF_SYNC 1u     /* signal / wait / flush on channels */
#define PCL_OPF_PKT 2u      /* reads or writes LL packets in scratch (needs protocol LL) */
#define PCL_OPF_RED 4u      /* carries a reduction */
#define PCL_OPF_NVLS 8u     /* NVLink multicast: refused by the validator */
#define PCL_OPF_SIGNALS 16u /* signals its channels' peers (signal, rlxsignal, pws, pwsf) */
#define PCL_OPF_WAITS 32u   /* waits for its channels' peers' signals (wait, rlxwait) */
#define PCL_OPCH_MEM (1u << PCL_PLAN_CHAN_MEMORY)
#define PCL_OPCH_PORT (1u << PCL_PLAN_CHAN_PORT)
#define PCL_OPCH_ANY (PCL_OPCH_MEM | PCL_OPCH_PORT)
typedef enum {
  PCL_OPIDS_ANY = 0, /* channel_ids not checked by the table */
  PCL_OPIDS_NONE,    /* takes no channel_ids */
  PCL_OPIDS_ONE,     /* needs at least one */
  PCL_OPIDS_PORT     /* on a port channel: one per dst_buff entry, each to that entry's peer */
} pcl_plan_opids_t;
#define PCL_OPN_SRC (-1) /* a count equal to the op's number of src_buff entries */
#define PCL_OPN_REMOTE PCL_PLAN_MAX_OP_REMOTE_BUFS
#define PCL_OPN_BUFS PCL_PLAN_MAX_OP_BUFS
#define PCL_OPPKT_NONE 255 /* no packet operand on this side */
#define PCL_OPPKT_PORT 254 /* every operand of this side, on a port channel only */
typedef struct {
  const char *name;         /* JSON name */
  uint8_t flags;            /* PCL_OPF_* */
  uint8_t chans;            /* channel kinds the op needs (PCL_OPCH_*), 0: it needs none */
  uint8_t ids;              /* pcl_plan_opids_t */
  uint8_t src_pkt, dst_pkt; /* first packet operand per side, or PCL_OPPKT_* */
  int16_t src_min, src_max, dst_min, dst_max; /* entry counts; PCL_OPN_SRC allowed */
} pcl_plan_opinfo_t;
extern const pcl_plan_opinfo_t pcl_plan_ops[PCL_PLAN_OP_COUNT];

/* Reduction of reduce ops. planccl honours it (MSCCL++ always sums). NONE on non-reduce ops;
 * reduce ops without "reduce_op" get SUM. Values equal ncclRedOp_t for sum..avg. */
typedef enum {
  PCL_PLAN_RED_SUM = 0,
  PCL_PLAN_RED_PROD = 1,
  PCL_PLAN_RED_MAX = 2,
  PCL_PLAN_RED_MIN = 3,
  PCL_PLAN_RED_AVG = 4,
  PCL_PLAN_RED_NONE = 255
} pcl_plan_red_t;

/* ---- Structures (all immutable after load; owned by the pcl_plan_t) -------------------- */

/* Kinds of buffer reference in src_buff/dst_buff. */
typedef enum {
  PCL_PLAN_REF_LOCAL = 0,  /* {type, index, size}: this rank's own buffer */
  PCL_PLAN_REF_REMOTE = 1, /* {buffer_id, index, size}: a peer's buffer via a remote-buffer slot */
  PCL_PLAN_REF_SWITCH = 2  /* {switch_channel_id, index, size}: NVLS (refused) */
} pcl_plan_ref_kind_t;

typedef struct {
  uint8_t kind;   /* pcl_plan_ref_kind_t */
  uint8_t type;   /* pcl_plan_buf_t of the addressed buffer (remote: the remote buffer's type,
                     switch: the switch channel's buffer type), resolved at load */
  uint16_t slot;  /* REMOTE: the block-local remote-buffer slot ("buffer_id") within the block's
                     refs of the op's channel type; SWITCH: block-local switch channel slot;
                     LOCAL: 0 */
  int32_t rbuf;   /* REMOTE: resolved gpu-level remote_buffers index; else -1 */
  int32_t rank;   /* owner rank of the addressed buffer (LOCAL: this gpu's rank; SWITCH: -1) */
  uint32_t index; /* first chunk */
  uint32_t size;  /* number of chunks (index + size <= the buffer's chunk count) */
} pcl_plan_ref_t;

typedef struct pcl_plan_op {
  uint8_t type;         /* pcl_plan_op_type_t */
  uint8_t channel_type; /* pcl_plan_chan_t, PCL_PLAN_CHAN_NONE when absent or "none" */
  uint8_t reduce_op;    /* pcl_plan_red_t */
  uint8_t n_channels;   /* entries in channels[] */
  uint8_t n_src, n_dst; /* entries in src[] / dst[], in JSON order */
  uint8_t n_sems;       /* entries in sem_ids[] */
  uint8_t pad0;
  uint16_t channels[PCL_PLAN_MAX_OP_CHANNELS];    /* block-local channel slots (JSON channel_ids) */
  int16_t gpu_channels[PCL_PLAN_MAX_OP_CHANNELS]; /* resolved gpu-level channel index (per type) */
  pcl_plan_ref_t src[PCL_PLAN_MAX_OP_BUFS];
  pcl_plan_ref_t dst[PCL_PLAN_MAX_OP_BUFS];
  uint16_t tbg_id, tbg_size;              /* thread-block-group slice: default 0 / 1 */
  int16_t barrier_id;                     /* BARRIER: [0, PCL_PLAN_MAX_BARRIERS); else -1 */
  uint16_t num_threadblocks;              /* BARRIER: blocks taking part */
  uint16_t sem_ids[PCL_PLAN_MAX_OP_SEMS]; /* SEM_*: gpu-level semaphore indices */
  /* PIPELINE only: the next n_inner ops of the block's flat array are its body. Iterations for
   * one size: ceil(num_chunks * chunk_bytes / unit_size) (pcl_plan_pipeline_iters). */
  uint32_t unit_size;  /* bytes, > 0, multiple of buffer_alignment */
  uint32_t num_chunks; /* > 0 */
  uint16_t n_inner;
  uint8_t in_pipeline; /* 1 for the inner ops of a pipeline */
  uint8_t pad1;
} pcl_plan_op_t;

typedef struct {
  int id;    /* == index == blockIdx.x */
  int n_ops; /* flat count (pipelines + their inner ops) */
  pcl_plan_op_t *ops;
  /* Local channel slot -> gpu-level channel index, per channel type. */
  int n_channels[PCL_PLAN_CHAN_COUNT];
  int16_t channels[PCL_PLAN_CHAN_COUNT][PCL_PLAN_MAX_BLOCK_CHANNELS];
  /* Local remote-buffer slot -> gpu-level remote_buffers index, per access channel type
   * (memory, port; the switch row stays empty). */
  int n_rbufs[PCL_PLAN_CHAN_COUNT];
  int16_t rbufs[PCL_PLAN_CHAN_COUNT][PCL_PLAN_MAX_BLOCK_RBUFS];
} pcl_plan_block_t;

/* One memory or port channel of a gpu (flattened in JSON order per type). */
typedef struct {
  int32_t peer;         /* rank at the other end */
  int32_t peer_channel; /* index, in the peer's list of channels of the same type, of the
                           channel that pairs with this one: the k-th channel of A to B pairs
                           with the k-th channel of B to A (validated to exist) */
} pcl_plan_channel_t;

/* One switch (NVLS) channel: one per rank group. Parsed, then refused by the validator. */
typedef struct {
  uint8_t buffer_type; /* pcl_plan_buf_t */
  int n_ranks;
  int32_t *ranks;
  uint32_t size; /* rank group "size" (chunks) */
} pcl_plan_switch_t;

typedef struct {
  int32_t rank;   /* owner */
  uint8_t type;   /* pcl_plan_buf_t of the owner's buffer */
  uint8_t access; /* bit mask: 1u << PCL_PLAN_CHAN_MEMORY | 1u << PCL_PLAN_CHAN_PORT */
} pcl_plan_rbuf_t;

typedef struct {
  int id;                              /* == rank */
  uint32_t chunks[PCL_PLAN_BUF_COUNT]; /* input_chunks, output_chunks, scratch_chunks */
  int n_channels[2];                   /* memory, port */
  pcl_plan_channel_t *channels[2];     /* [PCL_PLAN_CHAN_MEMORY], [PCL_PLAN_CHAN_PORT] */
  int n_switch;
  pcl_plan_switch_t *switches;
  int n_rbufs;
  pcl_plan_rbuf_t *rbufs; /* remote_buffers */
  int n_sems;
  uint32_t *sem_init; /* semaphores[].init_value */
  int n_blocks;
  pcl_plan_block_t *blocks; /* threadblocks, index == id */
  uint64_t io_digest;       /* of this gpus[] entry as written, local "i" refs read as "o"
                               (plan_digest.c; pcl_plan_nonroot_alike) */
} pcl_plan_gpu_t;

typedef struct pcl_plan {
  char *name; /* "name" */
  char *path; /* the file (or buffer name) it was loaded from */
  pcl_plan_coll_t collective;
  pcl_plan_proto_t protocol;
  int inplace;
  int outofplace_ok;         /* planccl extension "outofplace_ok" (default false): an in-place plan
                                that also runs correctly on separate buffers */
  int reuse_resources;       /* parsed; planccl sizes scratch per plan either way (a hint only) */
  int num_threads_per_block; /* default 1024 */
  int use_double_scratch_buffer;
  uint32_t buffer_alignment; /* default 16, power of two, >= 4 */
  uint64_t min_message_size; /* inclusive, default 0 */
  uint64_t max_message_size; /* inclusive, default UINT64_MAX */
  int nranks_per_node; /* extension; absent: inferred from the memory channels at validation */
  int nranks_per_node_given; /* the plan's JSON names it */
  int priority;              /* extension, default 0 */
  int n_gpus;
  pcl_plan_gpu_t *gpus;        /* index == rank */
  int max_blocks;              /* max over gpus of n_blocks: the grid size */
  int legacy_names;            /* 1 when v0.7 op/channel names were seen and mapped */
  uint32_t max_scratch_chunks; /* max over gpus of scratch_chunks (scratch sizing) */
  uint32_t reduce_ops_mask;    /* bit r set when some reduce op names reduce_op r (avg excluded) */
  int needs_userbuf; /* some op reaches a peer's input/output, or a port op names a local one:
                        it runs only on registered buffers (zero-copy) */
} pcl_plan_t;

/* ---- Loading ---------------------------------------------------------------------------- */
/* Accepted JSON: exactly the fields of mscclpp.md §2 plus the planccl extensions documented on
 * pcl_plan_t (nranks_per_node, priority, outofplace_ok, per-op reduce_op honoured) and an
 * ignored top-level "version". Any other key is refused ("unknown field"), except keys
 * starting with '_' (comments), which are ignored everywhere. Duplicate keys are refused. */

/* Parses and validates a plan file. On failure *out is NULL and err holds
 * "file: json.path: reason" (also logged at WARN by the caller's choice: the loader itself logs
 * at INFO only, so the registry decides how loud a refusal is).
 * Returns ncclInvalidArgument for a bad plan, ncclSystemError for I/O errors or out of memory. */
ncclResult_t pcl_plan_load(const char *path, pcl_plan_t **out, char *err, size_t errlen);

/* Same from memory; `name` stands in for the file name in messages and in plan->path. */
ncclResult_t pcl_plan_load_buffer(const char *name, const char *json, size_t len, pcl_plan_t **out,
                                  char *err, size_t errlen);

/* Frees everything the plan owns; NULL is fine. */
void pcl_plan_destroy(pcl_plan_t *plan);

/* ---- Names ------------------------------------------------------------------------------ */
/* Any root by relabelling: broadcast and reduce plans are written for root 0, and a call with
 * root R runs on rank p the program of plan rank (p - R) mod n, its plan peer q bound to rank
 * (q + R) mod n (exec.h, pcl_exec_vrank). Returns R for those collectives (0 for every other),
 * or -1 when the rotation cannot run: root outside [0, n), or a multi-node plan whose rotation
 * would move ranks across nodes (only multiples of nranks_per_node keep each node together). */
int pcl_plan_root_shift(const pcl_plan_t *p, int root);
const char *pcl_plan_coll_name(pcl_plan_coll_t c);  /* "allreduce", ... */
int pcl_plan_coll_from_name(const char *s);         /* -1 when unknown */
const char *pcl_plan_op_name(pcl_plan_op_type_t t); /* current mnemonic: "ppkt", ... */
const char *pcl_plan_chan_name(int chan_type);      /* "memory", "port", "switch", "none" */
const char *pcl_plan_buf_name(int buf_type);        /* "i", "o", "s" */

/* Is operand i of src_buff (dst = 0) or dst_buff (dst = 1) a packet range? From the op table;
 * the simulator and the program builder both ask here. */
int pcl_plan_operand_is_packet(const pcl_plan_op_t *op, int dst, int i);

/* Does the proxy read or write operand i (as above), so that a user buffer there must be
 * registered with the port transport? Every operand of a port op, except those of a port
 * recspkt that the kernel alone touches: its sources and its plain result dst_buff[0] (the
 * proxy sends the packet copy dst_buff[1], always scratch, to dst_buff[2..]). */
int pcl_plan_operand_by_proxy(const pcl_plan_op_t *op, int dst, int i);

/* Channel i of a gpu's list of one type is its k-th channel to that peer (k returned, from 0):
 * the transport channel it binds to. */
int pcl_plan_chan_index(const pcl_plan_channel_t *ch, int i);

/* May a and b (a rooted collective's in-place and out-of-place plans) run in one call, the root
 * on one and the other ranks on either? NCCL lets a non-root's sendbuff be anything (NULL
 * included), so only the root's view of in-place is the call's, and ranks may choose
 * differently. Yes when every non-root program (gpus 1.., the root relabelled to 0) is the same
 * up to local input vs output (the same memory for an in-place rank) and the shared layout
 * (protocol, threads, scratch, alignment) agrees. 1 also for a == b. */
int pcl_plan_nonroot_alike(const pcl_plan_t *a, const pcl_plan_t *b);

/* ---- Layout: chunk -> bytes for one message size --------------------------------------- */
/* Message size semantics (what min/max_message_size and the registry compare against):
 *   allreduce, broadcast, reduce, alltoall, sendrecv, test, custom: count * element size
 *     (in_bytes = out_bytes = size);
 *   allgather: total OUTPUT bytes (in_bytes = size / nranks, out_bytes = size);
 *   reducescatter: total INPUT bytes (in_bytes = size, out_bytes = size / nranks).
 * Chunk math (as MSCCL++): one chunk size for all three buffers, taken from the input
 * (input_chunks > 0) or else the output: chunk_bytes = in_bytes / input_chunks. A size is
 * runnable only if in/out bytes are multiples of buffer_alignment * chunks (so all chunks are
 * equal and input/output chunk sizes agree). Chunk i of any buffer starts at i * chunk_bytes.
 * Thread-block-group slices split a range into tbg_size balanced slices in alignment units
 * (the first `remainder` slices one unit longer): pcl_plan_tbg_slice. */
typedef struct {
  int rank;
  uint64_t in_bytes, out_bytes;           /* bytes the plan addresses in the user's buffers */
  uint64_t chunk_bytes;                   /* one chunk, every buffer */
  uint64_t buf_bytes[PCL_PLAN_BUF_COUNT]; /* chunks[t] * chunk_bytes (scratch: payload only) */
  uint32_t align;                         /* buffer_alignment */
  /* Scratch sizing. Offsets returned by pcl_plan_chunk_offset for the scratch are PAYLOAD
   * offsets; packet ops (LL) address scratch at 2x the payload offset (LL8 and LL16 both carry
   * 50% payload) — the kernel/simulator does that multiplication, not this layout.
   * scratch_half_bytes = buf_bytes[SCRATCH] * (LL ? 2 : 1), rounded up to align;
   * scratch_bytes = scratch_half_bytes * (use_double_scratch_buffer ? 2 : 1): what must be
   * allocated; with double scratch the half in use is (flag & 1) * scratch_half_bytes. */
  uint64_t scratch_half_bytes;
  uint64_t scratch_bytes;
} pcl_plan_layout_t;

/* In/out byte counts for a message size per the semantics above; -1 when size does not divide
 * (allgather/reducescatter need size % n_gpus == 0). */
int pcl_plan_buffer_bytes(const pcl_plan_t *plan, uint64_t msg_bytes, uint64_t *in_bytes,
                          uint64_t *out_bytes);

/* Fills *out for `rank` (no allocation). ncclInvalidArgument when the sizes cannot be split. */
ncclResult_t pcl_plan_layout(const pcl_plan_t *plan, int rank, uint64_t in_bytes,
                             uint64_t out_bytes, pcl_plan_layout_t *out);

/* Byte offset / size of chunk `index` (or of `nchunks` chunks from index) in buffer `buf`. */
static inline uint64_t pcl_plan_chunk_offset(const pcl_plan_layout_t *l, int buf, uint32_t index) {
  (void)buf;
  return (uint64_t)index * l->chunk_bytes;
}
static inline uint64_t pcl_plan_chunk_size(const pcl_plan_layout_t *l, int buf, uint32_t nchunks) {
  (void)buf;
  return (uint64_t)nchunks * l->chunk_bytes;
}

/* Slice `tb_id` of `tbg_size` of a byte range of `bytes` (multiple of align): balanced in
 * alignment units. Writes the slice's offset (relative to the range) and length. */
void pcl_plan_tbg_slice(uint64_t bytes, uint32_t align, uint32_t tb_id, uint32_t tbg_size,
                        uint64_t *off, uint64_t *len);

/* Iterations of a PIPELINE op for a layout: ceil(num_chunks * chunk_bytes / unit_size). */
uint64_t pcl_plan_pipeline_iters(const pcl_plan_layout_t *l, const pcl_plan_op_t *op);

/* 1 when the plan computes the call's reduction `op` (an ncclRedOp_t): plans that name no
 * reduce_op take the call's op; a plan that names one runs only calls of that op (avg counts as
 * sum, since avg is a sum scaled afterwards). */
int pcl_plan_accepts_op(const pcl_plan_t *plan, int op);

/* 1 when the plan can run a message of `msg_bytes` (see semantics above): inside
 * [min, max], splits into chunks on every rank, every buffer < 4 GiB. 0 otherwise. */
int pcl_plan_size_runnable(const pcl_plan_t *plan, uint64_t msg_bytes);

/* 1 when the plan can run a message in one call, or else in segments (below) because only its
 * scratch is too large to address: what the registry selects by. The same on every rank. */
int pcl_plan_size_selectable(const pcl_plan_t *plan, uint64_t msg_bytes);

/* Largest scratch_bytes over all ranks for a message size (0 if not runnable). */
uint64_t pcl_plan_scratch_bytes(const pcl_plan_t *plan, uint64_t msg_bytes);

/* Segments are multiples of this (every element size divides it). */
#define PCL_PLAN_SEGMENT_ALIGN (1ull << 20)
/* An elementwise collective (allreduce, broadcast, reduce: in and out the message's size) can run
 * a message as consecutive segments of one plan, each an independent call on a sub-range of the
 * buffers, which bounds the scratch a staged plan needs. Returns the segment size for a scratch
 * of `avail` bytes: msg_bytes when its scratch fits (one segment); else the largest multiple of
 * PCL_PLAN_SEGMENT_ALIGN whose scratch fits, evened out so the last segment is as long as it
 * can be; 0 when msg_bytes is outside the plan's range, the collective is not elementwise, or
 * no segment (the last included) both fits and is runnable. A message that is not runnable
 * whole for its scratch alone (over 4 GiB) splits too. The same on every rank. */
uint64_t pcl_plan_segment_bytes(const pcl_plan_t *plan, uint64_t msg_bytes, uint64_t avail);

/* Upper bound of scratch_bytes (all ranks) for every runnable size <= msg_bytes (and within the
 * plan's range), whether or not msg_bytes itself is runnable: for sizing a scratch buffer. */
uint64_t pcl_plan_scratch_bytes_bound(const pcl_plan_t *plan, uint64_t msg_bytes);

#endif
