/* SPDX-License-Identifier: MIT
 * A two-rank check of TCP striping: each round, large puts (striped over the connection's
 * streams), a small and a medium one write overlapping ranges of the peer's buffer with no
 * signal between them, then a flag; the peer's buffer must equal the puts applied in issue order.
 */
#ifndef PCL_PORT_STRIPES_H
#define PCL_PORT_STRIPES_H

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "mp_launch.h"
#include "port_check.h"
#include "proxy.h"

#define ST_BYTES (8u << 20)
#define ST_ROUNDS 3
#define ST_OPS 5

typedef struct {
  pcl_bootstrap_handle_t handle;
} stripes_args_t;

/* Source offset, destination offset, bytes. With 3 streams, op 0's parts are 27 x 64 KiB: op 1
 * lands in its third part and op 2 starts in its second, so both are fenced across streams. */
static const uint32_t st_ops[ST_OPS][3] = {
    {0, 0, (5u << 20) + 123},                         /* striped */
    {6u << 20, (4u << 20) + 1000, 64},                /* small: the outbox */
    {(3u << 20) + 5, (2u << 20) + 8, (3u << 19) + 7}, /* striped, split unlike op 0 */
    {7u << 20, 700u << 10, 200u << 10},               /* medium: stream 0 alone */
    {4u << 20, (5u << 20) + 4096, (600u << 10) + 1},  /* striped into a few parts */
};

static unsigned char st_pattern(int rank, int round, size_t i) {
  return (unsigned char)(rank * 29 + round * 11 + i * 7 + (i >> 11));
}

static int stripes_rank(int rank, int n, void *argp) {
  stripes_args_t *a = argp;
  int rc = 0, peer = 1 - rank;
  pcl_bootstrap_t *b = NULL;
  pcl_proxy_t *px = NULL;
  unsigned char *src = calloc(1, ST_BYTES), *dst = calloc(1, ST_BYTES),
                *model = calloc(1, ST_BYTES);
  uint64_t *sem = aligned_alloc(64, 64);
  PCL_MP_CHECK(src && dst && model && sem, 1);
  memset(sem, 0, 64);
  PCL_MP_CHECK(pcl_bootstrap_create(&a->handle, rank, n, NULL, &b) == ncclSuccess, 2);
  PCL_MP_CHECK(port_pair_open(b, rank, n, PCL_TRANSPORT_TCP, src, dst, ST_BYTES, sem, &px) == 0, 3);
  pcl_fifo_device_t f = pcl_proxy_fifo(px);
  for (int round = 0; round < ST_ROUNDS; round++) {
    for (size_t i = 0; i < ST_BYTES; i++)
      src[i] = st_pattern(rank, round, i);
    uint64_t pos = 0;
    for (int k = 0; k < ST_OPS; k++) {
      uint32_t type = PCL_FIFO_TYPE_DATA;
      if (k == ST_OPS - 1)
        type |= PCL_FIFO_TYPE_FLAG | PCL_FIFO_TYPE_SYNC;
      pos = pcl_fifo_host_push(f, pcl_fifo_w0(st_ops[k][2], st_ops[k][0]),
                               pcl_fifo_w1(type, 0, 1, st_ops[k][1], 0), NULL);
      PCL_MP_CHECK(pos != UINT64_MAX, 10);
    }
    PCL_MP_CHECK(pcl_fifo_host_wait(f, pos, NULL) == 0, 11);
    /* What the peer's puts must have made of our buffer, applied in issue order. */
    for (int k = 0; k < ST_OPS; k++)
      for (uint32_t i = 0; i < st_ops[k][2]; i++)
        model[st_ops[k][1] + i] = st_pattern(peer, round, st_ops[k][0] + i);
    double end = pcl_mp_now() + 60;
    while (atomic_load_explicit((_Atomic uint64_t *)&sem[0], memory_order_acquire) <
           (uint64_t)round + 1) {
      PCL_MP_CHECK(pcl_mp_now() < end, 12);
      PCL_MP_CHECK(pcl_proxy_error(px) == ncclSuccess, 13);
      sched_yield();
    }
    for (size_t i = 0; i < ST_BYTES; i++)
      if (dst[i] != model[i]) {
        fprintf(stderr, "rank %d round %d: byte %zu is %u, expected %u\n", rank, round, i, dst[i],
                model[i]);
        rc = 14;
        goto out;
      }
    /* The peer overwrites our buffer next round only after we have checked it. */
    PCL_MP_CHECK(pcl_bootstrap_barrier(b) == ncclSuccess, 15);
  }
  PCL_MP_CHECK(pcl_proxy_error(px) == ncclSuccess, 16);
  PCL_MP_CHECK(pcl_proxy_consumed(px) == (uint64_t)ST_ROUNDS * ST_OPS, 17);
out:
  if (b != NULL && rc == 0)
    (void)pcl_bootstrap_barrier(b);
  pcl_proxy_destroy(px);
  pcl_bootstrap_destroy(b);
  free(src);
  free(dst);
  free(model);
  free(sem);
  return rc;
}

#endif
