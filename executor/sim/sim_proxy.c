/* SPDX-License-Identifier: MIT
 * Simulated port channels: each rank has one FIFO of triggers (data / flag / sync) drained in
 * order by its proxy, which the scheduler runs as one more agent, so copies land asynchronously
 * and a peer's signal becomes visible only after the data pushed before it. */
#include <stdio.h>
#include <string.h>
#include "sim_int.h"

int sim_proxy_push(sim_t *s, sim_rank_t *r, const sim_trigger_t *t) {
  (void)s;
  sim_proxy_t *p = &r->proxy;
  if (p->head - p->tail >= SIM_FIFO_CAP)
    return 0;
  sim_trigger_t *slot = &p->ring[p->head % SIM_FIFO_CAP];
  *slot = *t;
  slot->done = 0;
  p->head++;
  return 1;
}

int sim_proxy_step(sim_t *s, sim_rank_t *r, uint64_t budget) {
  sim_proxy_t *p = &r->proxy;
  int progressed = 0;
  while (p->tail < p->head && budget > 0) {
    sim_trigger_t *t = &p->ring[p->tail % SIM_FIFO_CAP];
    if ((t->kind & SIM_TRIG_DATA) && t->done < t->bytes) {
      uint64_t n = t->bytes - t->done;
      if (n > budget)
        n = budget < 4 ? 4 : budget & ~(uint64_t)3;
      if (n > t->bytes - t->done)
        n = t->bytes - t->done;
      /* The source must still hold what the pushing call wrote (not yet overwritten by a later
       * call, and written at all): a put of stale or unwritten bytes is a plan bug. */
      const uint32_t *st = t->src_mem->tag + (t->src_abs + t->done) / 4;
      for (uint64_t w = 0; w < n / 4; w++) {
        if ((st[w] >> 24) != t->ctag) {
          char who[256];
          sim_writer_desc(s, st[w], who, sizeof(who));
          uint32_t wid = t->wid;
          char path[192] = "";
          /* wid -> (rank, block, op): find by scanning the bases. */
          for (int rk = 0; rk < s->n && !path[0]; rk++)
            for (int b = 0; b < s->plan->gpus[rk].n_blocks; b++) {
              int base = s->gop_base[rk * s->plan->max_blocks + b];
              if (wid > (uint32_t)base &&
                  wid <= (uint32_t)(base + s->plan->gpus[rk].blocks[b].n_ops)) {
                sim_op_path(s, rk, b, (int)(wid - (uint32_t)base - 1), path, sizeof(path));
                break;
              }
            }
          sim_fail(s, PCL_SIM_UNINIT,
                   "%s: the proxy of rank %d copies a source byte that %s (port put before its "
                   "data was written, or source reused before a flush)",
                   path, r->rank, who);
          return 0;
        }
      }
      memcpy(t->dst_mem->data + t->dst_abs + t->done, t->src_mem->data + t->src_abs + t->done, n);
      uint32_t *dt = t->dst_mem->tag + (t->dst_abs + t->done) / 4;
      uint32_t tag = (t->ctag << 24) | t->wid;
      for (uint64_t w = 0; w < n / 4; w++)
        dt[w] = tag;
      t->done += n;
      budget = budget > n ? budget - n : 0;
      progressed = 1;
      if (t->done < t->bytes)
        break;
    }
    if (t->kind & SIM_TRIG_FLAG)
      s->ranks[t->sig_rank].inbound[PCL_PLAN_CHAN_PORT][t->sig_chan]++;
    p->tail++;
    progressed = 1;
    budget = budget > SIM_CTRL_COST ? budget - SIM_CTRL_COST : 0;
  }
  return progressed;
}
