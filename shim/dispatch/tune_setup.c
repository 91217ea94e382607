/* SPDX-License-Identifier: MIT
 * The tuning file at start-up (docs/tuning.md): found, checked against where it is read (the
 * GPUs, driver, CUDA, planccl, the real NCCL, the plans' digest) and handed to the registry; and
 * that identity written out for planccl-tune (PLANCCL_TUNE_IDENTITY). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "comm_int.h"
#include "log.h"
#include "param.h"
#include "plans_search.h"
#include "shim_int.h"

#ifndef PCL_VERSION
#define PCL_VERSION "unknown"
#endif

/* "13.0" for 13000 (CUDA's version codes: major * 1000 + minor * 10). */
static void cuda_version_text(int code, char *buf, size_t size) {
  snprintf(buf, size, "%d.%d", code / 1000, code % 1000 / 10);
}

/* How the GPUs reach one another, seen from GPUs 0 and 1: one GPU is "shared" (its ranks share
 * it); native atomics between two GPUs come with NVLink and not over PCIe. */
static int link_here(int gpus) {
  if (gpus <= 1)
    return PCL_TUNE_LINK_SHARED;
  int atomics = 0;
  if (cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, 0, 1) != cudaSuccess)
    atomics = 0;
  return atomics ? PCL_TUNE_LINK_NVLINK : PCL_TUNE_LINK_PCIE;
}

/* This process's identity: GPU 0's name and the visible GPUs, the driver, the CUDA runtime
 * planccl was built with, planccl, the real NCCL and the loaded plans. */
static void identity_here(const pcl_registry_t *reg, pcl_tune_identity_t *id) {
  memset(id, 0, sizeof(*id));
  int gpus = 0, driver = 0;
  struct cudaDeviceProp prop;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess)
    gpus = 0;
  id->gpus = gpus;
  if (gpus > 0 && cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    snprintf(id->gpu, sizeof(id->gpu), "%.*s", (int)sizeof(id->gpu) - 1, prop.name);
  id->link = link_here(gpus);
  if (cudaDriverGetVersion(&driver) == cudaSuccess)
    cuda_version_text(driver, id->driver, sizeof(id->driver));
  cuda_version_text(CUDART_VERSION, id->cuda, sizeof(id->cuda));
  snprintf(id->planccl, sizeof(id->planccl), "%s", PCL_VERSION);
  int nccl = pcl_fallback_version();
  if (nccl > 0)
    pcl_nccl_version_text(nccl, id->nccl, sizeof(id->nccl));
  id->plans_digest = pcl_registry_plans_digest(reg);
}

/* PLANCCL_TUNE_IDENTITY: the identity as a tuning file's "identity" object, one line. */
static void write_identity(const char *path, const pcl_tune_identity_t *id) {
  char json[1024];
  size_t n = pcl_tune_identity_json(id, json, sizeof(json));
  FILE *f = fopen(path, "w");
  int ok = f != NULL && n < sizeof(json) && fprintf(f, "%s\n", json) > 0;
  if (f != NULL && fclose(f) != 0)
    ok = 0;
  if (!ok)
    PCL_WARN(PCL_LOG_PLAN, "PLANCCL_TUNE_IDENTITY=%s: could not write the tuning identity", path);
}

void pcl_tune_setup(pcl_registry_t *reg, const char *lib_dir, const char *build_tree,
                    const char *source_plans) {
  if (reg == NULL)
    return;
  pcl_tune_paths_t paths;
  pcl_tune_search_paths(pcl_param_tune_file(), getenv("XDG_CACHE_HOME"), getenv("HOME"), lib_dir,
                        &paths);
  pcl_tune_t *table = pcl_tune_find(&paths);
  const char *idfile = pcl_param_tune_identity();
  if (table == NULL && idfile == NULL)
    return;
  /* The opt-in set, tuned-only: a file may name its plans, and the digest covers them. */
  char extra[PATH_MAX];
  if (pcl_plans_extra_dir(lib_dir, build_tree, source_plans, extra)) {
    const char *dirs[1] = {extra};
    if (pcl_registry_add_tuned_only(reg, dirs, 1) != ncclSuccess) {
      pcl_tune_destroy(table); /* out of memory (logged): untuned */
      return;
    }
  }
  pcl_tune_identity_t here;
  identity_here(reg, &here);
  if (idfile != NULL)
    write_identity(idfile, &here);
  if (table != NULL)
    pcl_registry_set_tuning(reg, table, pcl_tune_identity_check(table, &here, NULL, 0));
}
