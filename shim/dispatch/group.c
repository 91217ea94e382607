/* SPDX-License-Identifier: MIT
 * ncclGroupStart/End/SimulateEnd with NCCL's semantics. There is ONE group depth: the real
 * library's. planccl forwards every Start/End to it and keeps a thread-local mirror, so an
 * ncclGroupEnd without a Start is refused here exactly as NCCL refuses it.
 *
 * Inside a group, forwarded calls go to the real library at once (it queues them in its own,
 * still open, group); planned calls and planccl's part of communicator setups are queued in a
 * thread-local record and issued at the outermost ncclGroupEnd:
 *   1. planned calls with no earlier forwarded call on their stream, in call order;
 *   2. the real ncclGroupEnd (all forwarded calls: ONE real group);
 *   3. the remaining planned calls, in call order;
 *   4. deferred setups (init/split/shrink inside a group), one thread per communicator.
 *
 * Why this never deadlocks:
 * - A planned call only launches a kernel: the host never waits for the GPU while issuing it
 *   (its program was built when the call was queued). So steps 1 and 3 always finish.
 * - One thread driving several GPUs (nccl-tests -g 2): every rank's planned kernel of step 1 is
 *   launched before the thread enters the real ncclGroupEnd, so those kernels find their peers
 *   and finish on their own, whatever the real group end waits for (it may block on connection
 *   setup between the comms it holds, which it performs for all of them together, as NCCL does
 *   for any group). Every forwarded call of every GPU sits in the single real group, so the real
 *   library sees the whole multi-GPU group at once, as without planccl. Step 3's kernels are
 *   launched after the real end returned and again need only each other.
 *   Calls must be made in the same order on every rank (NCCL's rule), so a planned call lands
 *   in the same step on every rank of its communicator.
 * - One thread per GPU (nccl-tests -t 2, PyTorch): each thread has its own record and its own
 *   real group; each step only launches or enters the real group end, which NCCL allows to
 *   block until the peer thread's matching group end, and the peer gets there because nothing
 *   in steps 1-3 waits for the other thread.
 * - Setups (step 4) block on the bootstrap until every rank arrives: running them on one thread
 *   per communicator lets the ranks a single thread drives arrive together.
 * Order: each stream sees its calls in call order, except that planned calls issued after a
 * forwarded call on the same stream all follow every forwarded call of that stream in the group
 * (NCCL itself does not promise an order between the calls of one group). */
#include <pthread.h>
#include "alloc.h"
#include "comm_int.h"
#include "group_int.h"
#include "log.h"
#include "shim_int.h"

struct group_tls {
  struct pcl_group_queue q;
  struct pcl_setup_job **jobs; /* deferred setups */
  int njobs, capjobs;
  ncclResult_t err; /* first error of a call inside the group, returned by the outermost end */
};

static _Thread_local int depth;
static _Thread_local struct group_tls *tls;
static pthread_key_t tls_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p) {
  struct group_tls *t = p;
  if (t == NULL)
    return;
  pcl_group_queue_fini(&t->q);
  for (int i = 0; i < t->njobs; i++) {
    if (t->jobs[i] != NULL)
      pcl_free(t->jobs[i]->exclude);
    pcl_free(t->jobs[i]);
  }
  pcl_free(t->jobs);
  pcl_free(t);
}

static void make_key(void) {
  pthread_key_create(&tls_key, tls_free);
}

static struct group_tls *get_tls(void) {
  if (tls != NULL)
    return tls;
  pthread_once(&key_once, make_key);
  if (PCL_CALLOC(tls, 1, "group state") == NULL)
    return NULL;
  pthread_setspecific(tls_key, tls);
  return tls;
}

int pcl_group_depth(void) {
  return depth;
}

static ncclResult_t remember(struct group_tls *t, ncclResult_t res) {
  if (res != ncclSuccess && t != NULL && t->err == ncclSuccess)
    t->err = res;
  return res;
}

ncclResult_t pcl_group_enqueue(const struct pcl_coll_args *a,
                               const struct pcl_dispatch_decision *d) {
  struct group_tls *t = get_tls();
  if (t == NULL)
    return ncclSystemError;
  struct pcl_group_call call = {.a = *a, .d = *d, .planned = 1};
  return remember(t, pcl_group_queue_push(&t->q, &call));
}

ncclResult_t pcl_group_note_forward(const struct pcl_coll_args *a) {
  struct group_tls *t = get_tls();
  if (t == NULL)
    return ncclSystemError;
  struct pcl_group_call call = {.a = *a, .planned = 0};
  return remember(t, pcl_group_queue_push(&t->q, &call));
}

