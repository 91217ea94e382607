/* SPDX-License-Identifier: MIT
 * Host memory shared by the processes of one communicator on one host: made by rank 0 (a memfd),
 * handed to the others through the fd server, mapped by every rank. */
#ifndef PCL_SHM_H
#define PCL_SHM_H

#include <stddef.h>
#include <nccl.h>
#include "bootstrap.h"

typedef struct pcl_shm pcl_shm_t;

/* Collective over `b`, whose ranks must all be processes of this host: `bytes` zero-filled bytes
 * mapped shared by every rank. Every rank learns alike whether it worked: *out NULL (with a WARN
 * on the rank that failed) when any rank could not map it; the return value is an error only
 * when a bootstrap step failed. */
ncclResult_t pcl_shm_create(pcl_bootstrap_t *b, size_t bytes, pcl_shm_t **out);
void *pcl_shm_ptr(const pcl_shm_t *shm);
/* Unmaps this rank's mapping; the memory goes with the last one. NULL ok. */
void pcl_shm_destroy(pcl_shm_t *shm);

#endif
