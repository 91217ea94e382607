/* SPDX-License-Identifier: MIT
 * Tuning files (docs/tuning.md): what planccl-tune measured on one machine, per call shape the
 * faster path of each size range (a plan by name, or NCCL). The parsed table, the identity check
 * that says whether a file applies where it is read, and where the file is looked for. */
#ifndef PCL_TUNE_H
#define PCL_TUNE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#include "plan.h"

#define PCL_TUNE_VERSION 1   /* the "planccl_tune" value this planccl reads */
#define PCL_TUNE_STR_MAX 128 /* identity strings, the NUL included */
#define PCL_TUNE_MAX_ENTRIES 4096
#define PCL_TUNE_MAX_RANGES 1024 /* per entry */
#define PCL_TUNE_NCCL "nccl"     /* the path name that means the real NCCL */

/* How the GPUs of the machine reach one another. */
typedef enum {
  PCL_TUNE_LINK_NVLINK = 0,
  PCL_TUNE_LINK_PCIE,
  PCL_TUNE_LINK_SHARED, /* the ranks share one GPU */
  PCL_TUNE_LINK_COUNT
} pcl_tune_link_t;

/* How a communicator's ranks of one host are hosted: all threads of one process, or one
 * process each. */
typedef enum {
  PCL_TUNE_PROCS_THREADS = 0,
  PCL_TUNE_PROCS_PROCESSES,
  PCL_TUNE_PROCS_COUNT
} pcl_tune_procs_t;

/* The facts a measurement depends on: in a file, where it was measured; filled by the caller,
 * where it runs. Strings are compared exactly; "" is a value like any other. */
typedef struct {
  char gpu[PCL_TUNE_STR_MAX]; /* the device name, e.g. "NVIDIA H200" */
  int gpus;                   /* GPUs of the machine */
  int link;                   /* pcl_tune_link_t */
  char driver[PCL_TUNE_STR_MAX];
  char cuda[PCL_TUNE_STR_MAX];
  char planccl[PCL_TUNE_STR_MAX];
  char nccl[PCL_TUNE_STR_MAX]; /* the real NCCL's version */
  uint64_t plans_digest;       /* pcl_registry_plans_digest of the loaded plans */
} pcl_tune_identity_t;

/* One size range of an entry: who won it and by how much. */
typedef struct {
  uint64_t min, max; /* inclusive message sizes, as plan.h defines them */
  char *path;        /* the winner: a plan's name, or PCL_TUNE_NCCL */
  int nccl;          /* the winner is the real NCCL */
  double us;         /* the winner's time per call, microseconds */
  char *runner_up;   /* the second fastest (a plan's name or PCL_TUNE_NCCL); NULL: none */
  double runner_up_us;
  /* Set by pcl_registry_set_tuning: the loaded plan `path` names (NULL for NCCL), or ignored
   * when no loaded plan of that name fits the entry (the untuned rules hold there). */
  const pcl_plan_t *plan;
  int ignored;
} pcl_tune_range_t;

/* One call shape that was measured, and its ranges (sorted, disjoint). */
typedef struct {
  pcl_plan_coll_t collective; /* allreduce, allgather, reducescatter, broadcast or reduce */
  int world, ranks_per_node, ranks_per_gpu;
  int procs; /* pcl_tune_procs_t */
  int inplace, registered;
  int n_ranges;
  pcl_tune_range_t *ranges;
} pcl_tune_entry_t;

typedef struct pcl_tune {
  char *file; /* the name used in messages */
  pcl_tune_identity_t identity;
  int n_entries; /* no two of the same shape */
  pcl_tune_entry_t *entries;
} pcl_tune_t;

/* Parses a tuning file. On failure *out is NULL and err holds "file: json.path: reason" (or
 * "file: reason" for I/O); nothing is logged, the caller decides how loud a refusal is.
 * ncclInvalidArgument for a malformed file, ncclSystemError for I/O errors and out of memory. */
ncclResult_t pcl_tune_load(const char *path, pcl_tune_t **out, char *err, size_t errlen);
/* The same from memory; `name` stands in for the file name. */
ncclResult_t pcl_tune_load_buffer(const char *name, const char *json, size_t len, pcl_tune_t **out,
                                  char *err, size_t errlen);
/* NULL is fine. */
void pcl_tune_destroy(pcl_tune_t *t);

/* 1 when the file was measured on what `here` describes (every field equal), else 0 with one
 * INFO line naming each field that differs and both values (also written into why, when
 * non-NULL: "gpu is 'A' here, 'B' in the file; ..."). */
int pcl_tune_identity_check(const pcl_tune_t *t, const pcl_tune_identity_t *here, char *why,
                            size_t whylen);

/* The identity as the JSON object of a tuning file's "identity" (docs/tuning.md), NUL-terminated
 * in buf when it fits; returns the length it needs, as snprintf. */
size_t pcl_tune_identity_json(const pcl_tune_identity_t *id, char *buf, size_t len);

const char *pcl_tune_link_name(int link);   /* "nvlink", "pcie", "shared"; "?" */
const char *pcl_tune_procs_name(int procs); /* "threads", "processes"; "?" */
int pcl_tune_link_from_name(const char *s); /* -1 when unknown */
int pcl_tune_procs_from_name(const char *s);

/* ---- Where the file is ------------------------------------------------------------------- */
#define PCL_TUNE_MAX_PATHS 2

typedef struct {
  int n;
  int from_env; /* path[0] is PLANCCL_TUNE_FILE's: a missing file is worth a WARN */
  char path[PCL_TUNE_MAX_PATHS][PATH_MAX];
} pcl_tune_paths_t;

/* Pure (no file access): the candidates, in order. `env_file` (PLANCCL_TUNE_FILE) set: that file
 * alone, or none for "none". Else $XDG_CACHE_HOME/planccl/tune.json (when xdg_cache_home is an
 * absolute path; else $HOME/.cache/planccl/tune.json when home is), then
 * <lib_dir>/../share/planccl/tune.json (lib_dir = the real directory of libplanccl.so, as for the
 * plans; NULL when unknown). Any argument may be NULL; paths too long are dropped. */
void pcl_tune_search_paths(const char *env_file, const char *xdg_cache_home, const char *home,
                           const char *lib_dir, pcl_tune_paths_t *out);

/* The table of the first candidate that exists, or NULL: when none exists (INFO; a WARN when
 * the file PLANCCL_TUNE_FILE names is missing), and when that first one cannot be read or is
 * malformed (a WARN with "file: json.path: reason"; later candidates are not tried, so nothing
 * is applied). Never fails otherwise: without a table the untuned rules hold. */
pcl_tune_t *pcl_tune_find(const pcl_tune_paths_t *paths);

#endif
