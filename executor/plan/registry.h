/* SPDX-License-Identifier: MIT
 * The plan registry: loads every valid *.json plan under a list of directories once, and picks
 * the plan for a call deterministically from values that are identical on all ranks. */
#ifndef PCL_REGISTRY_H
#define PCL_REGISTRY_H

#include <stdint.h>
#include <nccl.h>
#include "plan.h"

typedef struct pcl_registry pcl_registry_t;

/* Scans `dirs` in order (the caller passes PLANCCL_PLAN_DIR's entries first, then the installed
 * share/planccl/plans), each recursively, for *.json files (names starting with '.' are
 * skipped). Files are taken in strcmp order of their path relative to their directory. Valid
 * plans are kept (INFO per plan), invalid ones are refused (WARN with "file: json.path: reason").
 * A missing directory is logged at INFO and skipped. Only I/O-independent failures (out of
 * memory) make this fail; an empty registry is fine. */
ncclResult_t pcl_registry_create(const char *const *dirs, int ndirs, pcl_registry_t **out);

/* Frees the registry and its plans; NULL is fine. Plans returned earlier become invalid. */
void pcl_registry_destroy(pcl_registry_t *reg);

/* The plan for a call, or NULL. `bytes` is the message size as defined in plan.h (allgather:
 * total output bytes; reducescatter: total input bytes; others: count x element size).
 * Candidates: valid plans with the same collective, len(gpus) == world_size,
 * nranks_per_node equal, [min_message_size, max_message_size] holding bytes (inclusive),
 * pcl_plan_size_selectable(bytes) (whole or in segments), and the in-place rule: an in-place
 * request needs an in-place plan; an out-of-place request takes an out-of-place plan, or an
 * in-place plan that declares "outofplace_ok": true. Among candidates: highest priority, then
 * narrowest range (max - min), then the earliest (directory order, then file order). Pure function
 * of its arguments: every rank picks the same plan. */
const pcl_plan_t *pcl_registry_select(const pcl_registry_t *reg, pcl_plan_coll_t collective,
                                      int world_size, int nranks_per_node, int inplace,
                                      uint64_t bytes);
/* The same for buffers that may be unregistered (registered = 0): plans that need registered
 * buffers (pcl_plan_t.needs_userbuf, zero-copy) are then no candidates. */
const pcl_plan_t *pcl_registry_select_for(const pcl_registry_t *reg, pcl_plan_coll_t collective,
                                          int world_size, int nranks_per_node, int inplace,
                                          uint64_t bytes, int registered);

/* Largest scratch any plan for (world_size, nranks_per_node) needs for messages up to
 * max_bytes (0 when none): for sizing a communicator's scratch buffer. */
uint64_t pcl_registry_max_scratch_bytes(const pcl_registry_t *reg, int world_size,
                                        int nranks_per_node, uint64_t max_bytes);

/* Iteration over the loaded (valid) plans, in selection order. */
/* A hash of the plans selectable for (world_size, ranks_per_node): names, collectives, size
 * ranges, priorities, placement. Ranks compare it before running plans: all must select from
 * the same set. */
uint64_t pcl_registry_plans_hash(const pcl_registry_t *reg, int world_size, int ranks_per_node);

/* The most channels of `type` (pcl_plan_chan_t) that any plan selectable for (world_size,
 * ranks_per_node) opens from one rank to one peer, at least `floor`: the transport channels a
 * communicator creates per peer. */
int pcl_registry_max_channels_per_peer(const pcl_registry_t *reg, int world_size,
                                       int ranks_per_node, int type, int floor);

int pcl_registry_count(const pcl_registry_t *reg);
const pcl_plan_t *pcl_registry_plan(const pcl_registry_t *reg, int i);

/* Refused files and why ("file: json.path: reason"), in scan order. */
int pcl_registry_refused_count(const pcl_registry_t *reg);
const char *pcl_registry_refused(const pcl_registry_t *reg, int i);

#endif
