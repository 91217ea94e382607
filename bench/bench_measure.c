/* SPDX-License-Identifier: MIT
 * One size of planccl-bench on the ranks one thread drives: inputs loaded, one call checked,
 * warm-up, timed eager calls, then a checked one-call graph and a timed graph (CUDA events). */
#include <string.h>
#include "bench_run_int.h"

_Static_assert((int)BENCH_FP8E5M2 == (int)ncclFloat8e5m2 && (int)BENCH_BFLOAT16 == ncclBfloat16 &&
                   (int)BENCH_HALF == (int)ncclHalf && (int)BENCH_UINT64 == (int)ncclUint64,
               "bench_dtype_t follows ncclDataType_t");
_Static_assert((int)BENCH_AVG == (int)ncclAvg && (int)BENCH_MIN == (int)ncclMin,
               "bench_op_t follows ncclRedOp_t");

int bench_cu_check(drv_t *d, cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return 0;
  fprintf(stderr, "planccl-bench: %s: rank %d: %s failed: %s\n", d->o->libs[d->job->l].label,
          d->rk[0].rank, what, cudaGetErrorString(e));
  bench_barrier_abort(&d->sh->bar);
  return -1;
}

int bench_nc_check(drv_t *d, ncclResult_t r, const char *what) {
  if (r == ncclSuccess)
    return 0;
  fprintf(stderr, "planccl-bench: %s: rank %d: %s failed: %s\n", d->o->libs[d->job->l].label,
          d->rk[0].rank, what, d->lib->error_string(r));
  bench_barrier_abort(&d->sh->bar);
  return -1;
}

int bench_drv_barrier(drv_t *d) {
  return bench_barrier_wait(&d->sh->bar);
}

int bench_drv_group_start(drv_t *d) {
  return d->nlocal > 1 ? NC(d->lib->group_start()) : 0;
}
int bench_drv_group_end(drv_t *d) {
  return d->nlocal > 1 ? NC(d->lib->group_end()) : 0;
}

static void ptrs(const bench_case_t *k, rank_t *r, int place, const void **in, void **out) {
  size_t es = bench_dtype_size(k->dtype), ioff = 0, ooff = 0;
  if (place == BENCH_OUT) {
    *in = r->send;
    *out = r->recv;
    return;
  }
  bench_inplace_offsets(k, r->rank, &ioff, &ooff);
  *in = r->recv + ioff * es;
  *out = r->recv + ooff * es;
}

static ncclResult_t issue_one(drv_t *d, rank_t *r, const bench_case_t *k, int place) {
  const bench_lib_t *L = d->lib;
  const void *in;
  void *out;
  ptrs(k, r, place, &in, &out);
  ncclDataType_t t = (ncclDataType_t)k->dtype;
  ncclRedOp_t op = (ncclRedOp_t)k->op;
  int n = k->nranks;
  ncclResult_t rc, rc2;
  switch (k->coll) {
  case BENCH_ALLREDUCE:
    return L->all_reduce(in, out, k->count, t, op, r->comm, r->s);
  case BENCH_ALLGATHER:
    return L->all_gather(in, out, k->count, t, r->comm, r->s);
  case BENCH_REDUCESCATTER:
    return L->reduce_scatter(in, out, k->count, t, op, r->comm, r->s);
  case BENCH_BROADCAST:
    return L->broadcast(in, out, k->count, t, k->root, r->comm, r->s);
  case BENCH_REDUCE:
    return L->reduce(in, out, k->count, t, op, k->root, r->comm, r->s);
  case BENCH_ALLTOALL:
    return L->alltoall(in, out, k->count, t, r->comm, r->s);
  default: /* send/recv: a ring, each rank sends to the next and receives from the previous */
    if ((rc = L->group_start()) != ncclSuccess)
      return rc;
    rc = L->send(in, k->count, t, (r->rank + 1) % n, r->comm, r->s);
    rc2 = rc == ncclSuccess ? L->recv(out, k->count, t, (r->rank + n - 1) % n, r->comm, r->s) : rc;
    rc = L->group_end();
    return rc2 != ncclSuccess ? rc2 : rc;
  }
}

