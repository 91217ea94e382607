/* SPDX-License-Identifier: MIT
 * Automatic registration's per-call agreement (comm_vote.h): the decision from everyone's votes,
 * and the rounds on a board in shared host memory. */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <time.h>
#include "comm_vote.h"
#include "log.h"
#include "pcl_abort.h"
#include "pcl_check.h"

/* One slot: the round it holds, written last with release, read first with acquire. */
struct slot {
  uint64_t seq;
  pcl_vote_t v;
  uint8_t pad[128 - sizeof(uint64_t) - sizeof(pcl_vote_t)];
};
_Static_assert(sizeof(struct slot) == 128, "a slot is two cache lines, apart from its neighbours");

static void unregistered(pcl_vote_outcome_t *o, uint64_t drop) {
  o->action = PCL_VOTE_UNREGISTERED;
  o->slot[0] = o->slot[1] = PCL_VOTE_EXCHANGE;
  o->drop = drop;
}

void pcl_vote_decide(const pcl_vote_t *v, int n, pcl_vote_outcome_t *o) {
  int no = 0, explicit = 0, same_span = 1;
  uint64_t drop = 0, common[2] = {~0ull, ~0ull};
  for (int r = 0; r < n; r++) {
    no += v[r].kind != PCL_VOTE_EXPLICIT && v[r].kind != PCL_VOTE_AUTO;
    explicit += v[r].kind == PCL_VOTE_EXPLICIT;
    if (v[r].kind != PCL_VOTE_AUTO)
      continue;
    drop |= v[r].stale; /* stale everywhere: its owner's memory changed */
    same_span &= v[r].out_in_span != 0;
    for (int k = 0; k < 2; k++)
      common[k] &= v[r].side[k].held;
  }
  unregistered(o, drop);
  if (no > 0 || (explicit > 0 && explicit < n))
    return; /* a mix of explicit and automatic breaks NCCL's registration contract */
  if (explicit == n) {
    o->action = PCL_VOTE_USE_EXPLICIT;
    return;
  }
  o->action = PCL_VOTE_USE_AUTO;
  for (int k = 0; k < 2; k++) {
    const uint64_t c = common[k] & ~drop;
    o->slot[k] = c != 0 ? __builtin_ctzll(c) : PCL_VOTE_EXCHANGE;
  }
  /* Both sides new and every rank's output inside its input's span (in place): one exchange. */
  if (o->slot[0] == PCL_VOTE_EXCHANGE && o->slot[1] == PCL_VOTE_EXCHANGE && same_span)
    o->slot[1] = PCL_VOTE_AS_INPUT;
}

int pcl_vote_pick_slot(uint64_t live, const uint32_t gen[PCL_VOTE_SLOTS], int keep) {
  int s = -1;
  if (~live != 0)
    return __builtin_ctzll(~live);
  for (int i = 0; i < PCL_VOTE_SLOTS; i++) /* full: the oldest exchange goes */
    if (i != keep && (s < 0 || gen[i] < gen[s]))
      s = i;
  return s;
}

