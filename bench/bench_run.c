/* SPDX-License-Identifier: MIT
 * The CUDA side of planccl-bench (bench_run.h): communicators, buffers (symmetric windows when
 * asked) and the three process models around bench_measure.c's measurements. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench_run_int.h"

static int comms_init(drv_t *d) {
  const bench_opts_t *o = d->o;
  if (o->model == BENCH_MODEL_SINGLE) {
    ncclComm_t comms[BENCH_MAX_GPUS];
    int devs[BENCH_MAX_GPUS];
    EACH(i) devs[i] = d->rk[i].dev;
    if (NC(d->lib->init_all(comms, d->nlocal, devs)) != 0)
      return -1;
    EACH(i) d->rk[i].comm = comms[i];
    return 0;
  }
  rank_t *r = &d->rk[0];
  if (r->rank == 0 && NC(d->lib->get_unique_id(&d->sh->id)) != 0)
    return -1;
  if (bench_drv_barrier(d) != 0 || CU(cudaSetDevice(r->dev)) != 0)
    return -1;
  return NC(d->lib->init_rank(&r->comm, o->ngpus, d->sh->id, r->rank));
}

static void comms_destroy(drv_t *d) {
  EACH(i) {
    if (d->rk[i].comm)
      NC(d->lib->destroy(d->rk[i].comm));
    d->rk[i].comm = NULL;
  }
}

/* The largest input or output of the sweep, in bytes. */
static size_t max_bytes(const bench_opts_t *o) {
  size_t m = 64; /* never 0: a sweep too small for every collective still allocates */
  for (int ci = 0; ci < o->ncolls; ci++) {
    bench_case_t k;
    if (bench_case(o->colls[ci], o->dtype, o->op, o->ngpus, o->root, o->sizes[o->nsizes - 1], &k) !=
        0)
      continue;
    size_t e = k.in_elems > k.out_elems ? k.in_elems : k.out_elems;
    m = e * bench_dtype_size(o->dtype) > m ? e * bench_dtype_size(o->dtype) : m;
  }
  return m;
}

static int buf_alloc(drv_t *d, char **p) {
  if (d->o->libs[d->job->l].symm)
    return NC(d->lib->mem_alloc((void **)p, d->bytes));
  return CU(cudaMalloc((void **)p, d->bytes));
}

static void buf_free(drv_t *d, char *p) {
  if (p && d->o->libs[d->job->l].symm)
    NC(d->lib->mem_free(p));
  else if (p)
    CU(cudaFree(p));
}

/* Device buffers of every local rank; with :symm registered as symmetric windows, a collective
 * call (grouped when one thread drives all ranks). */
static int buffers_alloc(drv_t *d) {
  EACH(i) {
    rank_t *r = &d->rk[i];
    if (CU(cudaSetDevice(r->dev)) != 0 || buf_alloc(d, &r->send) != 0 ||
        buf_alloc(d, &r->recv) != 0)
      return -1;
  }
  if (!d->o->libs[d->job->l].symm)
    return 0;
  if (bench_drv_group_start(d) != 0)
    return -1;
  EACH(i) {
    rank_t *r = &d->rk[i];
    if (NC(d->lib->win_register(r->comm, r->send, d->bytes, &r->wsend, NCCL_WIN_COLL_SYMMETRIC)) !=
            0 ||
        NC(d->lib->win_register(r->comm, r->recv, d->bytes, &r->wrecv, NCCL_WIN_COLL_SYMMETRIC)) !=
            0) {
      bench_drv_group_end(d);
      return -1;
    }
  }
  return bench_drv_group_end(d);
}

static void buffers_free(drv_t *d) {
  int symm = d->o->libs[d->job->l].symm, grouped = symm && bench_drv_group_start(d) == 0;
  EACH(i) {
    rank_t *r = &d->rk[i];
    if (r->wsend)
      NC(d->lib->win_deregister(r->comm, r->wsend));
    if (r->wrecv)
      NC(d->lib->win_deregister(r->comm, r->wrecv));
    r->wsend = r->wrecv = NULL;
  }
  if (grouped)
    bench_drv_group_end(d);
  EACH(i) {
    cudaSetDevice(d->rk[i].dev);
    buf_free(d, d->rk[i].send);
    buf_free(d, d->rk[i].recv);
    d->rk[i].send = d->rk[i].recv = NULL;
  }
}

