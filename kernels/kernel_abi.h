/* SPDX-License-Identifier: MIT
 * The host<->device ABI of the plan interpreter: plain fixed-width C structs compiled by both gcc
 * and nvcc. The host (executor/exec*.c) fills them, copies them to device memory once per
 * (plan, communicator, message shape), and the kernels (kernels/, CUDA) read them. */
#ifndef PCL_KERNEL_ABI_H
#define PCL_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>
#include "fifo_device.h" /* transport/: pcl_fifo_device_t, the port-channel trigger FIFO */

#ifdef __cplusplus
#define PCL_KABI_ASSERT(c, m) static_assert(c, m)
extern "C" {
#else
#define PCL_KABI_ASSERT(c, m) _Static_assert(c, m)
#endif
#define PCL_KABI_ALIGN(n) __attribute__((aligned(n)))

/* ---- limits (the plan validator refuses plans beyond them) ---- */
#define PCL_KABI_MAX_OPS 64         /* ops per block, pipeline inner ops included */
#define PCL_KABI_MAX_REFS 256       /* buffer refs per block (all ops' srcs and dsts) */
#define PCL_KABI_MAX_MEMCHANS 16    /* memory-channel slots per block */
#define PCL_KABI_MAX_PORTCHANS 16   /* port-channel slots per block */
#define PCL_KABI_MAX_REMOTES 16     /* remote-buffer slots per block */
#define PCL_KABI_MAX_OP_IDS 16      /* channel slots / semaphore ids of one op */
#define PCL_KABI_MAX_OP_REFS 16     /* buffer refs per op side the interpreter's handlers take */
#define PCL_KABI_MAX_BARRIERS 16    /* grid barrier ids per plan */
#define PCL_KABI_LL_MAX_SRC 9       /* LL fast path: sources of one packet op (1 + 8 peers) */
#define PCL_KABI_LL_MAX_THREADS 512 /* LL fast path: threads per block (128 registers each) */
#define PCL_KABI_MAX_SEMAPHORES 256 /* intra-GPU device semaphores per plan */
#define PCL_KABI_MAX_BLOCKS                                                                        \
  1024 /* blocks per plan (grid barriers need co-residency: the                                    \
        * validator also checks the device's SM count) */

/* ---- LL packets ----
 * LL16: one 16-byte store of {data1, flag, data2, flag}. A reader accepts it only when both
 * flags equal the expected flag; this relies on each 8-byte half {data, flag} being written
 * atomically (NVLink/PCIe 8-byte write atomicity), never on 16-byte atomicity. Payload 8 bytes.
 * LL8: one 8-byte store of {data, flag}; relies on 8-byte atomicity. Payload 4 bytes.
 * Both use half of the packet for flags, so a packet region is 2x the payload it carries.
 * The flag is the call's 32-bit flag (never 0: scratch starts zeroed and flags start at 1). */
typedef struct PCL_KABI_ALIGN(16) {
  uint32_t data1;
  uint32_t flag1;
  uint32_t data2;
  uint32_t flag2;
} pcl_ll16_packet_t;

typedef struct PCL_KABI_ALIGN(8) {
  uint32_t data;
  uint32_t flag;
} pcl_ll8_packet_t;

PCL_KABI_ASSERT(sizeof(pcl_ll16_packet_t) == 16, "LL16 packet is 16 bytes");
PCL_KABI_ASSERT(offsetof(pcl_ll16_packet_t, flag1) == 4, "LL16 flag1 after data1");
PCL_KABI_ASSERT(offsetof(pcl_ll16_packet_t, flag2) == 12, "LL16 flag2 after data2");
PCL_KABI_ASSERT(sizeof(pcl_ll8_packet_t) == 8, "LL8 packet is 8 bytes");

typedef enum { PCL_KPKT_LL16 = 0, PCL_KPKT_LL8 = 1, PCL_KPKT_COUNT = 2 } pcl_kpkt_t;

/* Packet space = 2 x payload space for both packet types: a packet op at payload byte offset o
 * touches packet bytes [2o, 2o + 2size) of its scratch buffer. */
#define PCL_KABI_PKT_RATIO 2

/* ---- buffers ---- */
typedef enum {
  PCL_KBUF_INPUT = 0,   /* user input: base pointer is a kernel argument */
  PCL_KBUF_OUTPUT = 1,  /* user output: base pointer is a kernel argument */
  PCL_KBUF_SCRATCH = 2, /* communicator scratch (+ this plan's double-buffer half) */
  PCL_KBUF_REMOTE = 3,  /* a remote buffer: pcl_kref_t.slot indexes pcl_kblock_t.remote[] */
  PCL_KBUF_COUNT = 4
} pcl_kbuf_t;

/* One buffer range of an op, in payload bytes, with thread-block-group slicing already applied
 * by the host. Pipelined ops are split further on the device (see pcl_kop_t). */
typedef struct {
  uint32_t offset; /* bytes from the buffer base (packet ops double it for packet buffers) */
  uint32_t size;   /* bytes */
  uint8_t kind;    /* pcl_kbuf_t */
  uint8_t slot;    /* PCL_KBUF_REMOTE: index into pcl_kblock_t.remote[] */
  uint16_t reserved;
} pcl_kref_t;
PCL_KABI_ASSERT(sizeof(pcl_kref_t) == 12, "ref layout");

/* A remote buffer as one block sees it. Memory access: `ptr` is the peer-mapped base address of
 * the peer's buffer (peer scratch always; peer input/output only for registered user buffers).
 * Port access: `mem_id` names the buffer in the proxy's registered-memory table. */
typedef struct {
  uint64_t ptr;      /* device address (as integer), 0 when not memory-accessible */
  uint64_t odd_half; /* bytes added on odd flags: the PEER's scratch half of this plan when the
                        plan double-buffers its scratch (peers may size scratch differently),
                        else 0. Applies to ptr and to port offsets alike. */
  uint32_t mem_id;   /* proxy memory id, PCL_KABI_NO_MEM when not port-accessible */
  uint8_t kind;      /* the peer's pcl_kbuf_t (INPUT/OUTPUT/SCRATCH) */
  uint8_t reserved[3];
} pcl_kremote_t;
PCL_KABI_ASSERT(sizeof(pcl_kremote_t) == 24, "remote layout");
#define PCL_KABI_NO_MEM 0xffffffffu

/* ---- channels ---- */

/* Memory channel (GPU threads touch peer memory directly) with its device-to-device semaphore.
 * Ordering: signal = one thread does a release, system-scope atomic add of 1 to *remote_inbound
 * (after the block's stores, ordered by a preceding __syncthreads/nop in the plan);
 * relaxed signal uses a relaxed add. wait = one thread increments *local_expected (only this
 * channel's one waiter touches it) and spins on an acquire load until *local_inbound >= it.
 * Counters are monotonic and never reset; plans pair signals and waits per channel. */
typedef struct {
  uint64_t remote_inbound; /* uint64_t*: the peer's inbound token for this channel (peer-mapped) */
  uint64_t local_inbound;  /* uint64_t*: my inbound token, incremented by the peer */
  uint64_t local_expected; /* uint64_t*: my expected count (device memory) */
  uint64_t remote_base[3]; /* peer's INPUT, OUTPUT, SCRATCH bases, 0 when not mapped */
} pcl_kmemchan_t;
PCL_KABI_ASSERT(sizeof(pcl_kmemchan_t) == 48, "memchan layout");

/* Port channel (one GPU thread posts triggers to the host proxy). Data triggers name memories by
 * id: local input/output/scratch registered with the proxy are src_mem[kind]; the destination
 * comes from the op's remote ref (pcl_kremote_t.mem_id). Flag triggers increment the peer's
 * inbound token for channel `chan_id`; the proxy writes it after the preceding data of the same
 * channel is complete. wait: like the memory channel, on a token the proxy (host) updates. */
typedef struct {
  pcl_fifo_device_t fifo;  /* 48 bytes, transport/fifo_device.h */
  uint64_t local_inbound;  /* uint64_t*: token the proxy increments on the peer's signal */
  uint64_t local_expected; /* uint64_t*: my expected count (device memory) */
  uint32_t src_mem[3];     /* proxy memory ids of my INPUT, OUTPUT, SCRATCH (PCL_KABI_NO_MEM) */
  uint32_t chan_id;        /* proxy channel (= semaphore) id, 10 bits */
} pcl_kportchan_t;
PCL_KABI_ASSERT(sizeof(pcl_kportchan_t) == 80, "portchan layout");

/* ---- ops ---- */
/* The kernel ops are the plan ops of common/ops.def that have a kernel handler (kernel K), in
 * the table's order. */
#define PCL_KOPDEF_K(id) PCL_KOP_##id,
#define PCL_KOPDEF_X(id)
typedef enum {
#define PCL_OP(id, name, kernel, ...) PCL_KOPDEF_##kernel(id)
#include "ops.def"
#undef PCL_OP
  PCL_KOP_COUNT
} pcl_kop_type_t;

typedef enum { PCL_KCHAN_NONE = 0, PCL_KCHAN_MEMORY = 1, PCL_KCHAN_PORT = 2 } pcl_kchan_t;

/* One op. Its refs are refs[ref_first .. ref_first + nsrc) (sources) followed by ndst
 * destinations. ids[] holds local channel slots (signal/wait/flush/put...), semaphore ids
 * (sem_*), or ids[0] = barrier id (barrier, with nblocks).
 * Pipeline: the next n_inner ops of the block are run n_iter times; in iteration i every ref of
 * an inner op covers [offset + i*unit, offset + min(size, (i+1)*unit)); a scratch ref's offset
 * inside the iteration wraps modulo scratch_wrap when it is nonzero (reuse_resources plans). */
typedef struct PCL_KABI_ALIGN(8) {
  uint8_t type;      /* pcl_kop_type_t */
  uint8_t chan_type; /* pcl_kchan_t */
  uint8_t nsrc;
  uint8_t ndst;
  uint8_t nids;
  uint8_t pad0;
  uint16_t ref_first;
  uint16_t n_inner;      /* pipeline */
  uint16_t nblocks;      /* barrier: blocks taking part */
  uint32_t n_iter;       /* pipeline */
  uint32_t unit;         /* pipeline: bytes per iteration */
  uint32_t scratch_wrap; /* pipeline: bytes, 0 = none */
  uint8_t ids[PCL_KABI_MAX_OP_IDS];
  uint8_t redop; /* reduce ops: the plan's ncclRedOp_t, PCL_KOP_REDOP_CALL = the call's op
                    (avg always reduces as sum; the host scales the result afterwards) */
  uint8_t reserved[3];
} pcl_kop_t;
#define PCL_KOP_REDOP_CALL 0xffu
PCL_KABI_ASSERT(sizeof(pcl_kop_t) == 48, "op layout");

/* pcl_kblock_t.flags. FUSED_PPKT_REPKT: the block's ops are exactly [ppkt S -> packets D1..Dk,
 * repkt S + packets P1..Pk -> O] over memory channels, every range of one size, O either S or in
 * another buffer: the one-phase LL allreduce of every shipped plan. The LL kernel then runs both
 * ops as one pass per element (S loaded once, kept in registers), with the ops' results. */
#define PCL_KBLOCK_FUSED_PPKT_REPKT 1u

/* ---- the per-block program ----
 * Every block copies the header and the used prefix of each array (by the counts in the header)
 * into dynamic shared memory at kernel start with 16-byte loads, so the struct's size and its
 * arrays' offsets are multiples of 16; it stays well under the 48 KiB default limit. */
typedef struct PCL_KABI_ALIGN(16) {
  uint16_t nops;
  uint16_t nrefs;
  uint8_t nmem;
  uint8_t nport;
  uint8_t nremote;
  uint8_t flags; /* PCL_KBLOCK_*: set by the host after building (pcl_exec_mark_fused) */
  uint64_t reserved1;
  pcl_kmemchan_t mem[PCL_KABI_MAX_MEMCHANS];
  pcl_kportchan_t port[PCL_KABI_MAX_PORTCHANS];
  pcl_kremote_t remote[PCL_KABI_MAX_REMOTES];
  pcl_kop_t ops[PCL_KABI_MAX_OPS];
  pcl_kref_t refs[PCL_KABI_MAX_REFS];
} pcl_kblock_t;
PCL_KABI_ASSERT(sizeof(pcl_kblock_t) % 16 == 0, "block program copied with 16-byte loads");
PCL_KABI_ASSERT(offsetof(pcl_kblock_t, mem) % 16 == 0 && offsetof(pcl_kblock_t, port) % 16 == 0 &&
                    offsetof(pcl_kblock_t, remote) % 16 == 0 &&
                    offsetof(pcl_kblock_t, ops) % 16 == 0 && offsetof(pcl_kblock_t, refs) % 16 == 0,
                "arrays start on 16-byte boundaries: they are copied by prefix");
PCL_KABI_ASSERT(sizeof(pcl_kblock_t) <= 16 * 1024, "block program fits the shared budget");

/* ---- the packed program (what the device holds and copies) ----
 * The kernel copies its block's program into shared memory with ONE round of parallel 16-byte
 * loads (no load depends on another), so the device holds each block packed: the 16-byte
 * header of pcl_kblock_t, then the used prefix of each table in the order mem, port, remote,
 * ops, refs, each starting on a 16-byte boundary (offsets follow from the counts alone). Every
 * block of a program is padded to one stride (the largest block's size), so block b's image
 * starts at b * stride bytes; the stride is also the kernel's dynamic shared memory. */
#define PCL_KPACK_ALIGN16(x) (((x) + 15u) & ~15u)
#ifdef __CUDACC__
#define PCL_KABI_HD __host__ __device__
#else
#define PCL_KABI_HD
#endif
/* Byte offsets of mem, port, remote, ops, refs and the total size of a packed block. */
static inline PCL_KABI_HD void pcl_kpack_offsets(const pcl_kblock_t *hdr, uint32_t off[5],
                                                 uint32_t *bytes) {
  uint32_t o = 16;
  off[0] = o;
  o += PCL_KPACK_ALIGN16((uint32_t)hdr->nmem * (uint32_t)sizeof(pcl_kmemchan_t));
  off[1] = o;
  o += PCL_KPACK_ALIGN16((uint32_t)hdr->nport * (uint32_t)sizeof(pcl_kportchan_t));
  off[2] = o;
  o += PCL_KPACK_ALIGN16((uint32_t)hdr->nremote * (uint32_t)sizeof(pcl_kremote_t));
  off[3] = o;
  o += PCL_KPACK_ALIGN16((uint32_t)hdr->nops * (uint32_t)sizeof(pcl_kop_t));
  off[4] = o;
  o += PCL_KPACK_ALIGN16((uint32_t)hdr->nrefs * (uint32_t)sizeof(pcl_kref_t));
  *bytes = o;
}

/* The 32-bit flag packets carry for the call whose 64-bit flag (state flag slot + 1, from 1) is
 * f: f itself up to 2^32 - 1, then 1, 2, ... again: ((f - 1) mod (2^32 - 1)) + 1, never 0 (scratch
 * starts zeroed, so a region no call wrote yet would pass for a call's packets of flag 0) and no
 * value twice within 2^32 - 1 calls (a packet left by an earlier call must never match). Its
 * parity is not the call's at the wrap: kernels pick the scratch half by f's parity. */
static inline PCL_KABI_HD uint32_t pcl_kflag32(uint64_t f) {
  const uint64_t x = f - 1u;
  uint64_t m = (x & 0xffffffffu) + (x >> 32); /* 2^32 = 1 (mod 2^32 - 1) */
  m = (m & 0xffffffffu) + (m >> 32);
  if (m >= 0xffffffffu)
    m -= 0xffffffffu;
  return (uint32_t)m + 1u;
}

/* ---- the elementwise program (the EW kernels, kernels/exec_ew.cu) ----
 * A block whose ops, run one after the other, touch element i of every range only from the
 * thread that owns element i (every range of one size, ranges identical or disjoint, packet ops
 * over memory channels; executor/exec/exec_fuse.c proves it from the program) computes per element
 *   v = S[i];  put[j][i] = packet(v) for j < nput;  O[i] = t0 (op) t1 (op) ... t(nterm-1)
 * where t_j = v when bit j of self_mask is set, else the packet at term[j][i] once it carries
 * the call's flag. The EW kernel runs exactly that per element: no program in shared memory, no
 * __syncthreads between ops, the flag slot and this descriptor loaded together at entry.
 * Results equal the ops' (stores the ops would overwrite in the same thread are not made).
 * Addresses of packets are absolute, per scratch parity ([j][0] even flags, [j][1] odd). */
#define PCL_KEW_MAX 8 /* puts and terms of one block (8 ranks: 7 peers + own slot) */
#define PCL_KEW_NONE 0xffu
typedef struct PCL_KABI_ALIGN(16) {
  uint32_t bytes;    /* payload bytes of every range; 0: the block only keeps the flag protocol */
  uint32_t s_off;    /* S: byte offset in the buffer s_kind names */
  uint32_t o_off;    /* O: byte offset in the buffer o_kind names */
  uint8_t s_kind;    /* PCL_KBUF_INPUT / OUTPUT, PCL_KEW_NONE: no S (nput = 0, no self term) */
  uint8_t o_kind;    /* PCL_KBUF_INPUT / OUTPUT, PCL_KEW_NONE: no O (nterm = 0) */
  uint8_t nput;      /* <= PCL_KEW_MAX */
  uint8_t nterm;     /* <= PCL_KEW_MAX */
  uint8_t self_mask; /* term j is v itself */
  uint8_t redop;     /* ncclRedOp_t of the reduction, PCL_KOP_REDOP_CALL = the call's (the host
                        picks the kernel by it: kernels.h, pcl_kernels_ew_form) */
  uint8_t reserved[14]; /* the tables start 16-byte aligned: the kernel loads them as uint4 */
  uint64_t put[PCL_KEW_MAX][2];
  uint64_t term[PCL_KEW_MAX][2]; /* unused where self_mask has the bit */
} pcl_kew_t;
PCL_KABI_ASSERT(sizeof(pcl_kew_t) == 32 + 32 * PCL_KEW_MAX, "elementwise program layout");
PCL_KABI_ASSERT(offsetof(pcl_kew_t, put) == 32 && offsetof(pcl_kew_t, term) % 16 == 0,
                "elementwise tables 16-byte aligned");

/* ---- the elementwise program of several streams (the EWX kernel, kernels/exec_ew.cu) ----
 * The same proof (exec_fuse.c) for blocks that move several plain ranges: allgather,
 * reduce-scatter, broadcast and the like. Per element i, in two passes as the EW kernel:
 *   pass 1: put[j][i] = packet(src_j[i]) for j < nput; cdst_k[i] = csrc_k[i] for k < ncopy
 *   pass 2: the terms gathered; then either O[i] = t0 (op) ... t(nterm-1) (o_kind set; term j is
 *           S[i] where self_mask has bit j) or tdst_j[i] = t_j for every j in tdst_mask.
 * Plain locations are (kind, offset): the kind of src_j is OUTPUT where bit j of src_out is set,
 * else INPUT; likewise tdst_out, csrc_out, cdst_out. The proof guarantees that no copy writes a
 * range any pass reads, so the passes' order gives the ops' results; pass 2 writes only after
 * the element's reads, in the thread that owns the element. Semaphore ops (broadcast's and
 * reduce's flow control) end the block: after both passes and a __syncthreads, its signals and
 * waits run in the ops' order; the proof accepts only blocks where that keeps their meaning (no
 * work after a signal, no packets sent after a wait). */
#define PCL_KEWX_COPIES 4
#define PCL_KEWX_SYNCS 8
typedef struct PCL_KABI_ALIGN(16) {
  uint32_t bytes; /* payload bytes of every range; 0: the block only keeps the flag protocol */
  uint32_t s_off; /* S of the reduction (s_kind), when a term has its self bit */
  uint32_t o_off; /* O of the reduction (o_kind) */
  uint8_t s_kind; /* PCL_KBUF_INPUT / OUTPUT, PCL_KEW_NONE */
  uint8_t o_kind; /* PCL_KBUF_INPUT / OUTPUT, PCL_KEW_NONE: no reduction (terms go to tdst) */
  uint8_t nput;   /* <= PCL_KEW_MAX */
  uint8_t nterm;  /* <= PCL_KEW_MAX */
  uint8_t self_mask;
  uint8_t redop; /* as pcl_kew_t's */
  uint8_t ncopy; /* <= PCL_KEWX_COPIES */
  uint8_t tdst_mask;
  uint8_t src_out, tdst_out, csrc_out, cdst_out;
  uint8_t nsync;        /* <= PCL_KEWX_SYNCS */
  uint8_t sync_wait;    /* bit j: sync[j] is a wait (else a signal) */
  uint8_t sync_relaxed; /* bit j: the relaxed form */
  uint8_t reserved0;
  uint32_t reserved1;
  uint32_t src[PCL_KEW_MAX];  /* put j's plain source offset */
  uint32_t tdst[PCL_KEW_MAX]; /* term j's plain destination offset */
  uint32_t csrc[PCL_KEWX_COPIES];
  uint32_t cdst[PCL_KEWX_COPIES];
  uint64_t put[PCL_KEW_MAX][2];
  uint64_t term[PCL_KEW_MAX][2];
  /* The block's memory-channel semaphores, in the ops' order: a signal's [0] is the peer's
   * inbound counter; a wait's [0] this rank's inbound counter and [1] its expected count. */
  uint64_t sync[PCL_KEWX_SYNCS][2];
} pcl_kewx_t;
PCL_KABI_ASSERT(sizeof(pcl_kewx_t) == 128 + 32 * PCL_KEW_MAX + 16 * PCL_KEWX_SYNCS,
                "EWX program layout");
PCL_KABI_ASSERT(offsetof(pcl_kewx_t, src) == 32 && offsetof(pcl_kewx_t, tdst) == 64 &&
                    offsetof(pcl_kewx_t, csrc) == 96 && offsetof(pcl_kewx_t, cdst) == 112 &&
                    offsetof(pcl_kewx_t, put) == 128,
                "EWX tables in 16-byte units");

/* ---- per-communicator device state (device memory, zeroed at creation) ----
 * Flag protocol (graph-safe, lock-step across ranks, no grid-wide synchronisation for grids of
 * up to PCL_KABI_FLAG_SLOTS blocks): flag[] holds one slot per block index, all equal between
 * calls. Block b of a call of G <= PCL_KABI_FLAG_SLOTS blocks reads f = flag[b] + 1 at its start
 * and, at its end, stores f into every slot j with j % G == b. Within the call slot b is read only
 * by block b (thread 0, before it stores), and the other slots it writes belong to no block of
 * this grid, so no block sees a neighbour's update; after the call every slot holds f whatever
 * grid size the next call has. A larger grid (rare: beyond the shipped plans' 32 blocks) reads
 * slot b % PCL_KABI_FLAG_SLOTS and ends with a counter: each block's thread 0 adds 1 to `done`
 * after its flag read; the block that sees G - 1 resets done and stores f into every slot.
 * Kernels of one communicator are stream-ordered, so the next call reads f in every slot.
 * Nothing on the host touches the flags after creation, so CUDA graph replays advance them
 * exactly like eager calls. (This replaced a counter at every call's end: a fence and an atomic
 * round trip, ~1 us of a small call.)
 * Barrier protocol (barrier[id], any block count): g = gen (volatile); if
 * atomicAdd(&arrived, 1) == n-1 { arrived = 0; threadfence; gen = g + 1 } else spin while gen == g.
 * The generation cannot advance before this block arrives, so reading g first is safe. */
typedef struct {
  uint32_t arrived;
  uint32_t gen;
} pcl_kbarrier_t;

#define PCL_KABI_FLAG_SLOTS 128

typedef struct PCL_KABI_ALIGN(16) {
  uint64_t flag[PCL_KABI_FLAG_SLOTS]; /* flag of the last completed call; 0 before the first */
  pcl_kbarrier_t barrier[PCL_KABI_MAX_BARRIERS];
  pcl_kbarrier_t avg_barrier; /* avg calls: every block's ops done before any block scales */
  uint32_t done;              /* grids beyond PCL_KABI_FLAG_SLOTS blocks: blocks finished */
  uint32_t reserved;
} pcl_kstate_t;
PCL_KABI_ASSERT(sizeof(pcl_kstate_t) == 8 * PCL_KABI_FLAG_SLOTS + 8 * PCL_KABI_MAX_BARRIERS + 16,
                "state layout");

/* Phase timing of block 0, accumulated over calls; written only when the kernels are built with
 * PCL_KPROF (CMake -DPCL_KPROF=ON) and the executor passes a buffer. One writer (block 0, thread
 * 0) and calls in stream order, so plain read-modify-writes suffice. clk_* are SM clock cycles
 * (clock64: exact inside a block); ns_total over the same span converts them to nanoseconds. */
typedef struct PCL_KABI_ALIGN(16) {
  uint64_t calls;
  uint64_t ns_total;                 /* globaltimer, entry -> end of the call protocol */
  uint64_t clk_total;                /* clock64, the same span */
  uint64_t clk_ready;                /* entry -> program and call context ready */
  uint64_t clk_op[PCL_KABI_MAX_OPS]; /* top-level op i (a pipeline is one op) */
  uint64_t clk_tail;                 /* end of the last op -> end of the call protocol */
  uint64_t ns_gap;                   /* previous call's end -> this call's entry (globaltimer) */
  uint64_t gaps;                     /* calls counted in ns_gap (gaps under 1 ms only) */
  uint64_t last_end_ns;
  uint32_t nops; /* top-level ops of block 0 in the last call */
  uint32_t reserved;
} pcl_kprof_t;

/* Kernel-side errors, written once (first error wins, atomicCAS from 0) to *error, which lives in
 * pinned host memory mapped into the device so the host reads it without synchronising. */
#define PCL_KERR_NONE 0u
#define PCL_KERR_TIMEOUT 1u /* a spin exceeded timeout_ns */
#define PCL_KERR_ABORT 2u   /* *abort_flag became nonzero */
#define PCL_KERR_FIFO 3u    /* a port-channel push gave up */
#define PCL_KERR_LAUNCH 4u  /* set by the host: a planned call's launch failed on this rank */

/* The hang report: what the first thread to give up (timeout or abort) was waiting for. Written
 * once per context, by the thread whose atomicCAS set the error word, into the same host-mapped
 * page PCL_KHANG_OFFSET bytes after that word; `valid` is stored last, after a system-scope
 * fence, so a host that reads valid == 1 reads the whole report. executor/exec/exec_hang.c turns it
 * into words (which plan, block, op, peer). */
#define PCL_KHANG_OFFSET 64u
#define PCL_KHANG_OP_EW 0xffffu /* the op index of the EW kernels: the block's fused program */
typedef enum {
  PCL_KWAIT_NONE = 0,    /* not in a wait */
  PCL_KWAIT_LL16 = 1,    /* an LL16 packet: want = the call's flag, found = its first flag word */
  PCL_KWAIT_LL8 = 2,     /* an LL8 packet: likewise */
  PCL_KWAIT_SEM = 3,     /* a device semaphore: found = its count, want = 1 */
  PCL_KWAIT_BARRIER = 4, /* a grid barrier: found = its generation, want = the one to leave */
  PCL_KWAIT_FIFO = 5,    /* a port channel's FIFO tail (a flush, or a push waiting for room):
                          * want / found = positions (low 32 bits) */
  PCL_KWAIT_INBOUND = 6  /* a port channel's inbound signal count: want / found (low 32 bits) */
} pcl_kwait_t;
typedef struct PCL_KABI_ALIGN(16) {
  uint32_t valid; /* 1 once the rest is written */
  uint32_t err;   /* PCL_KERR_* */
  uint32_t block, thread;
  uint32_t op;   /* index in the block's ops, or PCL_KHANG_OP_EW */
  uint32_t what; /* pcl_kwait_t */
  uint32_t want, found;
  uint64_t at;        /* device address waited on */
  uint64_t prog;      /* the program (pcl_kargs_t.blocks): which plan and shape */
  uint64_t waited_ns; /* from the wait's first timer check to giving up (0: abort before one) */
  uint64_t reserved;
} pcl_khang_t;
PCL_KABI_ASSERT(sizeof(pcl_khang_t) == 64, "hang report layout");

/* pcl_kargs_t.launch. PDL: launched with programmatic stream serialisation (PLANCCL_PDL), so
 * the kernel waits for its predecessor before touching shared memory and lets its successor
 * start once every block is past its last wait (exec_end.cuh). */
#define PCL_KLAUNCH_PDL 1u

/* Kernel arguments, passed by value. User buffers are arguments (not baked into the program),
 * so one device program serves every buffer pair of the same shape. */
typedef struct PCL_KABI_ALIGN(16) {
  const void *blocks; /* gridDim.x packed programs, `stride` bytes apart */
  pcl_kstate_t *state;
  int32_t *sems;                       /* this program's device semaphores (counting) */
  const volatile uint32_t *abort_flag; /* host-mapped; nonzero = give up */
  uint32_t *error;                     /* host-mapped PCL_KERR_* word */
  uint64_t in;                         /* user input base (device address) */
  uint64_t out;                        /* user output base */
  uint64_t scratch;                    /* scratch base of this plan (first half) */
  uint64_t scratch_half;               /* bytes to add on odd flags (double scratch), else 0 */
  uint64_t timeout_ns;                 /* 0 = spin forever (still polling abort) */
  pcl_kprof_t *prof;                   /* phase timing (PCL_KPROF builds), else NULL */
  uint64_t avg_out;   /* avg calls: the rank's result region, scaled by 1/nranks (floats) or */
  uint64_t avg_count; /* divided by nranks (integers) once every block's ops are done; 0: none */
  uint16_t nranks;    /* ranks (the avg divisor) */
  uint8_t launch;     /* PCL_KLAUNCH_*: how the host launched this kernel */
  uint8_t reserved;   /* zero */
  uint8_t pkt;        /* pcl_kpkt_t */
  uint8_t redop;      /* pcl_kredop_t (kernels.h) */
  uint16_t stride;    /* bytes between packed blocks (multiple of 16) */
} pcl_kargs_t;
PCL_KABI_ASSERT(sizeof(pcl_kargs_t) == 112, "kernel args layout");

#ifdef __cplusplus
}
#endif

#endif
