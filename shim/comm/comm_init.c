/* SPDX-License-Identifier: MIT
 * planccl's setup of a communicator, beside the real NCCL's: the bootstrap from the unique id
 * (init), from the parent's bootstrap (split) or from a root the survivors share (shrink), then
 * the resources of comm_res.c. Runs inline (blocking init), on a helper thread (non-blocking
 * init), or at the outermost ncclGroupEnd with one thread per communicator: the bootstrap blocks
 * until every rank arrives, so ranks driven by one thread must progress concurrently. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "alloc.h"
#include "comm_int.h"
#include "log.h"
#include "pcl_check.h"
#include "param.h"
#include "shim_int.h"

#define TAG_SHRINK_ROOT 0x5348 /* bootstrap tag of the shrink root handle */

static pthread_once_t dev_once = PTHREAD_ONCE_INIT;
static int dev_count;

static void count_devices(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    n = 0;
    cudaGetLastError(); /* clear the sticky "no device" error for the application */
  }
  dev_count = n;
}

int pcl_setup_possible(void) {
  if (pcl_param_disable())
    return 0;
  pthread_once(&dev_once, count_devices);
  return dev_count > 0;
}

/* Why planccl's part cannot run before any collective step; NULL when it can. Identical on every
 * rank given the same environment and id. */
static const char *local_verdict(const struct pcl_setup_job *j) {
  if (pcl_param_disable())
    return "PLANCCL_DISABLE is set";
  if (!pcl_setup_possible())
    return "no CUDA device";
  if (j->kind == PCL_JOB_INIT && !j->has_handle)
    return "the unique id has no planccl part (made by a process without planccl)";
  return NULL;
}

/* Survivors of a shrink agree on a fresh bootstrap: the lowest survivor creates a root and sends
 * its handle to the others over the parent's bootstrap (point-to-point: the excluded ranks take
 * no part). */
static ncclResult_t shrink_bootstrap(const struct pcl_setup_job *j, pcl_bootstrap_t *parent,
                                     pcl_bootstrap_t **out) {
  int n = pcl_bootstrap_nranks(parent), me = pcl_bootstrap_rank(parent);
  int first = -1, newrank = -1, nsurv = 0;
  for (int r = 0; r < n; r++) {
    int gone = 0;
    for (int k = 0; k < j->nexclude; k++)
      gone |= j->exclude[k] == r;
    if (gone)
      continue;
    if (first < 0)
      first = r;
    if (r == me)
      newrank = nsurv;
    nsurv++;
  }
  if (newrank < 0 || nsurv == 0) {
    PCL_WARN(PCL_LOG_INIT, "ncclCommShrink: rank %d is in its own exclude list", me);
    return ncclInvalidArgument;
  }
  pcl_bootstrap_handle_t h;
  memset(&h, 0, sizeof(h));
  if (me == first) {
    PCL_CHECK(pcl_bootstrap_root_create(&h));
    for (int r = first + 1; r < n; r++) {
      int gone = 0;
      for (int k = 0; k < j->nexclude; k++)
        gone |= j->exclude[k] == r;
      if (!gone)
        PCL_CHECK(pcl_bootstrap_send(parent, r, TAG_SHRINK_ROOT, &h, sizeof(h)));
    }
  } else {
    PCL_CHECK(pcl_bootstrap_recv(parent, first, TAG_SHRINK_ROOT, &h, sizeof(h)));
  }
  return pcl_bootstrap_create(&h, newrank, nsurv, j->c ? &j->c->abort_flag : NULL, out);
}

static void run_job(struct pcl_setup_job *j) {
  struct ncclComm *c = j->c;
  char why[160] = "";
  pcl_bootstrap_t *boot = NULL;
  struct pcl_comm_pcl *p = NULL;
  ncclResult_t res = ncclSuccess;
  const char *v = local_verdict(j);
  struct pcl_comm_pcl *parent = NULL;
  if (j->kind != PCL_JOB_INIT && j->parent != NULL) {
    pcl_setup_join(j->parent, 1);
    parent = j->parent->pcl;
  }
  /* The caller's current device is kept (an inline setup runs on the application's thread). */
  int prev_dev = -1;
  if (j->cuda_dev >= 0 && cudaGetDevice(&prev_dev) == cudaSuccess && prev_dev != j->cuda_dev)
    cudaSetDevice(j->cuda_dev);
  if (v != NULL) {
    snprintf(why, sizeof(why), "%s", v);
  } else if (j->kind == PCL_JOB_INIT) {
    res = pcl_bootstrap_create(&j->handle, j->rank, j->nranks, c ? &c->abort_flag : NULL, &boot);
    if (res != ncclSuccess)
      snprintf(why, sizeof(why), "bootstrap failed");
  } else if (parent == NULL) {
    snprintf(why, sizeof(why), "the parent communicator runs pass-through");
  } else if (j->kind == PCL_JOB_SPLIT) {
    /* Every rank of the parent takes part, NCCL_SPLIT_NOCOLOR ones too (they get no child). */
    res = pcl_bootstrap_split(parent->boot, j->color, j->key, &boot);
    if (res != ncclSuccess)
      snprintf(why, sizeof(why), "bootstrap split failed");
  } else if (j->shrink_flags & NCCL_SHRINK_ABORT) {
    snprintf(why, sizeof(why),
             "NCCL_SHRINK_ABORT: the excluded ranks may be dead, so the "
             "survivors do not build channels over the parent");
  } else {
    res = shrink_bootstrap(j, parent->boot, &boot);
    if (res != ncclSuccess)
      snprintf(why, sizeof(why), "shrink bootstrap failed");
  }
  if (boot != NULL && c == NULL) { /* NOCOLOR: not expected to get a bootstrap, drop it */
    pcl_bootstrap_destroy(boot);
    boot = NULL;
  }
  if (c == NULL)
    goto out;
  if (boot != NULL) {
    pcl_log_set_thread_rank(pcl_bootstrap_rank(boot), j->cuda_dev);
    pcl_comm_res_create(boot, j->cuda_dev, &p, why, sizeof(why)); /* owns boot */
  }
  c->setup_result = res;
  if (p != NULL) {
    c->rank = p->rank;
    c->nranks = p->nranks;
    c->cuda_dev = p->cuda_dev;
    c->local_rank = p->local_rank;
    c->ranks_per_node = p->ranks_per_node;
  } else {
    snprintf(c->passthrough_why, sizeof(c->passthrough_why), "%s", why);
    PCL_INFO(PCL_LOG_INIT | PCL_LOG_SHIM,
             "communicator %p (rank %d of %d): pass-through mode, "
             "every call goes to the real NCCL: %s",
             (void *)c, c->rank, c->nranks, why);
  }
  if (c->stats == NULL && pcl_stats_create(p ? p->reg : NULL, &c->stats) != ncclSuccess)
    c->stats = NULL;
  __atomic_store_n(&c->pcl, p, __ATOMIC_RELEASE);
  __atomic_store_n((int *)&c->setup_state, PCL_SETUP_DONE, __ATOMIC_RELEASE);
out:
  if (prev_dev >= 0 && prev_dev != j->cuda_dev)
    cudaSetDevice(prev_dev);
}