/* The host path's calls: sizes ks[0..nk) in turn. */
typedef struct {
  drv_t *d;
  bench_case_t *ks;
  int nk, next;
  int place;
} call_ctx_t;

static int one_call(void *arg) {
  call_ctx_t *c = arg;
  const bench_case_t *k = &c->ks[c->next];
  c->next = c->next + 1 == c->nk ? 0 : c->next + 1;
  return bench_drv_issue(c->d, k, c->place);
}

/* One communicator per placement: planccl logs a path once per (collective, size class) and
 * communicator, so the in-place calls get their own. */
static int pass(drv_t *d, int place, int hostpath) {
  const bench_opts_t *o = d->o;
  int rc = -1;
  if (comms_init(d) != 0 || buffers_alloc(d) != 0)
    goto out;
  for (int ci = 0; ci < o->ncolls; ci++)
    for (int s = 0; s < o->nsizes; s++)
      if (bench_drv_measure(d, ci, s, place) != 0)
        goto out;
  if (hostpath) {
    call_ctx_t c = {.d = d, .nk = o->hostpath_sizes, .place = place};
    c.ks = calloc((size_t)c.nk, sizeof(*c.ks));
    if (c.ks == NULL) {
      fprintf(stderr, "planccl-bench: out of host memory for %d sizes\n", c.nk);
      goto out;
    }
    for (int j = 0; j < c.nk; j++)
      if (bench_case(o->colls[0], o->dtype, o->op, o->ngpus, o->root,
                     o->sizes[0] + (size_t)j * bench_hostpath_step(o), &c.ks[j]) != 0)
        c.ks[j].count = 1 + (size_t)j;
    int bad = bench_hostpath_measure(d->rk[0].rank, d->rk[0].s, &d->sh->bar, one_call, &c, c.nk,
                                     d->job->host);
    free(c.ks);
    if (bad != 0)
      goto out;
  }
  rc = 0;
out:
  if (rc != 0)
    bench_barrier_abort(&d->sh->bar);
  else
    rc = bench_drv_barrier(d); /* nobody frees what a peer's last call may still read */
  buffers_free(d);
  comms_destroy(d);
  return rc;
}

/* Drives ranks [first, first + n) from this thread through every placement. */
static int drive(bench_job_t *job, bench_lib_t *lib, shared_t *sh, int first, int n) {
  drv_t *d = calloc(1, sizeof(*d));
  int rc = -1;
  if (d == NULL)
    return -1;
  *d = (drv_t){.job = job, .o = job->o, .lib = lib, .sh = sh, .nlocal = n};
  d->bytes = max_bytes(d->o);
  int ndev = 1;
  if (d->o->share_gpu && (CU(cudaGetDeviceCount(&ndev)) != 0 || ndev < 1))
    goto out;
  d->img = malloc(d->bytes);
  d->back = malloc(d->bytes);
  if (d->img == NULL || d->back == NULL) {
    fprintf(stderr, "planccl-bench: out of host memory for %zu-byte buffers\n", d->bytes);
    bench_barrier_abort(&sh->bar);
    goto out;
  }
  EACH(i) {
    rank_t *r = &d->rk[i];
    r->rank = first + i;
    r->dev = d->o->share_gpu ? r->rank % ndev : r->rank;
    if (CU(cudaSetDevice(r->dev)) != 0 ||
        CU(cudaStreamCreateWithFlags(&r->s, cudaStreamNonBlocking)) != 0 ||
        CU(cudaEventCreate(&r->e0)) != 0 || CU(cudaEventCreate(&r->e1)) != 0)
      goto out;
  }
  int hostpath = d->o->hostpath;
  for (int p = 0; p < BENCH_PLACES; p++) {
    if (!(d->o->places & (1 << p)))
      continue;
    if (pass(d, p, hostpath) != 0)
      goto out;
    hostpath = 0;
  }
  rc = 0;
out:
  EACH(i) {
    rank_t *r = &d->rk[i];
    if (r->e0)
      cudaEventDestroy(r->e0);
    if (r->e1)
      cudaEventDestroy(r->e1);
    if (r->s)
      cudaStreamDestroy(r->s);
  }
  free(d->img);
  free(d->back);
  free(d);
  return rc;
}

