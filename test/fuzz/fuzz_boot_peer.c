/* SPDX-License-Identifier: MIT
 * libFuzzer target for the rank side: records are incoming P2P connections, receives and sends
 * to itself, run by the real rank code without waiting; no crash or leak, self-sends intact. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap_int.h"
#include "fuzz_boot_conn.h"

#define MAX_CONNS 32
#define MAX_MSG 4096

static uint8_t in[MAX_MSG], out[MAX_MSG];

/* rec: [peer][tag][size lo][size hi] */
static void op_recv(pcl_bootstrap_t *b, int nranks, const uint8_t *rec, size_t len) {
  if (len < 4)
    return;
  size_t bytes = ((size_t)rec[2] | (size_t)rec[3] << 8) % MAX_MSG;
  (void)pcl_bootstrap_recv(b, rec[0] % nranks, rec[1], out, bytes);
}

/* rec: [tag][payload...]: sent to ourselves, then received (maybe after other messages). */
static void op_self(pcl_bootstrap_t *b, const uint8_t *rec, size_t len) {
  if (len < 1)
    return;
  int me = pcl_bootstrap_rank(b);
  size_t bytes = len - 1;
  memcpy(in, rec + 1, bytes);
  if (pcl_bootstrap_send(b, me, rec[0], in, bytes) != ncclSuccess)
    abort(); /* to self needs no network */
  if (pcl_bootstrap_recv(b, me, rec[0], out, bytes) != ncclSuccess)
    return; /* an earlier, differently sized self-send with that tag comes first: refused */
  if (memcmp(in, out, bytes) != 0)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static volatile uint32_t abort_now = 1; /* one pass, never wait */
  if (size < 2)
    return 0;
  fuzz_fds_t fds;
  fuzz_fds_mark(&fds);
  int nranks = 1 + data[0] % 8, rank = data[1] % nranks;
  data += 2;
  size -= 2;
  pcl_bootstrap_t *b = NULL;
  if (pcl_boot_rank_alloc(FUZZ_CONN_MAGIC, rank, nranks, &abort_now, &b) != ncclSuccess)
    abort();
  int far[MAX_CONNS], n = 0;
  uint8_t flags;
  const uint8_t *rec;
  size_t len;
  while (fuzz_conn_next(&data, &size, &flags, &rec, &len)) {
    switch ((flags >> 4) % 3) {
    case 0: {
      int near;
      if (n == MAX_CONNS)
        break;
      if (fuzz_conn_open(flags, rec, len, &near, &far[n]) != 0)
        abort();
      n++;
      if (pcl_boot_acceptor_add(pcl_boot_rank_acceptor(b), near) != ncclSuccess)
        abort();
      break;
    }
    case 1:
      op_recv(b, nranks, rec, len);
      break;
    default:
      op_self(b, rec, len);
      break;
    }
  }
  pcl_bootstrap_destroy(b);
  for (int i = 0; i < n; i++)
    close(far[i]);
  fuzz_check_leaks(&fds);
  return 0;
}
