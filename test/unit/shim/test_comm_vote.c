/* SPDX-License-Identifier: MIT
 * Automatic registration's vote (shim/comm/comm_vote.c): the decision for every mix of votes, and
 * the rounds on a shared board between forked ranks: the same outcomes everywhere, in order, over
 * many rounds of changing votes; NO votes that do not wait (running ahead up to the depth, calls
 * on two communicators in opposite orders); a rank that never comes; an abort. CPU only. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "comm_vote.h"
#include "pcl_test.h"

/* An automatic vote: the slots holding the input and the output, the stale ones, and whether
 * the output lies in the input's span. */
static pcl_vote_t A(uint64_t in, uint64_t out, uint64_t stale, int same) {
  pcl_vote_t v;
  memset(&v, 0, sizeof(v));
  v.kind = PCL_VOTE_AUTO;
  v.side[0].held = in;
  v.side[1].held = out;
  v.stale = stale;
  v.out_in_span = (uint32_t)same;
  return v;
}

static pcl_vote_t K(uint32_t kind) {
  pcl_vote_t v;
  memset(&v, 0, sizeof(v));
  v.kind = kind;
  return v;
}

#define B(s) (1ull << (s))

static pcl_vote_outcome_t decide(int n, const pcl_vote_t *v) {
  pcl_vote_outcome_t o;
  memset(&o, 0x5a, sizeof(o)); /* every field must be written */
  pcl_vote_decide(v, n, &o);
  return o;
}