typedef struct {
  bench_job_t *job;
  shared_t *sh;
  int rank, rc;
} thread_arg_t;

static void *thread_main(void *arg) {
  thread_arg_t *t = arg;
  t->rc = drive(t->job, t->job->lib, t->sh, t->rank, 1);
  return NULL;
}

static int proc_main(int rank, void *arg) {
  thread_arg_t *t = arg;
  bench_lib_t lib;
  char err[512];
  const bench_lib_spec_t *spec = &t->job->o->libs[t->job->l];
  if (t->job->env_log)
    bench_path_log_env(t->job->env_log);
  if (bench_lib_open(&lib, spec->path, spec->symm, err, sizeof(err)) != 0) {
    if (rank == 0)
      fprintf(stderr, "planccl-bench: %s: %s\n", spec->label, err);
    bench_barrier_abort(&t->sh->bar);
    return 3;
  }
  /* No dlclose: NCCL's threads may outlive its communicators. */
  return drive(t->job, &lib, t->sh, rank, 1) == 0 ? 0 : 1;
}

int bench_run_lib(bench_job_t *job) {
  const bench_opts_t *o = job->o;
  int n = o->ngpus, rc = -1, model = o->model;
  shared_t *sh = bench_shm_alloc(sizeof(shared_t));
  if (sh == NULL)
    return -1;
  int parties = model == BENCH_MODEL_SINGLE ? 1 : n;
  if (bench_barrier_init(&sh->bar, parties, model == BENCH_MODEL_PROC) != 0)
    goto out_shm;
  for (int r = 0; r < n; r++)
    bench_result_clear(&job->ranks[r]);
  if (model == BENCH_MODEL_SINGLE && job->lib->init_all == NULL) {
    fprintf(stderr, "planccl-bench: %s lacks ncclCommInitAll (--model single)\n",
            o->libs[job->l].label);
  } else if (model == BENCH_MODEL_SINGLE) {
    rc = drive(job, job->lib, sh, 0, n);
  } else if (model == BENCH_MODEL_PROC) {
    thread_arg_t t = {.job = job, .sh = sh};
    rc = bench_spawn(n, proc_main, &t, o->libs[job->l].label, o->timeout_s, 10, &sh->bar);
  } else {
    pthread_t th[BENCH_MAX_GPUS];
    thread_arg_t t[BENCH_MAX_GPUS];
    int started = 0;
    rc = 0;
    for (; started < n; started++) {
      t[started] = (thread_arg_t){.job = job, .sh = sh, .rank = started};
      if (pthread_create(&th[started], NULL, thread_main, &t[started]) != 0) {
        bench_barrier_abort(&sh->bar);
        rc = -1;
        break;
      }
    }
    for (int r = 0; r < started; r++) {
      pthread_join(th[r], NULL);
      rc |= t[r].rc;
    }
  }
  bench_barrier_destroy(&sh->bar);
out_shm:
  bench_shm_free(sh, sizeof(shared_t));
  return rc == 0 ? 0 : -1;
}

int bench_gpu_count(int keep_parent_clean) {
  int n = -1;
  if (!keep_parent_clean)
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : -1;
  fflush(stdout);
  fflush(stderr);
  pid_t p = fork();
  if (p == 0)
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n >= 0 && n < 255 ? n : 255);
  int status;
  if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) == 255)
    return -1;
  return WEXITSTATUS(status);
}

void bench_path_log_env(const char *log) {
  setenv("PLANCCL_DEBUG", "INFO", 1);
  setenv("PLANCCL_DEBUG_SUBSYS", "COLL", 1);
  setenv("PLANCCL_DEBUG_FILE", log, 1);
}
