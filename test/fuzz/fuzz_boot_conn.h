/* SPDX-License-Identifier: MIT
 * For the bootstrap fuzz targets: fuzz bytes as local connections (socketpairs whose far end
 * already wrote them), so the real code runs without a network; and the fd and leak check. */
#ifndef PCL_FUZZ_BOOT_CONN_H
#define PCL_FUZZ_BOOT_CONN_H

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "fuzz_init.h"

#define FUZZ_CONN_MAGIC 0x706c616e63636c21ull /* the magic the fuzzed side expects */
#define FUZZ_CONN_SET_MAGIC 1                 /* flag: overwrite the first 8 bytes with it */
#define FUZZ_CONN_STALL 2                     /* flag: keep the write side open (no EOF) */

/* Writes bytes into a new socketpair and returns the near end (non-blocking) in *near and the
 * far end in *far (kept so that the test can read what the library answered). 0 on success. */
static int fuzz_conn_open(uint8_t flags, const uint8_t *bytes, size_t len, int *near, int *far) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
    return -1;
  uint8_t buf[512];
  if (len > sizeof(buf))
    len = sizeof(buf);
  memcpy(buf, bytes, len);
  if ((flags & FUZZ_CONN_SET_MAGIC) && len >= 8) {
    uint64_t m = FUZZ_CONN_MAGIC;
    memcpy(buf, &m, sizeof(m));
  }
  /* Far below the socket buffer size: the write is whole. */
  if (len > 0 && write(sv[1], buf, len) != (ssize_t)len)
    abort();
  if (!(flags & FUZZ_CONN_STALL))
    shutdown(sv[1], SHUT_WR);
  *near = sv[0];
  *far = sv[1];
  return 0;
}

/* Reads one length-prefixed record: [flags][len][len bytes]. 0 at the end of the input. */
static int fuzz_conn_next(const uint8_t **data, size_t *size, uint8_t *flags, const uint8_t **rec,
                          size_t *len) {
  if (*size < 2)
    return 0;
  *flags = (*data)[0];
  *len = (*data)[1];
  if (*len > *size - 2)
    *len = *size - 2;
  *rec = *data + 2;
  *data += 2 + *len;
  *size -= 2 + *len;
  return 1;
}

/* Which fds in [low, low + FUZZ_FD_SPAN) are open; taken before and after each input (the fuzzer
 * opens nothing while an input runs), so an fd the input left open shows as a difference. */
#define FUZZ_FD_SPAN 256
typedef struct {
  int low;
  uint8_t open[FUZZ_FD_SPAN];
} fuzz_fds_t;

static void fuzz_fds_mark(fuzz_fds_t *m) {
  m->low = dup(0);
  if (m->low < 0)
    abort();
  close(m->low);
  for (int i = 0; i < FUZZ_FD_SPAN; i++)
    m->open[i] = fcntl(m->low + i, F_GETFD) >= 0;
}

/* Aborts when the input leaked an fd or a pcl allocation. */
static void fuzz_check_leaks(const fuzz_fds_t *before) {
  fuzz_fds_t after;
  fuzz_fds_mark(&after);
  if (after.low != before->low || memcmp(after.open, before->open, sizeof(after.open)) != 0 ||
      pcl_alloc_outstanding() != 0)
    abort();
}

#endif
