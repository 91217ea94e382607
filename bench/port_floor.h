/* SPDX-License-Identifier: MIT
 * planccl-portbench's bandwidth floor (port_floor.c): plain loopback TCP, one or more sockets. */
#ifndef PCL_PORT_FLOOR_H
#define PCL_PORT_FLOOR_H

#include <stddef.h>

#include "bootstrap.h"

/* Both ranks call it: nsock plain loopback TCP connections between rank 0 and rank 1 (rank 1
 * listens; its address travels over b under `tag`), into fds[0 .. nsock). 0 on success. */
int port_floor_connect(pcl_bootstrap_t *b, int rank, int tag, int *fds, int nsock);

/* Both ranks call it: rank 0 sends `bytes` of buf to rank 1 over `nsock` (1..8) sockets at once,
 * a thread per socket, `reps` times. Returns rank 0's best GB/s (rank 1: 0), -1 on failure. */
double port_floor_bw(pcl_bootstrap_t *b, int rank, void *buf, size_t bytes, int nsock, int reps);

#endif
