/* SPDX-License-Identifier: MIT
 * Copy-engine port channels on a GPU machine, driven from the host: two ranks (threads of one
 * process, on GPUs 0 and 1, or both on GPU 0) move GPU memory through their proxies with puts,
 * flags (into the peer's GPU semaphore) and flushes. Exit 77 without a GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "bootstrap.h"
#include "mp_launch.h"
#include "param.h"
#include "proxy.h"

#define BYTES (8u << 20)
#define CHUNK (1u << 20)
#define ROUNDS 3

static pcl_bootstrap_handle_t g_handle;
static int g_ndev;
/* Exchanged in-process: rank r's buffers (same address space, so "mapped" = the pointer). */
static void *g_dst[2], *g_sem[2];

#define CK(cond, code)                                                                             \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: check failed at line %d: %s (%s)\n", rank, __LINE__, #cond,        \
              cudaGetErrorString(cudaGetLastError()));                                             \
      rc = (code);                                                                                 \
      goto out;                                                                                    \
    }                                                                                              \
  } while (0)

static int ce_rank(int rank, int n, void *arg) {
  int rc = 0, peer = 1 - rank, dev = g_ndev > 1 ? rank : 0;
  pcl_bootstrap_t *b = NULL;
  pcl_proxy_t *px = NULL;
  unsigned char *src = NULL, *dst = NULL, *host = NULL;
  uint64_t *sem = NULL;
  cudaStream_t s = NULL;
  CK(cudaSetDevice(dev) == cudaSuccess, 1);
  if (g_ndev > 1) {
    cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
    CK(e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled, 2);
    (void)cudaGetLastError();
  }
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 3);
  CK(cudaMalloc((void **)&src, BYTES) == cudaSuccess, 3);
  CK(cudaMalloc((void **)&dst, BYTES) == cudaSuccess, 3);
  CK(cudaMalloc((void **)&sem, 64) == cudaSuccess, 3);
  CK(cudaMemset(sem, 0, 64) == cudaSuccess, 3);
  host = malloc(BYTES);
  g_dst[rank] = dst;
  g_sem[rank] = sem;
  CK(pcl_bootstrap_create(&g_handle, rank, n, NULL, &b) == ncclSuccess, 4);
  /* Host FIFO: this thread plays the GPU producer (a kernel would use pcl_fifo_push on a CUDA
   * FIFO, fifo_mem = PCL_FIFO_MEM_AUTO). */
  pcl_proxy_config_t cfg = {.rank = rank,
                            .nranks = n,
                            .cuda_dev = dev,
                            .bootstrap = b,
                            .fifo_mem = PCL_FIFO_MEM_HOST,
                            .fifo_size = 64};
  CK(pcl_proxy_create(&cfg, &px) == ncclSuccess, 5);
  CK(pcl_proxy_connect(px, peer, PCL_TRANSPORT_CE) == ncclSuccess, 6);
  pcl_mem_remote_t exp;
  CK(pcl_proxy_mem_reg(px, 0, src, BYTES, 1, 0, &exp) == ncclSuccess, 7);
  CK(pcl_proxy_mem_reg(px, 1, dst, BYTES, 1, 0, &exp) == ncclSuccess, 7);
  CK(pcl_proxy_mem_reg(px, 2, sem, 64, 1, 0, &exp) == ncclSuccess, 7);
  CK(pcl_bootstrap_barrier(b) == ncclSuccess, 8); /* g_dst/g_sem of both ranks are set */
  pcl_mem_remote_t r;
  memset(&r, 0, sizeof(r));
  r.mem_id = 1;
  r.size = BYTES;
  r.is_device = 1;
  r.addr = r.mapped = (uint64_t)(uintptr_t)g_dst[peer];
  CK(pcl_proxy_mem_set_remote(px, 1, peer, &r) == ncclSuccess, 9);
  r.mem_id = 2;
  r.size = 64;
  r.addr = r.mapped = (uint64_t)(uintptr_t)g_sem[peer];
  CK(pcl_proxy_mem_set_remote(px, 2, peer, &r) == ncclSuccess, 9);
  pcl_proxy_channel_t ch = {.peer = peer, .kind = PCL_TRANSPORT_CE, .sem_mem_id = 2, .sem_off = 8};
  CK(pcl_proxy_channel_set(px, 0, &ch) == ncclSuccess, 10);
  CK(pcl_proxy_start(px) == ncclSuccess, 11);
  pcl_fifo_device_t f = pcl_proxy_fifo(px);
  for (int round = 0; round < ROUNDS; round++) {
    for (size_t i = 0; i < BYTES; i++)
      host[i] = (unsigned char)(rank * 17 + round * 5 + i * 3);
    CK(cudaMemcpy(src, host, BYTES, cudaMemcpyHostToDevice) == cudaSuccess, 12);
    for (uint32_t off = 0; off < BYTES; off += CHUNK) {
      uint32_t type = PCL_FIFO_TYPE_DATA;
      if (off + CHUNK >= BYTES)
        type |= PCL_FIFO_TYPE_FLAG | PCL_FIFO_TYPE_SYNC;
      uint64_t pos =
          pcl_fifo_host_push(f, pcl_fifo_w0(CHUNK, off), pcl_fifo_w1(type, 0, 1, off, 0), NULL);
      if (type & PCL_FIFO_TYPE_SYNC)
        CK(pcl_fifo_host_wait(f, pos, NULL) == 0, 13);
    }
    uint64_t v = 0;
    double end = pcl_mp_now() + 30;
    while (v < (uint64_t)round + 1) {
      CK(cudaMemcpyAsync(&v, (char *)sem + 8, 8, cudaMemcpyDeviceToHost, s) == cudaSuccess, 14);
      CK(cudaStreamSynchronize(s) == cudaSuccess, 14);
      CK(pcl_mp_now() < end && pcl_proxy_error(px) == ncclSuccess, 15);
    }
    CK(cudaMemcpy(host, dst, BYTES, cudaMemcpyDeviceToHost) == cudaSuccess, 16);
    for (size_t i = 0; i < BYTES; i++)
      CK(host[i] == (unsigned char)(peer * 17 + round * 5 + i * 3), 17);
    CK(pcl_bootstrap_barrier(b) == ncclSuccess, 18);
  }
out:
  if (b != NULL && rc == 0)
    (void)pcl_bootstrap_barrier(b);
  pcl_proxy_destroy(px);
  pcl_bootstrap_destroy(b);
  if (src)
    cudaFree(src);
  if (dst)
    cudaFree(dst);
  if (sem)
    cudaFree(sem);
  if (s)
    cudaStreamDestroy(s);
  free(host);
  if (rc == 0)
    fprintf(stderr, "rank %d (gpu %d): copy-engine port channel ok\n", rank, dev);
  return rc;
}

int main(void) {
  if (cudaGetDeviceCount(&g_ndev) != cudaSuccess || g_ndev == 0) {
    fprintf(stderr, "no GPU: skipped\n");
    return 77;
  }
  if (g_ndev > 1) {
    int can = 0;
    cudaDeviceCanAccessPeer(&can, 0, 1);
    if (!can)
      g_ndev = 1;
  }
  setenv("PLANCCL_SOCKET_IFNAME", "lo", 1);
  pcl_param_reset();
  if (pcl_bootstrap_root_create(&g_handle) != ncclSuccess)
    return 1;
  return pcl_mp_run_threads(2, ce_rank, NULL, NULL) == 0 ? 0 : 1;
}
