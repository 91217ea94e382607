/* SPDX-License-Identifier: MIT
 * The plan registry: loads every valid *.json plan under a list of directories once, and picks
 * the plan for a call deterministically from values that are identical on all ranks: from a
 * tuning table where one applies (docs/tuning.md), else by the plans' own priorities and ranges. */
#ifndef PCL_REGISTRY_H
#define PCL_REGISTRY_H

#include <stdint.h>
#include <nccl.h>
#include "plan.h"
#include "tune.h"

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

/* The plan for a call by the untuned rules, or NULL; the tuning table is not consulted and
 * tuned-only plans are never candidates. `bytes` is the message size as defined in plan.h
 * (allgather: total output bytes; reducescatter: total input bytes; others: count x element
 * size). Candidates: valid plans with the same collective, len(gpus) == world_size,
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
 * max_bytes (0 when none): for sizing a communicator's scratch buffer. Tuned-only plans count
 * once the applied tuning table names them and only for a communicator that follows the table
 * (tuned = 1), here, in pcl_registry_max_channels_per_peer and in pcl_registry_plans_hash. */
uint64_t pcl_registry_max_scratch_bytes(const pcl_registry_t *reg, int world_size,
                                        int nranks_per_node, uint64_t max_bytes, int tuned);

/* ---- Tuning (docs/tuning.md; registry_tune.c) ------------------------------------------------
 * At start-up, before any selection (none of these is safe beside a selection): read the tuning
 * file, load the opt-in set as tuned-only, fill the identity (plans_digest from
 * pcl_registry_plans_digest), check it, and set the table. */

/* Loads the plans of `dirs` as pcl_registry_create does, but tuned-only: never candidates of the
 * untuned rules, and counted (scratch, channels, plans hash) only once an applied tuning table
 * names them. They come after every other plan, so a name that both sets hold resolves to the
 * ordinary plan. Fails only when out of memory. */
ncclResult_t pcl_registry_add_tuned_only(pcl_registry_t *reg, const char *const *dirs, int ndirs);

/* A digest of every loaded plan (tuned-only ones included) that does not depend on their order
 * or files' paths: names, collective, sizes, layout, priority and each rank's program
 * (pcl_plan_gpu_t.io_digest). A tuning file's identity.plans_digest must equal it. */
uint64_t pcl_registry_plans_digest(const pcl_registry_t *reg);

/* Takes `table` (from pcl_tune_load or pcl_tune_find) in every case: the registry owns it from
 * now on and frees it with itself, or at once when identity_ok is 0 (pcl_tune_identity_check's
 * answer). identity_ok 0 or table NULL: untuned (a table set before is dropped). Else each
 * range's path is resolved to the first loaded plan of that name that fits the entry
 * (collective, world, ranks per node, placement, registered buffers); a name with no such plan
 * is reported at INFO and that range ignored (the untuned rules hold there). One INFO line tells
 * what was applied. */
void pcl_registry_set_tuning(pcl_registry_t *reg, pcl_tune_t *table, int identity_ok);

/* One call, as the tuned selection sees it. */
typedef struct {
  pcl_plan_coll_t collective;
  int world, ranks_per_node;
  int ranks_per_gpu; /* ranks that share one GPU (1: a GPU each) */
  int procs;         /* pcl_tune_procs_t; another value matches no tuned entry */
  int inplace, registered;
  uint64_t bytes; /* as for pcl_registry_select */
  int untuned;    /* the communicator does not follow the table (its ranks read different ones) */
} pcl_registry_call_t;

/* The path of a call. When the applied table has the call's shape (collective, world, ranks per
 * node and per GPU, process model, placement, registered: all equal) and a range of it, not
 * ignored, holds bytes: NULL where NCCL won, else the named plan if it can take this size
 * (pcl_plan_size_selectable), with *tuned = 1. Otherwise the untuned rules
 * (pcl_registry_select_for), *tuned = 0. tuned may be NULL. Pure, like the untuned rules. */
const pcl_plan_t *pcl_registry_select_call(const pcl_registry_t *reg,
                                           const pcl_registry_call_t *call, int *tuned);

/* A hash of the plans selectable for (world_size, ranks_per_node) (names, collectives, size
 * ranges, priorities, placement, tuned-only or not) and, when tuned, of what the applied tuning
 * table decides for them (shapes, ranges, winners; not the times). Ranks compare it before
 * running plans: all must select from the same set, by the same table. */
uint64_t pcl_registry_plans_hash(const pcl_registry_t *reg, int world_size, int ranks_per_node,
                                 int tuned);

/* What the applied tuning table decides for (world_size, ranks_per_node) alone: the same value
 * with no table and with a table that has no entry of that shape. Ranks compare it first, and
 * follow the table only where they all agree. */
uint64_t pcl_registry_tuning_hash(const pcl_registry_t *reg, int world_size, int ranks_per_node);

/* The most channels of `type` (pcl_plan_chan_t) that any plan selectable for (world_size,
 * ranks_per_node) opens from one rank to one peer, at least `floor`: the transport channels a
 * communicator creates per peer. */
int pcl_registry_max_channels_per_peer(const pcl_registry_t *reg, int world_size,
                                       int ranks_per_node, int type, int floor, int tuned);

/* Iteration over the loaded (valid) plans, in selection order, tuned-only ones last. */
int pcl_registry_count(const pcl_registry_t *reg);
const pcl_plan_t *pcl_registry_plan(const pcl_registry_t *reg, int i);

/* Refused files and why ("file: json.path: reason"), in scan order. */
int pcl_registry_refused_count(const pcl_registry_t *reg);
const char *pcl_registry_refused(const pcl_registry_t *reg, int i);

#endif
