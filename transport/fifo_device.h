/* SPDX-License-Identifier: MIT
 * The device face of the port-channel FIFO: the ABI shared by GPU producers and the host proxy
 * (plain C, also compiled by nvcc), the trigger encoding and the device push. The only transport
 * header the kernels include; the host FIFO object is in fifo.h. */
#ifndef PCL_FIFO_DEVICE_H
#define PCL_FIFO_DEVICE_H

#include <stdint.h>
#include <nccl.h>

#ifdef __cplusplus
#define PCL_FIFO_STATIC_ASSERT(c, m) static_assert(c, m)
extern "C" {
#else
#define PCL_FIFO_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

#ifdef __CUDACC__
#define PCL_FIFO_HD static __host__ __device__ __forceinline__
#else
#define PCL_FIFO_HD static inline
#endif

/* Trigger types; OR-able (data|flag = put with signal, data|flag|sync = put, signal, flush). The
 * proxy handles the parts in the order data, flag, sync. */
#define PCL_FIFO_TYPE_DATA 1u
#define PCL_FIFO_TYPE_FLAG 2u
#define PCL_FIFO_TYPE_SYNC 4u

#define PCL_FIFO_MAX_MEMORIES 512u  /* memory ids are 9 bits */
#define PCL_FIFO_MAX_CHANNELS 1024u /* channel (= semaphore) ids are 10 bits */
#define PCL_FIFO_DEFAULT_SIZE 512u  /* slots; sizes are powers of two */

/* One request from the GPU to the proxy: 16 bytes written by one 16-byte store.
 *   w0: bits  0..31 size in bytes       bits 32..63 source offset
 *   w1: bits  0..31 destination offset  bits 32..40 source memory id
 *       bits 41..49 destination memory id  bits 50..52 type  bits 53..62 channel id
 *       bit  63 commit: the slot is valid for position pos when
 *              commit == 1 ^ ((pos >> log2_size) & 1)
 *       i.e. 1 on even laps and 0 on odd laps. Slots start zeroed (invalid for lap 0) and the host
 *       never clears them: a stale slot from the previous lap carries the other parity.
 * Memory ids index the proxy's registered-memory table; the channel id names the peer connection
 * and the semaphore that a flag trigger increments. */
typedef struct __attribute__((aligned(16))) {
  uint64_t w0;
  uint64_t w1;
} pcl_fifo_trigger_t;

PCL_FIFO_STATIC_ASSERT(sizeof(pcl_fifo_trigger_t) == 16, "trigger is 16 bytes");

#define PCL_FIFO_COMMIT_BIT (1ull << 63)

/* Device-visible FIFO descriptor, passed by value to kernels (copy it into kernel arguments).
 * Memory ordering:
 *  - GPU producer: pos = atomicAdd(head, 1) (device scope; reserves the slot); while
 *    pos - tail >= size spin (acquire loads of *tail, refreshing *tail_cache); then one 16-byte
 *    st.release.sys of {w0, w1|commit(pos)} into triggers[pos & (size-1)]. The release orders all
 *    of the thread's earlier writes (the data a put sends) before the trigger.
 *  - Host proxy: acquire-load w1 of slot tail & (size-1), compare the commit bit with the parity
 *    expected for position tail, read w0, process, then release-store tail+1 to *tail.
 *  - Flush: a SYNC trigger at pos is popped (tail > pos) only after the data of every earlier
 *    trigger is complete at the destination and every earlier flag is delivered, so a GPU
 *    waiting for "*tail > pos" (acquire) observes completed transfers. */
typedef struct {
  pcl_fifo_trigger_t *triggers; /* size slots, pinned host memory, device-mapped address */
  uint64_t *head;               /* device memory: next position to reserve (producers only) */
  volatile uint64_t *tail;      /* pinned host memory, device-mapped: positions consumed */
  uint64_t *tail_cache;         /* device memory: last tail seen by a producer (a hint) */
  uint32_t size;                /* power of two */
  uint32_t log2_size;
  uint64_t reserved;
} pcl_fifo_device_t;

PCL_FIFO_STATIC_ASSERT(sizeof(void *) == 8, "64-bit only");
PCL_FIFO_STATIC_ASSERT(sizeof(pcl_fifo_device_t) == 48, "fifo descriptor layout");

PCL_FIFO_HD uint64_t pcl_fifo_w0(uint32_t size, uint32_t src_off) {
  return (uint64_t)size | ((uint64_t)src_off << 32);
}

/* w1 without the commit bit. */
PCL_FIFO_HD uint64_t pcl_fifo_w1(uint32_t type, uint32_t src_mem, uint32_t dst_mem,
                                 uint32_t dst_off, uint32_t channel) {
  return (uint64_t)dst_off | ((uint64_t)(src_mem & 0x1ffu) << 32) |
         ((uint64_t)(dst_mem & 0x1ffu) << 41) | ((uint64_t)(type & 0x7u) << 50) |
         ((uint64_t)(channel & 0x3ffu) << 53);
}

PCL_FIFO_HD uint64_t pcl_fifo_commit_for(uint64_t pos, uint32_t log2_size) {
  return ((pos >> log2_size) & 1ull) ? 0ull : PCL_FIFO_COMMIT_BIT;
}

PCL_FIFO_HD int pcl_fifo_slot_valid(uint64_t w1, uint64_t pos, uint32_t log2_size) {
  return (w1 & PCL_FIFO_COMMIT_BIT) == pcl_fifo_commit_for(pos, log2_size);
}

PCL_FIFO_HD uint32_t pcl_fifo_trig_size(const pcl_fifo_trigger_t *t) {
  return (uint32_t)t->w0;
}
PCL_FIFO_HD uint32_t pcl_fifo_trig_src_off(const pcl_fifo_trigger_t *t) {
  return (uint32_t)(t->w0 >> 32);
}
PCL_FIFO_HD uint32_t pcl_fifo_trig_dst_off(const pcl_fifo_trigger_t *t) {
  return (uint32_t)t->w1;
}
PCL_FIFO_HD uint32_t pcl_fifo_trig_src_mem(const pcl_fifo_trigger_t *t) {
  return (uint32_t)(t->w1 >> 32) & 0x1ffu;
}
PCL_FIFO_HD uint32_t pcl_fifo_trig_dst_mem(const pcl_fifo_trigger_t *t) {
  return (uint32_t)(t->w1 >> 41) & 0x1ffu;
}
PCL_FIFO_HD uint32_t pcl_fifo_trig_type(const pcl_fifo_trigger_t *t) {
  return (uint32_t)(t->w1 >> 50) & 0x7u;
}
PCL_FIFO_HD uint32_t pcl_fifo_trig_channel(const pcl_fifo_trigger_t *t) {
  return (uint32_t)(t->w1 >> 53) & 0x3ffu;
}

#ifdef __CUDACC__
/* The device push in three steps, so that a caller can watch the wait for space with its own
 * watchdog (the executor's kernels time it out; pcl_fifo_push below only honours an abort). */
static __device__ __forceinline__ uint64_t pcl_fifo_reserve(pcl_fifo_device_t f) {
  return atomicAdd((unsigned long long *)f.head, 1ull);
}

/* 1 when slot pos is free (the proxy consumed position pos - size). The cached tail spares most
 * pushes the system-scope load; *tail is refreshed only when the cache says "full". */
static __device__ __forceinline__ int pcl_fifo_has_room(pcl_fifo_device_t f, uint64_t pos) {
  if (pos < (uint64_t)f.size + *(volatile uint64_t *)f.tail_cache)
    return 1;
  uint64_t t;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(t) : "l"(f.tail) : "memory");
  if (pos >= (uint64_t)f.size + t)
    return 0;
  atomicMax((unsigned long long *)f.tail_cache, (unsigned long long)t);
  return 1;
}