ncclResult_t pcl_group_defer_setup(const struct pcl_setup_job *job) {
  struct group_tls *t = get_tls();
  struct pcl_setup_job *j = NULL;
  if (t == NULL)
    return ncclSystemError;
  if (t->njobs == t->capjobs) {
    int cap = t->capjobs ? 2 * t->capjobs : 8;
    struct pcl_setup_job **jobs =
        pcl_realloc(t->jobs, (size_t)t->capjobs, (size_t)cap, sizeof(*jobs), "deferred setups");
    if (jobs == NULL)
      return remember(t, ncclSystemError);
    t->jobs = jobs;
    t->capjobs = cap;
  }
  if (PCL_CALLOC(j, 1, "deferred setup") == NULL)
    return remember(t, ncclSystemError);
  *j = *job;
  j->exclude = NULL;
  if (job->nexclude > 0 && job->exclude != NULL) {
    if (PCL_CALLOC(j->exclude, (size_t)job->nexclude, "deferred shrink list") == NULL) {
      pcl_free(j);
      return remember(t, ncclSystemError);
    }
    for (int i = 0; i < job->nexclude; i++)
      j->exclude[i] = job->exclude[i];
  }
  t->jobs[t->njobs++] = j;
  return ncclSuccess;
}

/* A real library that is not deep-bound may call its own ncclGroupStart/End: those are its
 * internal groups, forwarded without touching the caller-visible depth. */
PCL_API ncclResult_t ncclGroupStart(void) {
  PCL_NEED_REAL(ncclGroupStart);
  if (pcl_fallback_called_by_real(PCL_CALLER))
    return F->ncclGroupStart();
  ncclResult_t res = pcl_errors_real_result(F->ncclGroupStart());
  if (res == ncclSuccess)
    depth++;
  return res;
}
PCL_ALIAS(ncclGroupStart)

/* Launches the planned calls of one step (after = 0 or 1); keeps the first error. */
static ncclResult_t launch_step(struct pcl_group_queue *q, int after) {
  ncclResult_t first = ncclSuccess;
  for (int i = 0; i < q->n; i++) {
    const struct pcl_group_call *c = &q->calls[i];
    if (!c->planned || c->after != after)
      continue;
    ncclResult_t r = pcl_dispatch_launch(&c->a, &c->d);
    if (r != ncclSuccess && first == ncclSuccess)
      first = r;
  }
  return first;
}

/* The real ncclGroupEnd decrements its depth before doing anything that can fail, so ours
 * follows it whatever it returns. */
static ncclResult_t group_end(const char *fn, int simulate, ncclSimInfo_t *sim,
                              const void *caller) {
  if (pcl_fallback_called_by_real(caller)) {
    const struct pcl_nccl_fns *F = pcl_fallback_fns();
    return simulate ? F->ncclGroupSimulateEnd(sim) : F->ncclGroupEnd();
  }
  if (depth == 0) {
    PCL_WARN(PCL_LOG_SHIM, "ncclGroupEnd: not in a group call.");
    return ncclInvalidUsage;
  }
  const struct pcl_nccl_fns *F = pcl_fallback_fns();
  if (F == NULL)
    return pcl_fallback_none(fn);
  if ((simulate ? (void *)F->ncclGroupSimulateEnd : (void *)F->ncclGroupEnd) == NULL)
    return pcl_fallback_missing(fn);
  struct group_tls *t = depth == 1 ? tls : NULL;
  ncclResult_t mine = ncclSuccess;
  if (t != NULL && !simulate && pcl_group_queue_order(&t->q) > 0)
    mine = launch_step(&t->q, 0);
  depth--;
  ncclResult_t res =
      pcl_errors_real_result(simulate ? F->ncclGroupSimulateEnd(sim) : F->ncclGroupEnd());
  if (t == NULL)
    return res;
  if (!simulate) {
    ncclResult_t r = launch_step(&t->q, 1);
    if (mine == ncclSuccess)
      mine = r;
  }
  pcl_group_queue_reset(&t->q);
  if (t->njobs > 0) {
    /* The real comms exist now (the real group end created them); planccl's part follows. */
    int n = t->njobs;
    t->njobs = 0;
    pcl_setup_run_all(t->jobs, n);
  }
  ncclResult_t err = t->err;
  t->err = ncclSuccess;
  if (err != ncclSuccess)
    return err;
  if (mine != ncclSuccess)
    return mine;
  return res;
}

PCL_API ncclResult_t ncclGroupEnd(void) {
  return group_end("ncclGroupEnd", 0, NULL, PCL_CALLER);
}
PCL_ALIAS(ncclGroupEnd)

PCL_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo) {
  return group_end("ncclGroupSimulateEnd", 1, simInfo, PCL_CALLER);
}
PCL_ALIAS(ncclGroupSimulateEnd)
