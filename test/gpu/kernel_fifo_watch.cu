/* SPDX-License-Identifier: MIT
 * The interpreter's port-channel push against a proxy that stops taking triggers: a full FIFO
 * must end with the spin watchdog (timeout, abort) and a hang report naming the FIFO, never spin
 * forever; room that appears while it waits must let the push go on. One GPU, one process. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include "gpu_test_check.h"
#include "exec_ops.cuh" /* kernels/: pcl_kport_push, the watchdog */

#define FIFO_SIZE 4u
#define PUSHES 6 /* two more than fit while nobody consumes */

typedef struct {
  uint64_t pos[PUSHES]; /* what each push returned */
  uint32_t done;        /* pushes made, the last one possibly given up */
} result_t;

/* One thread: PUSHES data triggers into f; stops at the first push given up. */
__global__ void push_kernel(pcl_fifo_device_t f, const volatile uint32_t *abort_flag,
                            uint32_t *error, uint64_t timeout_ns, result_t *res) {
  pcl_kportchan_t pc;
  memset(&pc, 0, sizeof(pc));
  pc.fifo = f;
  pcl_kwatch_t w;
  memset(&w, 0, sizeof(w));
  w.abort_flag = abort_flag;
  w.error = error;
  w.timeout_ns = timeout_ns;
  for (int i = 0; i < PUSHES; i++) {
    uint64_t pos = pcl_kport_push(NULL, &pc, pcl_fifo_w0(8u * (uint32_t)(i + 1), 0),
                                  pcl_fifo_w1(PCL_FIFO_TYPE_DATA, 1, 2, 16u * (uint32_t)i, 3), &w);
    res->pos[i] = pos;
    res->done = (uint32_t)(i + 1);
    __threadfence_system();
    if (pos == UINT64_MAX)
      return;
  }
}

typedef struct {
  pcl_fifo_trigger_t *trig; /* host-mapped */
  uint64_t *tail;           /* host-mapped */
  uint64_t *head, *tail_cache;
  uint32_t *abort_flag, *error; /* host-mapped; error is followed by the hang report */
  result_t *res;                /* host-mapped */
  pcl_fifo_device_t f;
} bed_t;

static int bed_reset(bed_t *b) {
  const int rank = 0;
  memset(b->trig, 0, FIFO_SIZE * sizeof(pcl_fifo_trigger_t));
  memset(b->res, 0, sizeof(*b->res));
  memset(b->error, 0, PCL_KHANG_OFFSET + sizeof(pcl_khang_t));
  *b->tail = 0;
  *b->abort_flag = 0;
  CUCK(cudaMemset(b->head, 0, sizeof(uint64_t)));
  CUCK(cudaMemset(b->tail_cache, 0, sizeof(uint64_t)));
  CUCK(cudaDeviceSynchronize());
  return 0;
}

static int bed_init(bed_t *b) {
  const int rank = 0;
  void *p;
  memset(b, 0, sizeof(*b));
  CUCK(cudaHostAlloc(&p, FIFO_SIZE * sizeof(pcl_fifo_trigger_t), cudaHostAllocMapped));
  b->trig = (pcl_fifo_trigger_t *)p;
  CUCK(cudaHostAlloc(&p, sizeof(uint64_t), cudaHostAllocMapped));
  b->tail = (uint64_t *)p;
  CUCK(cudaHostAlloc(&p, sizeof(uint32_t), cudaHostAllocMapped));
  b->abort_flag = (uint32_t *)p;
  CUCK(cudaHostAlloc(&p, PCL_KHANG_OFFSET + sizeof(pcl_khang_t), cudaHostAllocMapped));
  b->error = (uint32_t *)p;
  CUCK(cudaHostAlloc(&p, sizeof(result_t), cudaHostAllocMapped));
  b->res = (result_t *)p;
  CUCK(cudaMalloc(&p, sizeof(uint64_t)));
  b->head = (uint64_t *)p;
  CUCK(cudaMalloc(&p, sizeof(uint64_t)));
  b->tail_cache = (uint64_t *)p;
  memset(&b->f, 0, sizeof(b->f));
  CUCK(cudaHostGetDevicePointer(&p, b->trig, 0));
  b->f.triggers = (pcl_fifo_trigger_t *)p;
  CUCK(cudaHostGetDevicePointer(&p, b->tail, 0));
  b->f.tail = (volatile uint64_t *)p;
  b->f.head = b->head;
  b->f.tail_cache = b->tail_cache;
  b->f.size = FIFO_SIZE;
  b->f.log2_size = 2;
  return bed_reset(b);
}

