/* SPDX-License-Identifier: MIT
 * Automatic registration's per-call agreement (comm_vote.h): the decision from everyone's votes,
 * and the round on a board in shared host memory. */
#define _GNU_SOURCE
#include <sched.h>
#include <time.h>
#include "comm_vote.h"
#include "log.h"
#include "pcl_abort.h"

/* One slot: the round it holds, written last with release, read first with acquire. */
struct slot {
  uint64_t seq;
  uint32_t kind, gen;
  uint8_t pad[48];
};

static void add_drop(pcl_vote_outcome_t *o, uint32_t g) {
  int i = o->ndrop;
  if (g == PCL_VOTE_NONE)
    return;
  for (int k = 0; k < o->ndrop; k++)
    if (o->drop[k] == g)
      return;
  while (i > 0 && o->drop[i - 1] > g) {
    o->drop[i] = o->drop[i - 1];
    i--;
  }
  o->drop[i] = g;
  o->ndrop++;
}

void pcl_vote_decide(const pcl_vote_t *v, int n, pcl_vote_outcome_t *o) {
  int no = 0, explicit = 0, hit = 0, same_gen = 1;
  o->action = PCL_VOTE_UNREGISTERED;
  o->gen = PCL_VOTE_NONE;
  o->ndrop = 0;
  for (int r = 0; r < n; r++) {
    no += v[r].kind == PCL_VOTE_NO || v[r].kind > PCL_VOTE_MISS;
    explicit += v[r].kind == PCL_VOTE_EXPLICIT;
    hit += v[r].kind == PCL_VOTE_HIT;
    same_gen &= v[r].kind == PCL_VOTE_HIT && v[r].gen == v[0].gen;
    if (v[r].kind == PCL_VOTE_MISS)
      add_drop(o, v[r].gen); /* stale everywhere it is named: its owner's buffer changed */
  }
  if (no > 0 || (explicit > 0 && explicit < n))
    return; /* unregistered; a mix of explicit and automatic breaks NCCL's registration contract */
  if (explicit == n) {
    o->action = PCL_VOTE_USE_EXPLICIT;
    return;
  }
  if (same_gen) {
    o->action = PCL_VOTE_USE_GEN;
    o->gen = v[0].gen;
    return;
  }
  /* Some rank misses, or the hits disagree: the call's buffers get a new generation on every
   * rank, which replaces whatever generation each hitting rank holds them under. */
  o->action = PCL_VOTE_EXCHANGE;
  for (int r = 0; r < n && hit > 0; r++)
    if (v[r].kind == PCL_VOTE_HIT)
      add_drop(o, v[r].gen);
}

size_t pcl_vote_board_bytes(int n) {
  return 2 * (size_t)n * sizeof(struct slot);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

ncclResult_t pcl_vote_round(void *board, int n, int rank, uint64_t seq, pcl_vote_t mine,
                            pcl_vote_t *votes, int timeout_s, const volatile uint32_t *abort_flag) {
  struct slot *s = board;
  const int par = (int)(seq & 1);
  struct slot *me = &s[2 * rank + par];
  __atomic_store_n(&me->kind, mine.kind, __ATOMIC_RELAXED);
  __atomic_store_n(&me->gen, mine.gen, __ATOMIC_RELAXED);
  __atomic_store_n(&me->seq, seq, __ATOMIC_RELEASE);
  double start = 0;
  for (int r = 0; r < n; r++) {
    struct slot *x = &s[2 * r + par];
    /* Peers arrive within microseconds when they run the same program; spin a little, then
     * yield the core (two ranks may share one), then check the clock and the abort flag. */
    for (unsigned spin = 0; __atomic_load_n(&x->seq, __ATOMIC_ACQUIRE) != seq; spin++) {
      if (spin < 2048)
        continue;
      sched_yield();
      if ((spin & 255) != 0)
        continue;
      if (abort_flag != NULL && pcl_abort_requested(abort_flag))
        return ncclInternalError;
      if (start == 0)
        start = now_s();
      else if (now_s() - start > (double)timeout_s) {
        PCL_WARN(PCL_LOG_SHIM,
                 "rank %d: rank %d did not reach registration round %llu within %d s (it died, "
                 "or the ranks do not make the same collective calls)",
                 rank, r, (unsigned long long)seq, timeout_s);
        return ncclRemoteError;
      }
    }
    votes[r].kind = __atomic_load_n(&x->kind, __ATOMIC_RELAXED);
    votes[r].gen = __atomic_load_n(&x->gen, __ATOMIC_RELAXED);
  }
  return ncclSuccess;
}