int bench_drv_issue(drv_t *d, const bench_case_t *k, int place) {
  if (bench_drv_group_start(d) != 0)
    return -1;
  EACH(i) {
    if (NC(issue_one(d, &d->rk[i], k, place)) != 0) {
      bench_drv_group_end(d);
      return -1;
    }
  }
  return bench_drv_group_end(d);
}

static int sync_all(drv_t *d) {
  EACH(i) {
    if (CU(cudaStreamSynchronize(d->rk[i].s)) != 0)
      return -1;
  }
  return 0;
}

/* Inputs in place, everything else 0xff (NaN in every floating type, far from any pattern). The
 * copies go on the rank's stream: a non-blocking stream does not wait for the legacy one. */
static int load_inputs(drv_t *d, const bench_case_t *k, int place) {
  size_t es = bench_dtype_size(k->dtype), ioff = 0, ooff = 0;
  EACH(i) {
    rank_t *r = &d->rk[i];
    if (CU(cudaSetDevice(r->dev)) != 0)
      return -1;
    if (place == BENCH_OUT) {
      bench_fill_input(k, r->rank, d->img);
      if (CU(cudaMemcpyAsync(r->send, d->img, k->in_elems * es, cudaMemcpyHostToDevice, r->s)) !=
              0 ||
          CU(cudaMemsetAsync(r->recv, 0xff, k->out_elems * es, r->s)) != 0)
        return -1;
    } else {
      bench_inplace_offsets(k, r->rank, &ioff, &ooff);
      size_t span = (k->in_elems > k->out_elems ? k->in_elems : k->out_elems) * es;
      memset(d->img, 0xff, span);
      bench_fill_input(k, r->rank, d->img + ioff * es);
      if (CU(cudaMemcpyAsync(r->recv, d->img, span, cudaMemcpyHostToDevice, r->s)) != 0)
        return -1;
    }
    /* img is refilled for the next rank */
    if (CU(cudaStreamSynchronize(r->s)) != 0)
      return -1;
  }
  return 0;
}

static int check(drv_t *d, const bench_case_t *k, int place, int c, int s, int mode) {
  size_t es = bench_dtype_size(k->dtype);
  EACH(i) {
    rank_t *r = &d->rk[i];
    const void *in;
    void *out;
    ptrs(k, r, place, &in, &out);
    if (CU(cudaSetDevice(r->dev)) != 0 ||
        CU(cudaMemcpyAsync(d->back, out, k->out_elems * es, cudaMemcpyDeviceToHost, r->s)) != 0 ||
        CU(cudaStreamSynchronize(r->s)) != 0)
      return -1;
    d->job->ranks[r->rank].wrong[c][s][place][mode] +=
        (long long)bench_count_wrong(k, r->rank, d->back);
  }
  return 0;
}

/* Time per call of `reps` x `calls`: events around the loop on every rank, each rank's own. */
static int elapsed(drv_t *d, double per, int c, int s, int place, int mode) {
  EACH(i) {
    float ms = 0;
    if (CU(cudaEventSynchronize(d->rk[i].e1)) != 0 ||
        CU(cudaEventElapsedTime(&ms, d->rk[i].e0, d->rk[i].e1)) != 0)
      return -1;
    d->job->ranks[d->rk[i].rank].us[c][s][place][mode] = (double)ms * 1e3 / per;
  }
  return 0;
}

static int record(drv_t *d, int end) {
  EACH(i) {
    if (CU(cudaEventRecord(end ? d->rk[i].e1 : d->rk[i].e0, d->rk[i].s)) != 0)
      return -1;
  }
  return 0;
}

/* A graph of `calls` calls on each local rank; launched once and checked (timed < 0), or warmed
 * up and timed over `launches` launches. */
