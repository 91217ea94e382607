/* SPDX-License-Identifier: MIT
 * planccl's windows of a communicator: buffers registered with NCCL_WIN_COLL_SYMMETRIC are also
 * exchanged with planccl's peers, and a call whose buffers lie inside such windows runs what
 * registered buffers select (a zero-copy plan, a tuned entry) through a view of them (NCCL's
 * symmetric contract: every rank passes its buffers at the same offsets of its windows). */
#include <string.h>
#include "alloc.h"
#include "comm_int.h"
#include "exec.h"
#include "log.h"
#include "pcl_check.h"

/* Bounded: views are never evicted (a CUDA graph may hold the program of any of them), and the
 * table fills alike on every rank, since ranks pass matching buffers in the same order. */
#define PCL_WINS_MAX 64
#define PCL_VIEWS_MAX 256

struct pcl_win {
  ncclWindow_t real; /* the real NCCL's handle: what the caller holds */
  pcl_exec_window_t *w;
};

struct pcl_view {
  const void *in;
  const void *out;
  uint64_t in_bytes, out_bytes;
  pcl_exec_userbuf_t *ub; /* NULL: the buffers do not match the peers' windows (WARNed once) */
  int win[2];             /* indexes into wins */
};

struct pcl_comm_wins {
  struct pcl_win win[PCL_WINS_MAX];
  int nwin;
  struct pcl_view view[PCL_VIEWS_MAX];
  int nview;
};

ncclResult_t pcl_comm_win_register(struct pcl_comm_pcl *p, void *buff, size_t size,
                                   ncclWindow_t real) {
  if (p->wins == NULL) {
    PCL_CALLOC(p->wins, 1, "comm windows");
    if (p->wins == NULL)
      return ncclSystemError;
  }
  struct pcl_comm_wins *t = p->wins;
  /* Alike on every rank (each registers as many windows): the exchange below still runs, so a
   * rank whose table is full does not leave its peers waiting; its window is just not used. */
  pcl_exec_window_t *w = NULL;
  ncclResult_t res = pcl_exec_window_create(p->exec, t->nwin < PCL_WINS_MAX ? buff : NULL,
                                            t->nwin < PCL_WINS_MAX ? size : 0, &w);
  if (res != ncclSuccess) {
    PCL_WARN(PCL_LOG_SHIM,
             "rank %d: window %p +%zu is registered with NCCL but not with planccl (%s): calls "
             "on it run the scratch-staged plans or NCCL",
             p->rank, buff, size, ncclGetErrorString(res));
    return ncclSuccess; /* the real registration stands; every rank failed alike */
  }
  if (t->nwin >= PCL_WINS_MAX) {
    PCL_INFO(PCL_LOG_SHIM, "rank %d: more than %d windows: %p not used by planccl", p->rank,
             PCL_WINS_MAX, buff);
    pcl_exec_window_destroy(w);
    return ncclSuccess;
  }
  t->win[t->nwin].real = real;
  t->win[t->nwin].w = w;
  t->nwin++;
  return ncclSuccess;
}

/* Drops the views over window i, then the window; the table stays compact. */
void pcl_comm_win_deregister(struct pcl_comm_pcl *p, ncclWindow_t real) {
  struct pcl_comm_wins *t = p->wins;
  int i = 0;
  while (t != NULL && i < t->nwin && t->win[i].real != real)
    i++;
  if (t == NULL || i == t->nwin)
    return; /* never registered with planccl */
  for (int v = 0; v < t->nview; v++) {
    struct pcl_view *x = &t->view[v];
    if (x->win[0] != i && x->win[1] != i)
      continue;
    pcl_exec_userbuf_destroy(x->ub);
    t->view[v--] = t->view[--t->nview];
  }
  pcl_exec_window_destroy(t->win[i].w);
  for (int j = i; j + 1 < t->nwin; j++)
    t->win[j] = t->win[j + 1];
  t->nwin--;
  for (int v = 0; v < t->nview; v++)
    for (int k = 0; k < 2; k++)
      t->view[v].win[k] -= t->view[v].win[k] > i;
}

void pcl_comm_wins_destroy(struct pcl_comm_pcl *p) {
  struct pcl_comm_wins *t = p->wins;
  if (t == NULL)
    return;
  for (int v = 0; v < t->nview; v++)
    pcl_exec_userbuf_destroy(t->view[v].ub);
  for (int i = 0; i < t->nwin; i++)
    pcl_exec_window_destroy(t->win[i].w);
  pcl_free(t);
  p->wins = NULL;
}

static int find_win(const struct pcl_comm_wins *t, const void *ptr, uint64_t bytes) {
  for (int i = 0; i < t->nwin; i++)
    if (pcl_exec_window_holds(t->win[i].w, ptr, bytes))
      return i;
  return -1;
}

pcl_exec_userbuf_t *pcl_comm_win_view(struct pcl_comm_pcl *p, const struct pcl_coll_args *a,
                                      uint64_t in_bytes, uint64_t out_bytes, uint64_t in_step,
                                      uint64_t out_step) {
  struct pcl_comm_wins *t = p->wins;
  if (t == NULL || t->nwin == 0)
    return NULL;
  for (int v = 0; v < t->nview; v++) {
    const struct pcl_view *x = &t->view[v];
    if (x->in == a->sendbuff && x->out == a->recvbuff && x->in_bytes == in_bytes &&
        x->out_bytes == out_bytes)
      return x->ub;
  }
  int wi = find_win(t, a->sendbuff, in_bytes), wo = find_win(t, a->recvbuff, out_bytes);
  if (wi < 0 || wo < 0 || t->nview == PCL_VIEWS_MAX)
    return NULL;
  pcl_exec_userbuf_t *ub = NULL;
  /* A failure is WARNed (the ranks broke the symmetric contract) and remembered, not retried. */
  (void)pcl_exec_userbuf_view(p->exec, t->win[wi].w, a->sendbuff, in_bytes, in_step, t->win[wo].w,
                              a->recvbuff, out_bytes, out_step, &ub);
  struct pcl_view *x = &t->view[t->nview++];
  x->in = a->sendbuff;
  x->out = a->recvbuff;
  x->in_bytes = in_bytes;
  x->out_bytes = out_bytes;
  x->ub = ub;
  x->win[0] = wi;
  x->win[1] = wo;
  return ub;
}
