/* SPDX-License-Identifier: MIT
 * A tuning file through the NCCL API: the library writes its identity (PLANCCL_TUNE_IDENTITY), a
 * file made with it sends the sizes it names to NCCL while other shapes and sizes keep the plans
 * and calls on symmetric windows take its entry for registered buffers (a plan), a file measured
 * elsewhere changes nothing, and ranks that read different files follow none. Two
 * processes share the GPUs there are, over the fake NCCL, which computes nothing: a right sum ran
 * on planccl's kernels. Exits 77 without a GPU.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "mp_launch.h"
#include "shim_mp.h"

#define SMALL 1024  /* floats: 4 KiB, inside the file's range */
#define LARGE 16384 /* floats: 64 KiB, past it */
#define WINDOW 2048 /* floats: 8 KiB, inside both entries' ranges: on a window */
#define WIN_BYTES (1u << 20)

enum { PHASE_IDENTITY, PHASE_TUNED, PHASE_STALE, PHASE_SPLIT };

typedef struct {
  ncclUniqueId id;
  int ready, ngpus, phase;
  char dir[256];
  char log[2][256];
} shared_t;

/* Out of place 4 KiB: NCCL by the file (the fake leaves the poison); in place 4 KiB and out of
 * place 64 KiB: shapes and sizes the file lacks, on plans; out of place 8 KiB on a window: the
 * plan of the file's entry for registered buffers, though its unregistered entry says NCCL. Stale
 * file, or a file on one rank only: all on plans. */
static int calls_ok(shared_t *sh, ncclComm_t comm, float *in, float *out, float *w, int rank,
                    cudaStream_t s) {
  int tuned = sh->phase == PHASE_TUNED;
  return shim_mp_allreduce_checked(comm, in, out, SMALL, s, rank, !tuned) &&
         shim_mp_allreduce_checked(comm, in, in, SMALL, s, rank, 1) &&
         shim_mp_allreduce_checked(comm, in, out, LARGE, s, rank, 1) &&
         shim_mp_allreduce_checked(comm, w, w + LARGE, WINDOW, s, rank, 1);
}

static int rank_main(int rank, int nranks, void *arg) {
  shared_t *sh = arg;
  int rc = 0;
  ncclComm_t comm = NULL;
  ncclWindow_t win = NULL;
  float *in = NULL, *out = NULL, *w = NULL;
  cudaStream_t s = NULL;
  char path[320];
  if (freopen(sh->log[rank], "w", stderr) == NULL)
    return 2;
  if (sh->phase == PHASE_IDENTITY) {
    snprintf(path, sizeof(path), "%s/identity%d.json", sh->dir, rank);
    setenv("PLANCCL_TUNE_IDENTITY", path, 1);
  } else {
    snprintf(path, sizeof(path), "%s/tune.json", sh->dir);
    setenv("PLANCCL_TUNE_FILE", sh->phase == PHASE_SPLIT && rank == 1 ? "none" : path, 1);
  }
  PCL_MP_CHECK(cudaSetDevice(rank % sh->ngpus) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&in, LARGE * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&out, LARGE * sizeof(float)) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&w, WIN_BYTES) == cudaSuccess, 2);
  PCL_MP_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, 2);
  PCL_MP_CHECK(shim_mp_init_n(&sh->id, &sh->ready, rank, nranks, &comm) == ncclSuccess, 3);
  PCL_MP_CHECK(
      ncclCommWindowRegister(comm, w, WIN_BYTES, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess, 3);
  PCL_MP_CHECK(calls_ok(sh, comm, in, out, w, rank, s), 4);
  fflush(stderr);
  if (sh->phase == PHASE_TUNED) {
    PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "tuning file chose NCCL") >= 1, 5);
    PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "applied: 2 call shapes") == 1, 5);
    /* The window call's size class is logged with the path it ran, the registered entry's. */
    PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "path=plan:allreduce_2gpu_ll1_outofplace ") == 1,
                 5);
  }
  if (sh->phase == PHASE_STALE)
    PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "does not apply here") == 1, 6);
  if (sh->phase == PHASE_SPLIT)
    PCL_MP_CHECK(shim_mp_log_count(sh->log[rank], "read different tuning files") == (rank == 0), 6);
  PCL_MP_CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, 7);
  win = NULL;
  PCL_MP_CHECK(ncclCommDestroy(comm) == ncclSuccess, 7);
  comm = NULL;
out:
  if (win != NULL)
    ncclCommWindowDeregister(comm, win);
  shim_mp_release(comm, in, out, s);
  cudaFree(w);
  return rc;
}