static int graph(drv_t *d, const bench_case_t *k, int place, int calls, int launches, int c,
                 int s) {
  cudaGraph_t g[BENCH_MAX_GPUS] = {0};
  cudaGraphExec_t ge[BENCH_MAX_GPUS] = {0};
  int rc = -1, began = 0, ended = 0; /* ranks [ended, began) are capturing */
  for (; began < d->nlocal; began++)
    if (CU(cudaStreamBeginCapture(d->rk[began].s, cudaStreamCaptureModeThreadLocal)) != 0)
      goto out;
  for (int j = 0; j < calls; j++)
    if (bench_drv_issue(d, k, place) != 0)
      goto out;
  for (; ended < began; ended++)
    if (CU(cudaStreamEndCapture(d->rk[ended].s, &g[ended])) != 0 ||
        CU(cudaGraphInstantiate(&ge[ended], g[ended], 0)) != 0)
      goto out;
  EACH(i) {
    if (CU(cudaGraphLaunch(ge[i], d->rk[i].s)) != 0)
      goto out;
  }
  if (sync_all(d) != 0)
    goto out;
  if (launches > 0) {
    if (bench_drv_barrier(d) != 0 || record(d, 0) != 0)
      goto out;
    for (int j = 0; j < launches; j++)
      EACH(i) {
        if (CU(cudaGraphLaunch(ge[i], d->rk[i].s)) != 0)
          goto out;
      }
    if (record(d, 1) != 0 || elapsed(d, (double)calls * launches, c, s, place, BENCH_GRAPH) != 0)
      goto out;
  }
  rc = 0;
out:
  for (; ended < began; ended++) { /* a failed capture still has to end */
    cudaGraph_t junk = NULL;
    cudaStreamEndCapture(d->rk[ended].s, &junk);
    if (junk)
      cudaGraphDestroy(junk);
  }
  EACH(i) {
    if (ge[i])
      cudaGraphExecDestroy(ge[i]);
    if (g[i])
      cudaGraphDestroy(g[i]);
  }
  return rc;
}

static void progress(drv_t *d, const bench_case_t *k, int measured) {
  bench_job_t *j = d->job;
  if (d->rk[0].rank != 0)
    return;
  int done = __atomic_add_fetch(j->done, 1, __ATOMIC_RELAXED);
  if (measured)
    bench_progress(stderr, done, j->total, bench_now_us() - j->start_us, d->o->libs[j->l].label,
                   k->coll, k->bytes);
}

int bench_drv_measure(drv_t *d, int ci, int s, int place) {
  const bench_opts_t *o = d->o;
  int c = o->colls[ci];
  bench_case_t k;
  if (bench_case(c, o->dtype, o->op, o->ngpus, o->root, o->sizes[s], &k) != 0 ||
      (place == BENCH_IN && !bench_coll_has_inplace(c)) ||
      (c == BENCH_ALLTOALL && d->lib->alltoall == NULL)) {
    progress(d, &k, 0);
    return 0;
  }
  if (load_inputs(d, &k, place) != 0 || bench_drv_barrier(d) != 0 ||
      bench_drv_issue(d, &k, place) != 0 || sync_all(d) != 0 ||
      check(d, &k, place, c, s, BENCH_EAGER) != 0)
    return -1;
  for (int i = 0; i < o->warmup; i++)
    if (bench_drv_issue(d, &k, place) != 0)
      return -1;
  if (sync_all(d) != 0 || bench_drv_barrier(d) != 0 || record(d, 0) != 0)
    return -1;
  for (int i = 0; i < o->iters; i++)
    if (bench_drv_issue(d, &k, place) != 0)
      return -1;
  if (record(d, 1) != 0 || elapsed(d, o->iters, c, s, place, BENCH_EAGER) != 0)
    return -1;
  if (o->graph_iters > 0) {
    /* Checked on a graph of one call: repeated in-place calls would change the result. */
    if (load_inputs(d, &k, place) != 0 || bench_drv_barrier(d) != 0 ||
        graph(d, &k, place, 1, 0, c, s) != 0 || check(d, &k, place, c, s, BENCH_GRAPH) != 0 ||
        bench_drv_barrier(d) != 0 ||
        graph(d, &k, place, o->graph_iters, o->graph_launches, c, s) != 0)
      return -1;
  }
  progress(d, &k, 1);
  return 0;
}
