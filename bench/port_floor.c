/* SPDX-License-Identifier: MIT
 * planccl-portbench's bandwidth floor: plain loopback TCP between the two ranks, one or several
 * sockets sent and received by threads at once, no proxy, FIFO, fences or staging. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "port_floor.h"
#include "socket.h"

#define FLOOR_BW_TAG 7702
#define FLOOR_MAX_SOCKS 8

typedef struct {
  int fd, send;
  char *buf;
  size_t bytes;
  int rc;
} floor_io_t;

static double floor_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *floor_io_main(void *arg) {
  floor_io_t *io = arg;
  pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "planccl-portbench: plain TCP bandwidth");
  ncclResult_t res = io->send ? pcl_socket_send(io->fd, io->buf, io->bytes, &w)
                              : pcl_socket_recv(io->fd, io->buf, io->bytes, &w);
  io->rc = res == ncclSuccess ? 0 : -1;
  return NULL;
}

/* Moves buf's bytes over every socket at once, part i on socket i. */
static int floor_move(int *fds, int nsock, char *buf, size_t bytes, int send) {
  pthread_t th[FLOOR_MAX_SOCKS];
  floor_io_t io[FLOOR_MAX_SOCKS];
  size_t part = (bytes + (size_t)nsock - 1) / (size_t)nsock;
  int started = 0, rc = 0;
  for (int i = 0; i < nsock; i++) {
    size_t at = (size_t)i * part, n = at >= bytes ? 0 : (bytes - at < part ? bytes - at : part);
    io[i] = (floor_io_t){.fd = fds[i], .send = send, .buf = buf + at, .bytes = n, .rc = -1};
    if (pthread_create(&th[i], NULL, floor_io_main, &io[i]) != 0)
      break;
    started++;
  }
  for (int i = 0; i < started; i++) {
    pthread_join(th[i], NULL);
    rc |= io[i].rc;
  }
  return started == nsock ? rc : -1;
}

int port_floor_connect(pcl_bootstrap_t *b, int rank, int tag, int *fds, int nsock) {
  int lfd = -1, n = 0;
  pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "planccl-portbench: plain TCP setup");
  if (rank == 1) {
    char ifname[64];
    pcl_sockaddr_t local, bound;
    if (pcl_socket_find_interface(ifname, sizeof(ifname), &local) == ncclSuccess &&
        pcl_socket_listen(&local, &lfd, &bound) == ncclSuccess &&
        pcl_bootstrap_send(b, 0, tag, &bound, sizeof(bound)) == ncclSuccess)
      while (n < nsock && pcl_socket_accept(lfd, &w, &fds[n]) == ncclSuccess)
        n++;
  } else {
    pcl_sockaddr_t addr;
    if (pcl_bootstrap_recv(b, 1, tag, &addr, sizeof(addr)) == ncclSuccess)
      while (n < nsock && pcl_socket_connect(&addr, &w, &fds[n]) == ncclSuccess)
        n++;
  }
  pcl_socket_close(&lfd);
  if (n == nsock)
    return 0;
  for (int i = 0; i < n; i++)
    pcl_socket_close(&fds[i]);
  return -1;
}

double port_floor_bw(pcl_bootstrap_t *b, int rank, void *buf, size_t bytes, int nsock, int reps) {
  int fds[FLOOR_MAX_SOCKS];
  double best = -1;
  if (nsock < 1 || nsock > FLOOR_MAX_SOCKS ||
      port_floor_connect(b, rank, FLOOR_BW_TAG, fds, nsock) != 0)
    return -1;
  pcl_socket_wait_t w = pcl_socket_wait_default(NULL, "planccl-portbench: plain TCP bandwidth");
  best = 0;
  for (int r = 0; r < reps; r++) {
    char ack = 1;
    if (pcl_bootstrap_barrier(b) != ncclSuccess) {
      best = -1;
      break;
    }
    double t0 = floor_now_s();
    /* Rank 1 acknowledges on socket 0 once every part arrived: rank 0 times the whole move. */
    if (floor_move(fds, nsock, buf, bytes, rank == 0) != 0 ||
        (rank == 1 ? pcl_socket_send(fds[0], &ack, 1, &w) : pcl_socket_recv(fds[0], &ack, 1, &w)) !=
            ncclSuccess) {
      best = -1;
      break;
    }
    double gbs = (double)bytes / ((floor_now_s() - t0) * 1e9);
    if (rank == 0 && gbs > best)
      best = gbs;
  }
  for (int i = 0; i < nsock; i++)
    pcl_socket_close(&fds[i]);
  return best;
}
