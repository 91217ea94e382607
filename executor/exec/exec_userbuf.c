/* SPDX-License-Identifier: MIT
 * User buffers that peers reach: exact registrations of one call's (input, output), exchanged
 * collectively; windows, exchanged collectively once; and views of a call's buffers inside
 * windows, made locally with no exchange (NCCL's symmetric-window contract). */
#include <string.h>
#include "alloc.h"
#include "exec_int.h"
#include "log.h"
#include "pcl_check.h"
#include "portchan.h"

ncclResult_t pcl_exec_userbuf_create(pcl_exec_ctx_t *c, void *in, size_t in_bytes, void *out,
                                     size_t out_bytes, pcl_exec_userbuf_t **ub) {
  ncclResult_t res;
  pcl_exec_userbuf_t *u = NULL;
  const pcl_exec_config_t *cfg = pcl_exec_ctx_cfg(c);
  if (cfg->memchan == NULL) {
    PCL_WARN(PCL_LOG_EXEC, "registering user buffers needs memory channels");
    return ncclInvalidUsage;
  }
  PCL_CALLOC(u, 1, "exec userbuf");
  if (u == NULL)
    return ncclSystemError;
  u->ctx = c;
  u->port_id[0] = u->port_id[1] = PCL_KABI_NO_MEM;
  /* Two exchanges on every rank, out == in or not (exec.h): one rank skipping the second would
   * pair its next collective with the peers' second and read their descriptors as its own. */
  PCL_CHECK_GOTO(pcl_memchan_buf_reg(cfg->memchan, in, in_bytes, &u->buf[0]), res, err);
  PCL_CHECK_GOTO(pcl_memchan_buf_reg(cfg->memchan, out, out_bytes, &u->buf[1]), res, err);
  if (cfg->portchan != NULL) {
    PCL_CHECK_GOTO(pcl_portchan_buf_reg(cfg->portchan, in, in_bytes, u->buf[0], &u->port_id[0]),
                   res, err);
    PCL_CHECK_GOTO(pcl_portchan_buf_reg(cfg->portchan, out, out_bytes, u->buf[1], &u->port_id[1]),
                   res, err);
  }
  *ub = u;
  return ncclSuccess;
err:
  pcl_exec_userbuf_destroy(u);
  return res;
}

void pcl_exec_userbuf_destroy(pcl_exec_userbuf_t *u) {
  if (u == NULL)
    return;
  /* Programs bound to these buffers go too: a later registration may reuse the address of u. */
  pcl_exec_drop_userbuf(u->ctx, u);
  if (u->win[0] != NULL) { /* a view: the windows own the buffers */
    u->win[0]->views--;
    u->win[1]->views--;
    pcl_free(u->off[0]);
    pcl_free(u);
    return;
  }
  const pcl_exec_config_t *cfg = pcl_exec_ctx_cfg(u->ctx);
  if (cfg->portchan != NULL) { /* an id never registered (PCL_KABI_NO_MEM) is ignored */
    pcl_portchan_buf_release(cfg->portchan, u->port_id[1]);
    pcl_portchan_buf_release(cfg->portchan, u->port_id[0]);
  }
  pcl_memchan_buf_release(u->buf[1]);
  pcl_memchan_buf_release(u->buf[0]);
  pcl_free(u);
}

int pcl_exec_userbuf_is_view(const pcl_exec_userbuf_t *ub) {
  return ub != NULL && ub->win[0] != NULL;
}

uint64_t pcl_exec_userbuf_peer(const pcl_exec_userbuf_t *ub, int peer, int type) {
  uint64_t bytes;
  if (ub == NULL)
    return 0;
  const int k = type == PCL_PLAN_BUF_OUTPUT && ub->buf[1] ? 1 : 0;
  uint64_t base = pcl_memchan_buf_remote(ub->buf[k], peer, &bytes);
  if (base == 0 || ub->win[0] == NULL)
    return base;
  return base + ub->off[k][peer];
}

uint32_t pcl_exec_userbuf_port_id(const pcl_exec_userbuf_t *ub, int type) {
  if (ub == NULL)
    return PCL_KABI_NO_MEM;
  return ub->port_id[type == PCL_PLAN_BUF_OUTPUT ? 1 : 0];
}

/* ---- windows and views ---- */

ncclResult_t pcl_exec_window_create(pcl_exec_ctx_t *c, void *ptr, size_t bytes,
                                    pcl_exec_window_t **out) {
  ncclResult_t res;
  pcl_exec_window_t *w = NULL;
  const pcl_exec_config_t *cfg = pcl_exec_ctx_cfg(c);
  *out = NULL;
  if (cfg->memchan == NULL) {
    PCL_WARN(PCL_LOG_EXEC, "a window needs memory channels");
    return ncclInvalidUsage;
  }
  PCL_CALLOC(w, 1, "exec window");
  if (w == NULL)
    return ncclSystemError;
  w->ctx = c;
  w->base = (uintptr_t)ptr;
  w->bytes = ptr != NULL ? bytes : 0;
  /* Every rank exchanges, whatever it passes: a rank whose registration fails still takes part
   * and the exchange fails on every rank alike (memchan.c). */
  PCL_CHECK_GOTO(pcl_memchan_buf_reg(cfg->memchan, ptr, w->bytes, &w->buf), res, err);
  PCL_INFO(PCL_LOG_EXEC, "rank %d: window %p +%zu registered with %d peers", cfg->rank, ptr,
           w->bytes, cfg->nranks - 1);
  *out = w;
  return ncclSuccess;
err:
  pcl_free(w);
  return res;
}