/* The identity rank 0 wrote, without its newline; NULL when it cannot be read. */
static char *read_identity(const char *dir, char *buf, size_t len) {
  char path[320];
  snprintf(path, sizeof(path), "%s/identity0.json", dir);
  FILE *f = fopen(path, "r");
  char *got = f != NULL ? fgets(buf, (int)len, f) : NULL;
  if (f != NULL)
    fclose(f);
  if (got != NULL)
    buf[strcspn(buf, "\n")] = '\0';
  return got;
}

/* tune.json for this run's shape (2 processes; ranks per GPU from the GPU count): out-of-place
 * allreduce of 16 B to 8 KiB on NCCL, and on registered buffers from 2 KiB + 16 to 8 KiB on the
 * LL plan (the untuned rules' plan there, so only the registered entry can have taken it). */
static int write_tune(const shared_t *sh, const char *identity) {
  char path[320];
  snprintf(path, sizeof(path), "%s/tune.json", sh->dir);
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return 0;
  fprintf(f,
          "{\"planccl_tune\": 1, \"identity\": %s, \"entries\": [{\"collective\": \"allreduce\","
          " \"world\": 2, \"ranks_per_node\": 2, \"ranks_per_gpu\": %d, \"process_model\":"
          " \"processes\", \"inplace\": false, \"registered\": false, \"ranges\": [{\"min\": 16,"
          " \"max\": 8192, \"path\": \"nccl\", \"us\": 1}]}, {\"collective\": \"allreduce\","
          " \"world\": 2, \"ranks_per_node\": 2, \"ranks_per_gpu\": %d, \"process_model\":"
          " \"processes\", \"inplace\": false, \"registered\": true, \"ranges\": [{\"min\": 2064,"
          " \"max\": 8192, \"path\": \"allreduce_2gpu_ll1_outofplace\", \"us\": 1}]}]}\n",
          identity, sh->ngpus >= 2 ? 1 : 2, sh->ngpus >= 2 ? 1 : 2);
  return fclose(f) == 0;
}

static const char *const plan_files[] = {
    "allreduce/2gpu_ll1_small_inplace.json", "allreduce/2gpu_ll1_small_outofplace.json",
    "allreduce/2gpu_ll1_inplace.json",       "allreduce/2gpu_ll1_outofplace.json",
    "allreduce/2gpu_ll1_large_inplace.json", "allreduce/2gpu_ll1_large_outofplace.json"};
#define NFILES (sizeof(plan_files) / sizeof(plan_files[0]))

int main(void) {
  shared_t *sh = shim_mp_shared(sizeof(*sh));
  char identity[1024], stale[1100];
  if (sh == NULL)
    return 1;
  snprintf(sh->dir, sizeof(sh->dir), "/tmp/pcl_shim_tune_XXXXXX");
  if (mkdtemp(sh->dir) == NULL)
    return 1;
  setenv("PLANCCL_DEBUG", "INFO", 1);
  setenv("PLANCCL_DEBUG_SUBSYS", "COLL,PLAN", 1);
  int rc = shim_mp_main_n("shim_tune", plan_files, NFILES, 2, rank_main, sh, &sh->ngpus, sh->log);
  if (rc != 0)
    goto done;
  rc = 1;
  if (read_identity(sh->dir, identity, sizeof(identity)) == NULL ||
      strstr(identity, "\"plans_digest\"") == NULL) {
    printf("shim_tune: no identity written\n");
    goto done;
  }
  printf("shim_tune: identity %s\n", identity);
  sh->phase = PHASE_TUNED;
  sh->ready = 0;
  if (!write_tune(sh, identity) ||
      shim_mp_main_n("shim_tune", plan_files, NFILES, 2, rank_main, sh, &sh->ngpus, sh->log) != 0)
    goto done;
  /* The same file, measured with another NCCL: ignored. */
  char *v = strstr(identity, "\"nccl\": \"");
  if (v == NULL)
    goto done;
  snprintf(stale, sizeof(stale), "%.*s\"nccl\": \"0.0.1-elsewhere\", %s", (int)(v - identity),
           identity, strchr(v + 9, '"') + 3);
  sh->phase = PHASE_STALE;
  sh->ready = 0;
  if (!write_tune(sh, stale) ||
      shim_mp_main_n("shim_tune", plan_files, NFILES, 2, rank_main, sh, &sh->ngpus, sh->log) != 0)
    goto done;
  /* The good file on rank 0 only: the untuned rules on both, one WARN. */
  sh->phase = PHASE_SPLIT;
  sh->ready = 0;
  if (!write_tune(sh, identity) ||
      shim_mp_main_n("shim_tune", plan_files, NFILES, 2, rank_main, sh, &sh->ngpus, sh->log) != 0)
    goto done;
  rc = 0;
done:
  snprintf(identity, sizeof(identity), "rm -rf %s", sh->dir);
  if (system(identity) != 0)
    printf("shim_tune: could not remove %s\n", sh->dir);
  return rc;
}