int pcl_vote_chunks_held(const pcl_mem_chunk_t *have, int nhave, const pcl_mem_chunk_t *b, int nb) {
  int lo = 0, hi = nhave;
  while (lo < hi) { /* the first of the slot's at or past the buffer's first */
    const int mid = (lo + hi) / 2;
    if (have[mid].base < b[0].base)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* Three 64-bit fields: no padding, so equal bytes are equal chunks. */
  return nb >= 1 && nb <= nhave - lo && memcmp(&have[lo], b, (size_t)nb * sizeof(*b)) == 0;
}

/* The board: a header line (the round some rank gave up on, 0 while healthy), then per rank a
 * line holding the last round it has read and PCL_VOTE_DEPTH slots. A slot holds round k at
 * index k % PCL_VOTE_DEPTH; its owner rewrites it for round k + PCL_VOTE_DEPTH only after every
 * rank's `read` reached k (acquire), and readers publish `read` (release) only after copying the
 * votes out, so no vote is overwritten while someone may still read it. */
struct line {
  uint64_t v;
  uint8_t pad[56];
};

struct rank_area {
  struct line read;
  struct slot slot[PCL_VOTE_DEPTH];
};

static struct line *header(const pcl_vote_ledger_t *L) {
  return (struct line *)L->board;
}

static struct rank_area *area(const pcl_vote_ledger_t *L, int r) {
  return (struct rank_area *)((char *)L->board + sizeof(struct line)) + r;
}

size_t pcl_vote_board_bytes(int n) {
  return sizeof(struct line) + (size_t)n * sizeof(struct rank_area);
}

void pcl_vote_ledger_init(pcl_vote_ledger_t *L, void *board, int n, int rank, int timeout_s,
                          const volatile uint32_t *abort_flag, pcl_vote_apply_fn apply, void *ctx) {
  memset(L, 0, sizeof(*L));
  L->board = board;
  L->n = n;
  L->rank = rank;
  L->timeout_s = timeout_s;
  L->abort_flag = abort_flag;
  L->apply = apply;
  L->ctx = ctx;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

enum wait_kind { WAIT_VOTES, WAIT_ROOM };

/* The first rank not ready for round seq (WAIT_VOTES: its vote posted; WAIT_ROOM: it has read
 * the round that slot held before), or -1 when every rank is. */
static int lagging(const pcl_vote_ledger_t *L, enum wait_kind k, uint64_t seq) {
  for (int r = 0; r < L->n; r++) {
    const struct rank_area *a = area(L, r);
    if (k == WAIT_VOTES
            ? __atomic_load_n(&a->slot[seq % PCL_VOTE_DEPTH].seq, __ATOMIC_ACQUIRE) != seq
            : __atomic_load_n(&a->read.v, __ATOMIC_ACQUIRE) + PCL_VOTE_DEPTH < seq)
      return r;
  }
  return -1;
}

static ncclResult_t fail(pcl_vote_ledger_t *L, ncclResult_t res) {
  L->failed = 1;
  return res;
}

static ncclResult_t dead(pcl_vote_ledger_t *L) {
  uint64_t at = __atomic_load_n(&header(L)->v, __ATOMIC_ACQUIRE);
  PCL_WARN(PCL_LOG_SHIM,
           "rank %d: another rank gave up on registration round %llu: automatic registration "
           "on this communicator has failed for good (abort it)",
           L->rank, (unsigned long long)at);
  return fail(L, ncclRemoteError);
}

/* Waits until lagging() is -1. Peers arrive within microseconds when they run the same program:
 * spin a little, then yield the core (ranks may share one), then check the clock, the abort flag
 * and the header. */
static ncclResult_t wait_for(pcl_vote_ledger_t *L, enum wait_kind k, uint64_t seq) {
  double start = 0;
  int r;
  for (unsigned spin = 0; (r = lagging(L, k, seq)) >= 0; spin++) {
    if (spin < 2048)
      continue;
    sched_yield();
    if ((spin & 255) != 0)
      continue;
    if (L->abort_flag != NULL && pcl_abort_requested(L->abort_flag)) {
      PCL_WARN(PCL_LOG_SHIM, "rank %d: registration round %llu ended by an abort", L->rank,
               (unsigned long long)seq);
      return fail(L, ncclInternalError);
    }
    if (__atomic_load_n(&header(L)->v, __ATOMIC_ACQUIRE) != 0)
      return dead(L);
    if (start == 0) {
      start = now_s();
    } else if (now_s() - start > (double)L->timeout_s) {
      uint64_t zero = 0;
      __atomic_compare_exchange_n(&header(L)->v, &zero, seq, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
      PCL_WARN(PCL_LOG_SHIM,
               "rank %d: rank %d did not %s registration round %llu within %d s (it died, or "
               "the ranks do not make the same collective calls): automatic registration on this "
               "communicator has failed for good (abort it)",
               L->rank, r, k == WAIT_VOTES ? "reach" : "read the round before",
               (unsigned long long)seq, L->timeout_s);
      return fail(L, ncclRemoteError);
    }
  }
  return ncclSuccess;
}

/* Reads round read + 1 (every vote must be there: the acquire of its seq orders the copy after
 * the owner's writes) and applies it. */
static void read_next(pcl_vote_ledger_t *L) {
  const uint64_t k = L->read + 1;
  for (int r = 0; r < L->n; r++)
    memcpy(&L->votes[r], &area(L, r)->slot[k % PCL_VOTE_DEPTH].v, sizeof(pcl_vote_t));
  __atomic_store_n(&area(L, L->rank)->read.v, k, __ATOMIC_RELEASE);
  L->read = k;
  pcl_vote_decide(L->votes, L->n, &L->last);
  if (L->apply != NULL)
    L->apply(L->ctx, &L->last);
}

ncclResult_t pcl_vote_catch_up(pcl_vote_ledger_t *L, int block) {
  if (L->failed)
    return ncclRemoteError; /* WARNed when it failed */
  while (L->read < L->posted) {
    if (!block && lagging(L, WAIT_VOTES, L->read + 1) >= 0)
      return ncclSuccess;
    PCL_CHECK(wait_for(L, WAIT_VOTES, L->read + 1));
    read_next(L);
  }
  return ncclSuccess;
}

ncclResult_t pcl_vote_round(pcl_vote_ledger_t *L, pcl_vote_t mine, pcl_vote_outcome_t *o) {
  const uint64_t seq = L->posted + 1;
  if (L->failed)
    return ncclRemoteError;
  if (__atomic_load_n(&header(L)->v, __ATOMIC_ACQUIRE) != 0)
    return dead(L);
  while (L->read + PCL_VOTE_DEPTH < seq) { /* my own slot's old round: read it first */
    PCL_CHECK(wait_for(L, WAIT_VOTES, L->read + 1));
    read_next(L);
  }
  if (seq > L->room_until) { /* read lines are shared: look at them once per many rounds */
    PCL_CHECK(wait_for(L, WAIT_ROOM, seq));
    uint64_t least = UINT64_MAX;
    for (int r = 0; r < L->n; r++) {
      const uint64_t v = __atomic_load_n(&area(L, r)->read.v, __ATOMIC_ACQUIRE);
      least = v < least ? v : least;
    }
    L->room_until = least + PCL_VOTE_DEPTH;
  }
  struct slot *me = &area(L, L->rank)->slot[seq % PCL_VOTE_DEPTH];
  memcpy(&me->v, &mine, sizeof(mine));
  __atomic_store_n(&me->seq, seq, __ATOMIC_RELEASE);
  L->posted = seq;
  if (mine.kind == PCL_VOTE_NO) {
    unregistered(o, 0);
    return pcl_vote_catch_up(L, 0);
  }
  PCL_CHECK(pcl_vote_catch_up(L, 1));
  *o = L->last;
  return ncclSuccess;
}