static void bed_free(bed_t *b) {
  cudaFreeHost(b->trig);
  cudaFreeHost(b->tail);
  cudaFreeHost(b->abort_flag);
  cudaFreeHost(b->error);
  cudaFreeHost(b->res);
  cudaFree(b->head);
  cudaFree(b->tail_cache);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Launches the pusher; the kernel must end within limit_s (else the GPU is left spinning and the
 * test fails: ctest's timeout kills it). */
static int launch(bed_t *b, uint64_t timeout_ns, double *took) {
  const int rank = 0;
  uint32_t *abort_d, *error_d;
  result_t *res_d;
  CUCK(cudaHostGetDevicePointer((void **)&abort_d, b->abort_flag, 0));
  CUCK(cudaHostGetDevicePointer((void **)&error_d, b->error, 0));
  CUCK(cudaHostGetDevicePointer((void **)&res_d, b->res, 0));
  double t0 = now_s();
  push_kernel<<<1, 1>>>(b->f, abort_d, error_d, timeout_ns, res_d);
  CUCK(cudaGetLastError());
  CUCK(cudaDeviceSynchronize());
  *took = now_s() - t0;
  return 0;
}

static const pcl_khang_t *hang(const bed_t *b) {
  return (const pcl_khang_t *)((const char *)b->error + PCL_KHANG_OFFSET);
}

/* The triggers that fit are committed in order with lap 0's parity; the rest give up. */
static int check_committed(const bed_t *b, int n) {
  const int rank = 0;
  for (int i = 0; i < n; i++) {
    const pcl_fifo_trigger_t *t = &b->trig[i];
    if (b->res->pos[i] != (uint64_t)i || !pcl_fifo_slot_valid(t->w1, (uint64_t)i, 2) ||
        pcl_fifo_trig_size(t) != 8u * (uint32_t)(i + 1) || pcl_fifo_trig_dst_off(t) != 16u * i ||
        pcl_fifo_trig_channel(t) != 3)
      FAIL("push %d: pos %llu, slot w0 %#llx w1 %#llx", i, (unsigned long long)b->res->pos[i],
           (unsigned long long)t->w0, (unsigned long long)t->w1);
  }
  return 0;
}

static int case_timeout(bed_t *b) {
  const int rank = 0;
  double took;
  if (bed_reset(b) || launch(b, 300ull * 1000 * 1000, &took))
    return 1;
  if (b->res->done != FIFO_SIZE + 1 || b->res->pos[FIFO_SIZE] != UINT64_MAX)
    FAIL("timeout: %u pushes, the last at %llu (want %u, given up)", b->res->done,
         (unsigned long long)b->res->pos[b->res->done ? b->res->done - 1 : 0], FIFO_SIZE + 1);
  if (check_committed(b, FIFO_SIZE))
    return 1;
  const pcl_khang_t *h = hang(b);
  if (*b->error != PCL_KERR_TIMEOUT || !h->valid || h->what != PCL_KWAIT_FIFO || h->want != 1 ||
      h->found != 0 || h->waited_ns < 250ull * 1000 * 1000)
    FAIL("timeout: error %u, report valid %u what %u want %u found %u waited %llu ns", *b->error,
         h->valid, h->what, h->want, h->found, (unsigned long long)h->waited_ns);
  if (took > 5.0)
    FAIL("timeout: the kernel took %.1f s for a 0.3 s timeout", took);
  printf("kernel_fifo_watch: full FIFO, 0.3 s timeout: gave up after %.2f s, reported as a FIFO "
         "wait (want %u, found %u)\n",
         took, h->want, h->found);
  return 0;
}

static int case_abort(bed_t *b) {
  const int rank = 0;
  double took;
  if (bed_reset(b))
    return 1;
  *b->abort_flag = 1; /* set before: the watchdog's first check sees it; no timeout at all */
  if (launch(b, 0, &took))
    return 1;
  if (b->res->done != FIFO_SIZE + 1 || b->res->pos[FIFO_SIZE] != UINT64_MAX ||
      check_committed(b, FIFO_SIZE))
    FAIL("abort: %u pushes", b->res->done);
  if (*b->error != PCL_KERR_ABORT || !hang(b)->valid || hang(b)->what != PCL_KWAIT_FIFO)
    FAIL("abort: error %u, what %u", *b->error, hang(b)->what);
  printf("kernel_fifo_watch: full FIFO, abort with no timeout: gave up after %.2f s\n", took);
  return 0;
}

/* The proxy takes two triggers while the kernel waits for room: both remaining pushes go in. */
static int case_room(bed_t *b) {
  const int rank = 0;
  uint32_t *abort_d, *error_d;
  result_t *res_d;
  if (bed_reset(b))
    return 1;
  CUCK(cudaHostGetDevicePointer((void **)&abort_d, b->abort_flag, 0));
  CUCK(cudaHostGetDevicePointer((void **)&error_d, b->error, 0));
  CUCK(cudaHostGetDevicePointer((void **)&res_d, b->res, 0));
  push_kernel<<<1, 1>>>(b->f, abort_d, error_d, 10ull * 1000 * 1000 * 1000, res_d);
  CUCK(cudaGetLastError());
  for (int spin = 0; *(volatile uint32_t *)&b->res->done < FIFO_SIZE; spin++) {
    if (spin > 5000)
      FAIL("room: the first %u pushes did not happen", FIFO_SIZE);
    usleep(1000);
  }
  usleep(50 * 1000); /* the fifth push is waiting for room now */
  __atomic_store_n(b->tail, 2, __ATOMIC_RELEASE);
  CUCK(cudaDeviceSynchronize());
  if (b->res->done != PUSHES || *b->error != 0)
    FAIL("room: %u pushes, error %u", b->res->done, *b->error);
  for (int i = FIFO_SIZE; i < PUSHES; i++) {
    const pcl_fifo_trigger_t *t = &b->trig[i % FIFO_SIZE];
    if (b->res->pos[i] != (uint64_t)i || !pcl_fifo_slot_valid(t->w1, (uint64_t)i, 2) ||
        pcl_fifo_trig_size(t) != 8u * (uint32_t)(i + 1))
      FAIL("room: push %d at %llu, slot w1 %#llx", i, (unsigned long long)b->res->pos[i],
           (unsigned long long)t->w1);
  }
  printf("kernel_fifo_watch: room made while waiting: all %d pushes in, second lap's parity\n",
         PUSHES);
  return 0;
}

int main(void) {
  const int rank = 0;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
    printf("kernel_fifo_watch: no GPU, skipped\n");
    return 77;
  }
  CUCK(cudaSetDevice(0));
  bed_t b;
  if (bed_init(&b))
    return 1;
  int rc = case_timeout(&b) || case_abort(&b) || case_room(&b);
  bed_free(&b);
  printf("kernel_fifo_watch: %s\n", rc ? "FAILED" : "passed");
  return rc;
}