static void free_job(struct pcl_setup_job *j) {
  if (j == NULL)
    return;
  pcl_free(j->exclude);
  pcl_free(j);
}

static struct pcl_setup_job *copy_job(const struct pcl_setup_job *job) {
  struct pcl_setup_job *j;
  if (PCL_CALLOC(j, 1, "setup job") == NULL)
    return NULL;
  *j = *job;
  j->exclude = NULL;
  if (job->nexclude > 0 && job->exclude != NULL) {
    if (PCL_CALLOC(j->exclude, (size_t)job->nexclude, "shrink exclude list") == NULL) {
      pcl_free(j);
      return NULL;
    }
    memcpy(j->exclude, job->exclude, sizeof(int) * (size_t)job->nexclude);
  }
  return j;
}

static void *job_thread(void *arg) {
  struct pcl_setup_job *j = arg;
  run_job(j);
  free_job(j);
  return NULL;
}

void pcl_setup_run_all(struct pcl_setup_job **jobs, int n) {
  if (n == 1) {
    run_job(jobs[0]);
    free_job(jobs[0]);
    return;
  }
  pthread_t *th = NULL;
  int *started = NULL;
  if (n <= 0)
    return;
  PCL_CALLOC(th, (size_t)n, "setup threads");
  PCL_CALLOC(started, (size_t)n, "setup threads started");
  for (int i = 0; i < n; i++) {
    if (th != NULL && started != NULL && pthread_create(&th[i], NULL, job_thread, jobs[i]) == 0) {
      started[i] = 1;
      continue;
    }
    /* No thread: give up planccl's part for this comm (inline would block the others). */
    PCL_WARN(PCL_LOG_INIT, "cannot start a setup thread: communicator runs pass-through");
    struct ncclComm *c = jobs[i]->c;
    jobs[i]->kind = PCL_JOB_INIT;
    jobs[i]->has_handle = 0;
    if (c != NULL)
      run_job(jobs[i]);
    free_job(jobs[i]);
  }
  for (int i = 0; i < n; i++)
    if (started != NULL && started[i])
      pthread_join(th[i], NULL);
  pcl_free(started);
  pcl_free(th);
}

void pcl_setup_join(struct ncclComm *c, int wait) {
  if (c == NULL)
    return;
  pthread_mutex_lock(&c->lock);
  if (c->setup_thread_live && (wait || pcl_setup_state(c) == PCL_SETUP_DONE)) {
    pthread_join(c->setup_thread, NULL);
    c->setup_thread_live = 0;
  }
  pthread_mutex_unlock(&c->lock);
}

ncclResult_t pcl_setup_submit(const struct pcl_setup_job *job) {
  if (pcl_group_depth() > 0)
    return pcl_group_defer_setup(job);
  struct pcl_setup_job *j = copy_job(job);
  if (j == NULL)
    return ncclSystemError;
  /* A non-blocking comm whose setup has a collective step runs it on a helper thread; one that
   * degrades to pass-through at once (no bootstrap) finishes here, without a thread. */
  if (j->c != NULL && j->c->nonblocking && local_verdict(j) == NULL) {
    __atomic_store_n((int *)&j->c->setup_state, PCL_SETUP_RUNNING, __ATOMIC_RELEASE);
    pthread_mutex_lock(&j->c->lock);
    int err = pthread_create(&j->c->setup_thread, NULL, job_thread, j);
    j->c->setup_thread_live = err == 0;
    pthread_mutex_unlock(&j->c->lock);
    if (err == 0)
      return ncclSuccess;
    j->has_handle = 0; /* no thread: pass-through */
    j->kind = PCL_JOB_INIT;
  }
  run_job(j);
  free_job(j);
  return ncclSuccess;
}