void pcl_exec_window_destroy(pcl_exec_window_t *w) {
  if (w == NULL)
    return;
  if (w->views != 0) /* the caller's bug: its views would read unmapped memory */
    PCL_WARN(PCL_LOG_EXEC, "window %p destroyed with %d views still open", (void *)w->base,
             w->views);
  pcl_memchan_buf_release(w->buf);
  pcl_free(w);
}

int pcl_exec_window_holds(const pcl_exec_window_t *w, const void *ptr, uint64_t bytes) {
  const uintptr_t p = (uintptr_t)ptr;
  return w != NULL && p >= w->base && bytes <= w->bytes && p - w->base <= w->bytes - bytes;
}

/* Checks that every rank's [off[r], + bytes) lies in its window (a peer's as mapped here). */
static int view_fits(const pcl_exec_window_t *w, const uint64_t *off, uint64_t bytes, int nranks,
                     int me) {
  for (int p = 0; p < nranks; p++) {
    uint64_t have = w->bytes;
    if (p != me && pcl_memchan_buf_remote(w->buf, p, &have) == 0)
      continue; /* not mapped here (another host): bind refuses a plan that needs it */
    if (off[p] > have || bytes > have - off[p])
      return 0;
  }
  return 1;
}

ncclResult_t pcl_exec_userbuf_view_at(pcl_exec_ctx_t *c, pcl_exec_window_t *win_in,
                                      const uint64_t *in_off, uint64_t in_bytes,
                                      pcl_exec_window_t *win_out, const uint64_t *out_off,
                                      uint64_t out_bytes, pcl_exec_userbuf_t **ub) {
  const pcl_exec_config_t *cfg = pcl_exec_ctx_cfg(c);
  pcl_exec_window_t *w[2] = {win_in, win_out};
  const uint64_t *off[2] = {in_off, out_off};
  const uint64_t bytes[2] = {in_bytes, out_bytes};
  const size_t n = (size_t)cfg->nranks;
  pcl_exec_userbuf_t *u = NULL;
  *ub = NULL;
  for (int k = 0; k < 2; k++) {
    if (w[k] == NULL || w[k]->ctx != c ||
        !view_fits(w[k], off[k], bytes[k], cfg->nranks, cfg->rank)) {
      PCL_WARN(PCL_LOG_EXEC,
               "rank %d: the %s's copies (+%llu, at window offset %llu here) do not all lie "
               "inside their ranks' windows (with symmetric windows: the ranks do not pass "
               "their buffers at the same offsets of windows of one size)",
               cfg->rank, k ? "output" : "input", (unsigned long long)bytes[k],
               (unsigned long long)off[k][cfg->rank]);
      return ncclInvalidArgument;
    }
  }
  if (PCL_CALLOC(u, 1, "exec window view") == NULL ||
      PCL_CALLOC(u->off[0], 2 * n, "exec window view offsets") == NULL) {
    pcl_free(u);
    return ncclSystemError;
  }
  u->ctx = c;
  u->off[1] = u->off[0] + n;
  for (int k = 0; k < 2; k++) {
    memcpy(u->off[k], off[k], n * sizeof(uint64_t));
    u->buf[k] = w[k]->buf;
    u->port_id[k] = PCL_KABI_NO_MEM;
    u->win[k] = w[k];
    w[k]->views++;
  }
  *ub = u;
  return ncclSuccess;
}

ncclResult_t pcl_exec_userbuf_view(pcl_exec_ctx_t *c, pcl_exec_window_t *win_in, const void *in,
                                   uint64_t in_bytes, uint64_t in_step, pcl_exec_window_t *win_out,
                                   const void *out, uint64_t out_bytes, uint64_t out_step,
                                   pcl_exec_userbuf_t **ub) {
  const pcl_exec_config_t *cfg = pcl_exec_ctx_cfg(c);
  pcl_exec_window_t *w[2] = {win_in, win_out};
  const void *ptr[2] = {in, out};
  const uint64_t bytes[2] = {in_bytes, out_bytes}, step[2] = {in_step, out_step};
  uint64_t *off = NULL;
  ncclResult_t res;
  *ub = NULL;
  if (PCL_CALLOC(off, 2 * (size_t)cfg->nranks, "exec window view offsets") == NULL)
    return ncclSystemError;
  for (int k = 0; k < 2; k++) {
    const uint64_t mine = (uint64_t)cfg->rank * step[k];
    if (w[k] == NULL || w[k]->ctx != c || !pcl_exec_window_holds(w[k], ptr[k], bytes[k]) ||
        (uintptr_t)ptr[k] - w[k]->base < mine) {
      PCL_WARN(PCL_LOG_EXEC, "rank %d: %s %p +%llu (rank step %llu) is not inside its window",
               cfg->rank, k ? "output" : "input", ptr[k], (unsigned long long)bytes[k],
               (unsigned long long)step[k]);
      pcl_free(off);
      return ncclInvalidArgument;
    }
    /* The symmetric contract: every rank's buffer at the same offset, moved by its rank. */
    for (int r = 0; r < cfg->nranks; r++)
      off[k * cfg->nranks + r] = (uintptr_t)ptr[k] - w[k]->base - mine + (uint64_t)r * step[k];
  }
  res =
      pcl_exec_userbuf_view_at(c, win_in, off, in_bytes, win_out, off + cfg->nranks, out_bytes, ub);
  pcl_free(off);
  return res;
}
