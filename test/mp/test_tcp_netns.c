/* SPDX-License-Identifier: MIT
 * The TCP transport between two "hosts": two network namespaces joined by a veth pair, one
 * process in each with its own PLANCCL_HOST_ID; bootstrap, topology, transport choice and port
 * channels (data, flags, flush) all cross the veth. Exit 77 where namespaces are not allowed. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "param.h"
#include "port_check.h"

static char ns[2][32], veth[2][16];
static int handle_pipe[2];

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...) {
  char cmd[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof(cmd), fmt, ap);
  va_end(ap);
  int r = system(cmd);
  return r == 0 ? 0 : -1;
}

static void cleanup(void) {
  /* Deleting a namespace destroys the veth end inside it (and so its peer). */
  for (int i = 0; i < 2; i++)
    (void)sh("ip netns del %s >/dev/null 2>&1", ns[i]);
  (void)sh("ip link del %s >/dev/null 2>&1", veth[0]);
}

static int setup(void) {
  if (sh("ip netns add %s 2>/dev/null", ns[0]) || sh("ip netns add %s 2>/dev/null", ns[1]) ||
      sh("ip link add %s type veth peer name %s 2>/dev/null", veth[0], veth[1]))
    return -1;
  for (int i = 0; i < 2; i++) {
    if (sh("ip link set %s netns %s", veth[i], ns[i]) ||
        sh("ip -n %s addr add 10.211.%d.%d/24 dev %s", ns[i], getpid() % 200, i + 1, veth[i]) ||
        sh("ip -n %s link set %s up", ns[i], veth[i]) || sh("ip -n %s link set lo up", ns[i]))
      return -1;
  }
  return 0;
}

static int enter_ns(int i) {
  char path[96];
  snprintf(path, sizeof(path), "/var/run/netns/%s", ns[i]);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    perror("setns");
    if (fd >= 0)
      close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

static int rank_main(int rank, int n, void *arg) {
  port_args_t a;
  memset(&a, 0, sizeof(a));
  if (enter_ns(rank) != 0)
    return 90;
  /* Only the veth: "pcl" prefix; each side a different host. */
  setenv("PLANCCL_SOCKET_IFNAME", "pcl", 1);
  setenv("PLANCCL_HOST_ID", rank == 0 ? "netns-host-a" : "netns-host-b", 1);
  pcl_param_reset();
  if (rank == 0) {
    if (pcl_bootstrap_root_create(&a.handle) != ncclSuccess)
      return 91;
    for (int i = 0; i < 1; i++) /* the peer reads the handle from the pipe */
      if (write(handle_pipe[1], &a.handle, sizeof(a.handle)) != (ssize_t)sizeof(a.handle))
        return 92;
  } else {
    if (read(handle_pipe[0], &a.handle, sizeof(a.handle)) != (ssize_t)sizeof(a.handle))
      return 93;
  }
  a.kind = PCL_TRANSPORT_NONE; /* the topology must pick TCP: different hosts, no HCA */
  a.expect = PCL_TRANSPORT_TCP;
  int rc = port_rank(rank, n, &a);
  if (rc == 0)
    fprintf(stderr, "rank %d: port channel over TCP across namespaces ok\n", rank);
  return rc;
}

int main(void) {
  if (geteuid() != 0) {
    fprintf(stderr, "not root: network namespaces unavailable, skipped\n");
    return 77;
  }
  if (pcl_ib_device_count() > 0) {
    fprintf(stderr, "an HCA is present: the topology would choose IB; skipped\n");
    return 77;
  }
  int id = getpid() % 100000;
  for (int i = 0; i < 2; i++) {
    snprintf(ns[i], sizeof(ns[i]), "pcltest%d%c", id, 'a' + i);
    snprintf(veth[i], sizeof(veth[i]), "pcl%d%c", id, 'a' + i);
  }
  if (setup() != 0) {
    cleanup();
    fprintf(stderr, "cannot create network namespaces / veth here (not permitted?): skipped\n");
    return 77;
  }
  if (pipe(handle_pipe) != 0) {
    cleanup();
    return 1;
  }
  int codes[2] = {0, 0};
  int rc = pcl_mp_run(2, rank_main, NULL, 90, codes);
  close(handle_pipe[0]);
  close(handle_pipe[1]);
  cleanup();
  if (rc != 0)
    fprintf(stderr, "failed: rank codes %d %d\n", codes[0], codes[1]);
  return rc == 0 ? 0 : 1;
}
