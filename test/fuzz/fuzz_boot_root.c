/* SPDX-License-Identifier: MIT
 * libFuzzer target for the bootstrap root: records are connections served by the real acceptor
 * and root in one pass; no crash or leak, and only a full ring gets successor addresses. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap_int.h"
#include "fuzz_boot_conn.h"

#define MAX_CONNS 48

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const volatile uint32_t abort_now = 1; /* one pass, never wait */
  fuzz_fds_t fds;
  fuzz_fds_mark(&fds);
  pcl_boot_acceptor_t acc;
  memset(&acc, 0, sizeof(acc));
  acc.listen_fd = -1;
  acc.magic = FUZZ_CONN_MAGIC;
  strcpy(acc.who, "fuzz root");
  int far[MAX_CONNS];
  pcl_boot_hello_t sent[MAX_CONNS];
  int n = 0;
  uint8_t flags;
  const uint8_t *rec;
  size_t len;
  while (n < MAX_CONNS && fuzz_conn_next(&data, &size, &flags, &rec, &len)) {
    int near;
    if (fuzz_conn_open(flags, rec, len, &near, &far[n]) != 0)
      abort();
    memset(&sent[n], 0, sizeof(sent[n]));
    memcpy(&sent[n], rec, len < sizeof(sent[n]) ? len : sizeof(sent[n]));
    if ((flags & FUZZ_CONN_SET_MAGIC) && len >= 8)
      sent[n].magic = FUZZ_CONN_MAGIC;
    if (pcl_boot_acceptor_add(&acc, near) != ncclSuccess)
      abort();
    n++;
  }
  int all_served = pcl_boot_root_serve(&acc, 5, &abort_now) == 0;
  /* Replies, by the rank each connection announced. */
  int replied = 0;
  for (int i = 0; i < n; i++) {
    pcl_boot_reply_t rep;
    ssize_t got = read(far[i], &rep, sizeof(rep));
    if (got <= 0)
      continue;
    const pcl_boot_hello_t *h = &sent[i];
    if (got != (ssize_t)sizeof(rep) || h->magic != FUZZ_CONN_MAGIC || h->kind != HELLO_ROOT ||
        h->rank < 0 || h->rank >= h->nranks)
      abort(); /* only an accepted rank gets a reply, and a whole one */
    replied++;
    if ((rep.status == 0) != all_served)
      abort();
    if (rep.status != 0)
      continue;
    int succ = (h->rank + 1) % h->nranks, found = 0;
    for (int j = 0; j < n; j++)
      if (sent[j].magic == FUZZ_CONN_MAGIC && sent[j].kind == HELLO_ROOT &&
          sent[j].nranks == h->nranks && sent[j].rank == succ &&
          memcmp(sent[j].addr, rep.next_addr, sizeof(rep.next_addr)) == 0)
        found = 1;
    if (!found)
      abort();
  }
  if (all_served && (replied == 0 || replied > n))
    abort();
  for (int i = 0; i < n; i++)
    close(far[i]);
  fuzz_check_leaks(&fds);
  return 0;
}