static __device__ __forceinline__ void pcl_fifo_commit(pcl_fifo_device_t f, uint64_t pos,
                                                       uint64_t w0, uint64_t w1) {
  w1 = (w1 & ~PCL_FIFO_COMMIT_BIT) | pcl_fifo_commit_for(pos, f.log2_size);
  pcl_fifo_trigger_t *slot = &f.triggers[pos & (f.size - 1)];
  asm volatile("st.global.release.sys.v2.u64 [%0], {%1, %2};" ::"l"(slot), "l"(w0), "l"(w1)
               : "memory");
}

/* Device push, called by one thread. Returns the trigger's position (wait for *tail > pos to
 * know it was consumed; for a SYNC trigger that means flushed), or UINT64_MAX when *abort_flag
 * became nonzero while waiting for space (abort_flag may be NULL). A position given up on stays
 * reserved and never committed: the proxy stops there, as it must once the kernel failed. */
static __device__ __forceinline__ uint64_t pcl_fifo_push(pcl_fifo_device_t f, uint64_t w0,
                                                         uint64_t w1,
                                                         const volatile uint32_t *abort_flag) {
  uint64_t pos = pcl_fifo_reserve(f);
  while (!pcl_fifo_has_room(f, pos))
    if (abort_flag != NULL && *abort_flag != 0)
      return UINT64_MAX;
  pcl_fifo_commit(f, pos, w0, w1);
  return pos;
}

/* Waits until the trigger at pos was consumed (after a SYNC: every earlier transfer completed).
 * Returns 0, or 1 on abort. */
static __device__ __forceinline__ int pcl_fifo_wait(pcl_fifo_device_t f, uint64_t pos,
                                                    const volatile uint32_t *abort_flag) {
  uint64_t t;
  for (;;) {
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(t) : "l"(f.tail) : "memory");
    if (t > pos)
      return 0;
    if (abort_flag != NULL && *abort_flag != 0)
      return 1;
  }
}
#endif

#ifdef __cplusplus
}
#endif

#endif
