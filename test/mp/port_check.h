/* SPDX-License-Identifier: MIT
 * A two-rank port-channel check shared by the transport tests: each rank runs a proxy fed by a
 * CPU producer (playing the GPU), sends rounds of data with a flag and a flush, waits for the
 * peer's flag and verifies the bytes. Returns 0 on success. */
#ifndef PCL_PORT_CHECK_H
#define PCL_PORT_CHECK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "mp_launch.h"
#include "proxy.h"
#include "topo.h"

#define BUF_BYTES (3u << 20)
#define CHUNK (256u << 10)
#define ROUNDS 4

typedef struct {
  pcl_bootstrap_handle_t handle;
  pcl_transport_kind_t kind; /* NONE: let the topology choose */
  pcl_transport_kind_t expect;
} port_args_t;

static unsigned char pattern(int rank, int round, size_t i) {
  return (unsigned char)(rank * 31 + round * 7 + i * 13 + (i >> 9));
}

/* A started proxy of `rank` with channel 0 to its peer (1 - rank) over kind, host memory: 0 the
 * source, 1 the destination (`bytes` each), 2 the semaphore (64 bytes); the peer's 1 and 2 set
 * as remotes. Collective over b. 0 on success. */
static int port_pair_open(pcl_bootstrap_t *b, int rank, int n, pcl_transport_kind_t kind, void *src,
                          void *dst, size_t bytes, uint64_t *sem, pcl_proxy_t **px) {
  const int peer = 1 - rank;
  pcl_proxy_config_t cfg = {.rank = rank,
                            .nranks = n,
                            .cuda_dev = -1,
                            .bootstrap = b,
                            .fifo_mem = PCL_FIFO_MEM_HOST,
                            .fifo_size = 64};
  pcl_mem_remote_t exp[2][3];
  memset(exp, 0, sizeof(exp));
  if (pcl_proxy_create(&cfg, px) != ncclSuccess ||
      pcl_proxy_connect(*px, peer, kind) != ncclSuccess ||
      pcl_proxy_mem_reg(*px, 0, src, bytes, 0, 0, &exp[rank][0]) != ncclSuccess ||
      pcl_proxy_mem_reg(*px, 1, dst, bytes, 0, 0, &exp[rank][1]) != ncclSuccess ||
      pcl_proxy_mem_reg(*px, 2, sem, 64, 0, 0, &exp[rank][2]) != ncclSuccess ||
      pcl_bootstrap_allgather(b, exp, sizeof(exp[0])) != ncclSuccess)
    return -1;
  for (uint32_t id = 1; id < 3; id++)
    if (pcl_proxy_mem_set_remote(*px, id, peer, &exp[peer][id]) != ncclSuccess)
      return -1;
  pcl_proxy_channel_t ch = {.peer = peer, .kind = kind, .sem_mem_id = 2, .sem_off = 0};
  return pcl_proxy_channel_set(*px, 0, &ch) == ncclSuccess && pcl_proxy_start(*px) == ncclSuccess
             ? 0
             : -1;
}

/* Every rank sends ROUNDS x BUF_BYTES to its peer in chunks, a flag after each round, waits for
 * the peer's flag and checks the data; then a flush (SYNC). */
static int port_rank(int rank, int n, void *argp) {
  port_args_t *a = argp;
  int rc = 0, peer = 1 - rank;
  pcl_bootstrap_t *b = NULL;
  pcl_topo_t *topo = NULL;
  pcl_proxy_t *px = NULL;
  unsigned char *src = calloc(1, BUF_BYTES), *dst = calloc(1, BUF_BYTES);
  uint64_t *sem = aligned_alloc(64, 64);
  memset(sem, 0, 64);
  PCL_MP_CHECK(pcl_bootstrap_create(&a->handle, rank, n, NULL, &b) == ncclSuccess, 1);
  PCL_MP_CHECK(pcl_topo_create(b, -1, &topo) == ncclSuccess, 2);
  pcl_transport_kind_t kind =
      a->kind != PCL_TRANSPORT_NONE ? a->kind : pcl_transport_choose(topo, rank, peer);
  PCL_MP_CHECK(kind == a->expect, 3);
  PCL_MP_CHECK(port_pair_open(b, rank, n, kind, src, dst, BUF_BYTES, sem, &px) == 0, 4);
  pcl_fifo_device_t f = pcl_proxy_fifo(px);
  for (int round = 0; round < ROUNDS; round++) {
    /* The peer must have consumed our previous round before we overwrite its buffer: each
     * rank waits for the other's round flag, then both barrier. */
    for (size_t i = 0; i < BUF_BYTES; i++)
      src[i] = pattern(rank, round, i);
    for (uint32_t off = 0; off < BUF_BYTES; off += CHUNK) {
      uint32_t type = PCL_FIFO_TYPE_DATA;
      if (off + CHUNK >= BUF_BYTES)
        type |= PCL_FIFO_TYPE_FLAG | PCL_FIFO_TYPE_SYNC;
      uint64_t pos =
          pcl_fifo_host_push(f, pcl_fifo_w0(CHUNK, off), pcl_fifo_w1(type, 0, 1, off, 0), NULL);
      if (type & PCL_FIFO_TYPE_SYNC)
        PCL_MP_CHECK(pcl_fifo_host_wait(f, pos, NULL) == 0, 11);
    }
    /* Our semaphore is incremented by the peer's flags. */
    double end = pcl_mp_now() + 30;
    while (atomic_load_explicit((_Atomic uint64_t *)&sem[0], memory_order_acquire) <
           (uint64_t)round + 1) {
      PCL_MP_CHECK(pcl_mp_now() < end, 12);
      PCL_MP_CHECK(pcl_proxy_error(px) == ncclSuccess, 13);
      sched_yield();
    }
    for (size_t i = 0; i < BUF_BYTES; i++)
      if (dst[i] != pattern(peer, round, i)) {
        fprintf(stderr, "rank %d round %d: byte %zu is %u, expected %u\n", rank, round, i, dst[i],
                pattern(peer, round, i));
        rc = 14;
        goto out;
      }
    PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 15);
  }
  PCL_MP_CHECK(pcl_proxy_error(px) == ncclSuccess, 16);
  PCL_MP_CHECK(pcl_proxy_consumed(px) == (uint64_t)ROUNDS * (BUF_BYTES / CHUNK), 17);
out:
  /* Both ranks stop sending before either tears its connection down. */
  if (b != NULL && rc == 0)
    (void)pcl_bootstrap_barrier(b);
  pcl_proxy_destroy(px);
  pcl_topo_destroy(topo);
  pcl_bootstrap_destroy(b);
  free(src);
  free(dst);
  free(sem);
  return rc;
}

#endif
