/* SPDX-License-Identifier: MIT
 * planccl-portbench --probe (port_probe.c): small GPU copies, one process alone and two taking
 * turns on one GPU. */
#ifndef PCL_PORT_PROBE_H
#define PCL_PORT_PROBE_H

/* Forks two processes (the caller must not have initialised CUDA), prints three figures; 0 on
 * success. */
int port_probe_run(void);

#endif