START_TEST(test_decide) {
  /* Anyone who cannot: unregistered, whatever the others hold. */
  pcl_vote_t a[3] = {A(B(4), B(4), 0, 1), K(PCL_VOTE_NO), A(B(4), B(4), 0, 1)};
  pcl_vote_outcome_t o = decide(3, a);
  ck_assert_int_eq(o.action, PCL_VOTE_UNREGISTERED);
  ck_assert_uint_eq(o.drop, 0);
  /* Every rank holds both sides in slot 4: use it. */
  pcl_vote_t b[3] = {A(B(4), B(4), 0, 1), A(B(4), B(4), 0, 1), A(B(4), B(4), 0, 1)};
  o = decide(3, b);
  ck_assert_int_eq(o.action, PCL_VOTE_USE_AUTO);
  ck_assert_int_eq(o.slot[0], 4);
  ck_assert_int_eq(o.slot[1], 4);
  ck_assert_uint_eq(o.drop, 0);
  /* The ranks hold the input in several slots each (overlapping spans): the lowest common one.
   * No slot holds every rank's output: that side is exchanged, nothing is dropped. */
  pcl_vote_t c[3] = {A(B(2) | B(5) | B(9), B(1), 0, 0), A(B(5) | B(7) | B(9), B(3), 0, 0),
                     A(B(1) | B(5) | B(9), B(1) | B(3), 0, 0)};
  o = decide(3, c);
  ck_assert_int_eq(o.action, PCL_VOTE_USE_AUTO);
  ck_assert_int_eq(o.slot[0], 5);
  ck_assert_int_eq(o.slot[1], PCL_VOTE_EXCHANGE);
  ck_assert_uint_eq(o.drop, 0);
  /* A slot one rank found stale is dropped everywhere and used by none: the next common one. */
  pcl_vote_t d[3] = {A(B(3) | B(6), B(3), 0, 1), A(B(6), B(6), B(3) | B(40), 1),
                     A(B(3) | B(6), B(3) | B(6), 0, 1)};
  o = decide(3, d);
  ck_assert_int_eq(o.action, PCL_VOTE_USE_AUTO);
  ck_assert_int_eq(o.slot[0], 6);
  ck_assert_int_eq(o.slot[1], PCL_VOTE_EXCHANGE);
  ck_assert_uint_eq(o.drop, B(3) | B(40));
  /* Both sides new: one exchange when every rank's output lies in its input's span (in place),
   * two otherwise. */
  pcl_vote_t e[2] = {A(0, 0, 0, 1), A(B(8), 0, 0, 1)};
  o = decide(2, e);
  ck_assert_int_eq(o.slot[0], PCL_VOTE_EXCHANGE);
  ck_assert_int_eq(o.slot[1], PCL_VOTE_AS_INPUT);
  e[1].out_in_span = 0;
  o = decide(2, e);
  ck_assert_int_eq(o.slot[0], PCL_VOTE_EXCHANGE);
  ck_assert_int_eq(o.slot[1], PCL_VOTE_EXCHANGE);
  /* A stale slot is dropped even when the call runs unregistered. */
  pcl_vote_t f[2] = {A(0, 0, B(9), 0), K(PCL_VOTE_NO)};
  o = decide(2, f);
  ck_assert_int_eq(o.action, PCL_VOTE_UNREGISTERED);
  ck_assert_uint_eq(o.drop, B(9));
  /* Explicit registrations on every rank: theirs; mixed with automatic ones: neither. */
  pcl_vote_t g[2] = {K(PCL_VOTE_EXPLICIT), K(PCL_VOTE_EXPLICIT)};
  ck_assert_int_eq(decide(2, g).action, PCL_VOTE_USE_EXPLICIT);
  pcl_vote_t h[2] = {K(PCL_VOTE_EXPLICIT), A(B(1), B(1), 0, 1)};
  ck_assert_int_eq(decide(2, h).action, PCL_VOTE_UNREGISTERED);
  /* A vote of no known kind (a corrupted board) counts as "cannot". */
  pcl_vote_t m[2] = {A(B(1), B(1), 0, 1), K(17)};
  ck_assert_int_eq(decide(2, m).action, PCL_VOTE_UNREGISTERED);
  /* Every rank names another stale slot; the last slot is held by all. */
  pcl_vote_t w[PCL_VOTE_MAX_RANKS];
  for (int r = 0; r < PCL_VOTE_MAX_RANKS; r++)
    w[r] = A(B(63) | B(r % 63), B(63), B(r % 63), 1);
  o = decide(PCL_VOTE_MAX_RANKS, w);
  ck_assert_int_eq(o.action, PCL_VOTE_USE_AUTO);
  ck_assert_int_eq(o.slot[0], 63);
  ck_assert_int_eq(o.slot[1], 63);
  ck_assert_uint_eq(o.drop, B(63) - 1);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* The slot an exchange fills: free ones first (lowest), else the oldest, never the one the
 * call's other side is about to use. */
START_TEST(test_pick_slot) {
  uint32_t gen[PCL_VOTE_SLOTS];
  for (int i = 0; i < PCL_VOTE_SLOTS; i++)
    gen[i] = 100u + (uint32_t)((i * 37) % PCL_VOTE_SLOTS); /* a permutation: all differ */
  ck_assert_int_eq(pcl_vote_pick_slot(0, gen, -1), 0);
  ck_assert_int_eq(pcl_vote_pick_slot(B(0) | B(1) | B(3), gen, -1), 2);
  ck_assert_int_eq(pcl_vote_pick_slot(~B(63), gen, 5), 63);
  /* Full: the oldest generation (slot 0 has 100). */
  ck_assert_int_eq(pcl_vote_pick_slot(~0ull, gen, -1), 0);
  ck_assert_int_eq(pcl_vote_pick_slot(~0ull, gen, PCL_VOTE_EXCHANGE), 0);
  /* The oldest is the other side's: the next oldest (101 is slot i with i * 37 = 1 mod 64). */
  int next = 0;
  while (gen[next] != 101u)
    next++;
  ck_assert_int_eq(pcl_vote_pick_slot(~0ull, gen, 0), next);
  /* Whatever is kept, the result is live, not kept, and no older slot but the kept one exists. */
  for (int keep = 0; keep < PCL_VOTE_SLOTS; keep++) {
    const int s = pcl_vote_pick_slot(~0ull, gen, keep);
    ck_assert_int_ne(s, keep);
    for (int i = 0; i < PCL_VOTE_SLOTS; i++)
      ck_assert(i == keep || gen[i] >= gen[s]);
  }
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

#define CH(b, sz, id) ((pcl_mem_chunk_t){(b), (sz), (id)})

/* A buffer's allocations against a slot's: a run of them at the same addresses, sizes and ids. */
START_TEST(test_chunks_held) {
  const uint64_t M = 2u << 20;
  const pcl_mem_chunk_t slot[4] = {CH(10 * M, M, 1), CH(11 * M, M, 2), CH(12 * M, 2 * M, 3),
                                   CH(14 * M, M, 4)};
  const pcl_mem_chunk_t a[2] = {CH(11 * M, M, 2), CH(12 * M, 2 * M, 3)};
  ck_assert(pcl_vote_chunks_held(slot, 4, a, 2));
  ck_assert(pcl_vote_chunks_held(slot, 4, slot, 4));
  ck_assert(pcl_vote_chunks_held(slot, 4, &slot[3], 1));
  /* Remapped: another buffer id at the same place. */
  const pcl_mem_chunk_t b[2] = {CH(11 * M, M, 2), CH(12 * M, 2 * M, 9)};
  ck_assert(!pcl_vote_chunks_held(slot, 4, b, 2));
  /* Remade in other sizes (one mapping split in two). */
  const pcl_mem_chunk_t c[2] = {CH(12 * M, M, 3), CH(13 * M, M, 5)};
  ck_assert(!pcl_vote_chunks_held(slot, 4, c, 2));
  /* Running past the slot's last, before its first, between two of its bases. */
  const pcl_mem_chunk_t d[2] = {CH(14 * M, M, 4), CH(15 * M, M, 6)};
  ck_assert(!pcl_vote_chunks_held(slot, 4, d, 2));
  ck_assert(!pcl_vote_chunks_held(slot, 4, &CH(9 * M, M, 1), 1));
  ck_assert(!pcl_vote_chunks_held(slot, 4, &CH(11 * M + 4096, M, 2), 1));
  /* A slot that kept nothing (out of host memory at its exchange) holds nothing. */
  ck_assert(!pcl_vote_chunks_held(NULL, 0, a, 1));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

#define NR 3
#define ROUNDS 3000

/* Rank r's vote of round s: a mix that changes every round (splitmix64 of both), NO included,
 * with addresses that say whose and which round it was. */
static pcl_vote_t vote_of(int r, uint64_t s) {
  uint64_t x = s * 1000003u + (uint64_t)r + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  const uint32_t kind = (uint32_t)(x % 4) == 3 ? PCL_VOTE_AUTO : (uint32_t)(x % 4);
  if (kind != PCL_VOTE_AUTO)
    return K(kind);
  pcl_vote_t v = A((x >> 8) & 7, (x >> 11) & 7, (x >> 14) % 16 == 0 ? B((x >> 18) & 7) : 0,
                   (int)(x >> 21) & 1);
  for (int k = 0; k < 2; k++) {
    v.side[k].ptr = s << 20 | (uint64_t)r << 8 | (uint64_t)k;
    v.side[k].span = v.side[k].ptr & ~0xffull;
  }
  return v;
}

static void *shared(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(p, MAP_FAILED);
  return p;
}

/* Forks n ranks running body(rank); returns how many exited 0. */
static int run_ranks(int n, int (*body)(int, void *), void *arg) {
  pid_t pid[NR];
  int good = 0;
  for (int r = 0; r < n; r++) {
    pid[r] = fork();
    ck_assert_int_ge(pid[r], 0);
    if (pid[r] == 0)
      _exit(body(r, arg));
  }
  for (int r = 0; r < n; r++) {
    int st = 0;
    ck_assert_int_eq(waitpid(pid[r], &st, 0), pid[r]);
    good += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return good;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* What one rank's apply callback saw: every round's outcome, in the order it was called. */
struct seen {
  pcl_vote_outcome_t *o; /* [ROUNDS] of this rank */
  uint64_t calls;
};

static void record(void *ctx, const pcl_vote_outcome_t *o) {
  struct seen *w = ctx;
  if (w->calls < ROUNDS)
    w->o[w->calls] = *o;
  w->calls++;
}

struct board_test {
  void *board;
  pcl_vote_outcome_t *seen; /* [NR][ROUNDS] */
};

static int rank_rounds(int r, void *arg) {
  struct board_test *t = arg;
  struct seen w = {&t->seen[(size_t)r * ROUNDS], 0};
  pcl_vote_ledger_t L;
  pcl_vote_ledger_init(&L, t->board, NR, r, 30, NULL, record, &w);
  for (uint64_t s = 1; s <= ROUNDS; s++) {
    pcl_vote_outcome_t o;
    const pcl_vote_t mine = vote_of(r, s);
    if (mine.kind != PCL_VOTE_NO && pcl_vote_catch_up(&L, 1) != ncclSuccess)
      return 1;
    if (mine.kind != PCL_VOTE_NO && w.calls != s - 1)
      return 2; /* a rank that votes has read every earlier round */
    if (pcl_vote_round(&L, mine, &o) != ncclSuccess)
      return 3;
    if (mine.kind == PCL_VOTE_NO ? o.action != PCL_VOTE_UNREGISTERED || o.drop != 0
                                 : w.calls != s || memcmp(&o, &w.o[s - 1], sizeof(o)) != 0)
      return 4;
    for (int q = 0; q < NR && mine.kind != PCL_VOTE_NO; q++) { /* everyone's votes, whole */
      const pcl_vote_t want = vote_of(q, s);
      if (memcmp(&L.votes[q], &want, sizeof(want)) != 0)
        return 6;
    }
  }
  if (pcl_vote_catch_up(&L, 1) != ncclSuccess || w.calls != ROUNDS || L.read != ROUNDS)
    return 5;
  return 0;
}

START_TEST(test_rounds_agree) {
  struct board_test t = {shared(pcl_vote_board_bytes(NR)),
                         shared(sizeof(pcl_vote_outcome_t) * ROUNDS * NR)};
  ck_assert_int_eq(run_ranks(NR, rank_rounds, &t), NR);
  int exchanges = 0;
  for (int s = 0; s < ROUNDS; s++) {
    const pcl_vote_outcome_t *o = &t.seen[s];
    pcl_vote_t votes[NR];
    pcl_vote_outcome_t want;
    for (int r = 0; r < NR; r++) /* every vote read from its own round */
      votes[r] = vote_of(r, (uint64_t)s + 1);
    pcl_vote_decide(votes, NR, &want);
    exchanges += o->action == PCL_VOTE_USE_AUTO && o->slot[0] == PCL_VOTE_EXCHANGE;
    for (int r = 0; r < NR; r++) {
      const pcl_vote_outcome_t *x = &t.seen[(size_t)r * ROUNDS + (size_t)s];
      ck_assert_int_eq(x->action, want.action);
      ck_assert_int_eq(x->slot[0], want.slot[0]);
      ck_assert_int_eq(x->slot[1], want.slot[1]);
      ck_assert_uint_eq(x->drop, want.drop);
    }
  }
  ck_assert_int_gt(exchanges, 0); /* the votes did vary */
  munmap(t.board, pcl_vote_board_bytes(NR));
  munmap(t.seen, sizeof(pcl_vote_outcome_t) * ROUNDS * NR);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Rank 0 votes NO 5 x PCL_VOTE_DEPTH times in a row while rank 1 starts late, finding a slot stale:
 * rank 0 runs ahead by at most the depth, waits there for rank 1 to read, and both read every
 * round alike (rank 0 at its final catch-up). */
static int rank_runs_ahead(int r, void *arg) {
  struct board_test *t = arg;
  struct seen w = {&t->seen[(size_t)r * ROUNDS], 0};
  const int n = 5 * PCL_VOTE_DEPTH;
  pcl_vote_ledger_t L;
  pcl_vote_ledger_init(&L, t->board, 2, r, 30, NULL, record, &w);
  if (r == 1)
    usleep(100 * 1000);
  for (int s = 1; s <= n; s++) {
    pcl_vote_outcome_t o;
    if (pcl_vote_round(&L, r == 0 ? K(PCL_VOTE_NO) : A(0, 0, B(s % 64), 0), &o) != ncclSuccess)
      return 1;
    if (r == 0 && L.posted - L.read > PCL_VOTE_DEPTH)
      return 2;
  }
  if (pcl_vote_catch_up(&L, 1) != ncclSuccess || w.calls != (uint64_t)n)
    return 3;
  for (int s = 1; s <= n; s++) /* unregistered, and rank 1's stale slot dropped */
    if (w.o[s - 1].action != PCL_VOTE_UNREGISTERED || w.o[s - 1].drop != B(s % 64))
      return 4;
  return 0;
}

START_TEST(test_no_runs_ahead) {
  struct board_test t = {shared(pcl_vote_board_bytes(2)),
                         shared(sizeof(pcl_vote_outcome_t) * ROUNDS * NR)};
  ck_assert_int_eq(run_ranks(2, rank_runs_ahead, &t), 2);
  munmap(t.board, pcl_vote_board_bytes(2));
  munmap(t.seen, sizeof(pcl_vote_outcome_t) * ROUNDS * NR);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Two communicators' boards; inside "groups" rank 0 calls A then B and rank 1 B then A (NCCL
 * allows it), each call voting NO; then both call A and B outside groups. Nobody may wait for
 * the other inside the groups: all of it ends long before the timeout. */
static int rank_reorder(int r, void *arg) {
  void **boards = arg;
  pcl_vote_ledger_t L[2];
  for (int b = 0; b < 2; b++)
    pcl_vote_ledger_init(&L[b], boards[b], 2, r, 20, NULL, NULL, NULL);
  const double t0 = now_s();
  pcl_vote_outcome_t o;
  for (int it = 0; it < 10; it++) {
    for (int k = 0; k < 2; k++) { /* the group: rank 0 A, B; rank 1 B, A; both twice */
      for (int j = 0; j < 2; j++)
        if (pcl_vote_round(&L[r == 0 ? k : 1 - k], K(PCL_VOTE_NO), &o) != ncclSuccess)
          return 1;
    }
    if (r == 1)
      usleep(2000);               /* the other rank reaches its next round first */
    for (int b = 0; b < 2; b++) { /* outside groups: the same order on both */
      if (pcl_vote_round(&L[b], A(0, 0, 0, 0), &o) != ncclSuccess ||
          o.action != PCL_VOTE_USE_AUTO || o.slot[0] != PCL_VOTE_EXCHANGE)
        return 2;
    }
  }
  return now_s() - t0 < 10 ? 0 : 3;
}

START_TEST(test_group_reorder) {
  void *boards[2] = {shared(pcl_vote_board_bytes(2)), shared(pcl_vote_board_bytes(2))};
  ck_assert_int_eq(run_ranks(2, rank_reorder, boards), 2);
  munmap(boards[0], pcl_vote_board_bytes(2));
  munmap(boards[1], pcl_vote_board_bytes(2));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Rank 1 votes in round 1 only, then waits; rank 0 must give up in round 2 after the timeout,
 * and then rank 1's round 2 fails at once (the board is dead), as would everyone's. A NO vote
 * does not wait even for an absent rank. */
static int rank_absent(int r, void *arg) {
  void *board = arg;
  volatile uint32_t *gave_up = (volatile uint32_t *)((char *)board + pcl_vote_board_bytes(2));
  pcl_vote_ledger_t L;
  pcl_vote_outcome_t o;
  pcl_vote_ledger_init(&L, board, 2, r, 1, NULL, NULL, NULL);
  if (pcl_vote_round(&L, A(0, 0, 0, 0), &o) != ncclSuccess)
    return 1;
  double a = now_s();
  if (r == 1) {
    while (*gave_up == 0 && now_s() - a < 20)
      usleep(1000);
    a = now_s();
    ncclResult_t res = pcl_vote_round(&L, A(B(0), B(0), 0, 1), &o);
    return res == ncclRemoteError && now_s() - a < 0.5 && *gave_up == 1 ? 0 : 2;
  }
  ncclResult_t res = pcl_vote_round(&L, A(0, 0, 0, 0), &o);
  const double waited = now_s() - a;
  *gave_up = 1;
  if (res != ncclRemoteError || waited < 0.9 || waited > 10)
    return 3;
  /* Final: later rounds fail at once, NO votes too. */
  return pcl_vote_round(&L, K(PCL_VOTE_NO), &o) == ncclRemoteError ? 0 : 4;
}

START_TEST(test_absent_peer) {
  void *board = shared(pcl_vote_board_bytes(2) + 64);
  ck_assert_int_eq(run_ranks(2, rank_absent, board), 2);
  munmap(board, pcl_vote_board_bytes(2) + 64);
  /* A NO vote posts and returns without the peer, up to the depth. */
  board = shared(pcl_vote_board_bytes(2));
  pcl_vote_ledger_t L;
  pcl_vote_outcome_t o;
  pcl_vote_ledger_init(&L, board, 2, 0, 3600, NULL, NULL, NULL);
  for (int s = 0; s < PCL_VOTE_DEPTH; s++) {
    ck_assert_int_eq(pcl_vote_round(&L, K(PCL_VOTE_NO), &o), ncclSuccess);
    ck_assert_int_eq(o.action, PCL_VOTE_UNREGISTERED);
  }
  ck_assert_uint_eq(L.posted, PCL_VOTE_DEPTH);
  ck_assert_uint_eq(L.read, 0);
  munmap(board, pcl_vote_board_bytes(2));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_abort) {
  void *board = shared(pcl_vote_board_bytes(2));
  volatile uint32_t flag = 1;
  pcl_vote_ledger_t L;
  pcl_vote_outcome_t o;
  pcl_vote_ledger_init(&L, board, 2, 0, 3600, &flag, NULL, NULL);
  /* The peer never votes; the set flag ends the wait long before the timeout, for good. */
  ck_assert_int_eq(pcl_vote_round(&L, A(B(0), B(0), 0, 1), &o), ncclInternalError);
  ck_assert_int_eq(pcl_vote_round(&L, K(PCL_VOTE_NO), &o), ncclRemoteError);
  munmap(board, pcl_vote_board_bytes(2));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

TCase *dispatch_tcase_comm_vote(void) {
  TCase *tc = tcase_create("comm_vote");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_decide);
  tcase_add_test(tc, test_pick_slot);
  tcase_add_test(tc, test_chunks_held);
  tcase_add_test(tc, test_rounds_agree);
  tcase_add_test(tc, test_no_runs_ahead);
  tcase_add_test(tc, test_group_reorder);
  tcase_add_test(tc, test_absent_peer);
  tcase_add_test(tc, test_abort);
  return tc;
}
