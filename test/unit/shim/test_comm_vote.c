/* SPDX-License-Identifier: MIT
 * Automatic registration's vote (shim/comm_vote.c): the decision for every mix of votes, and the
 * round on a shared board between forked ranks (same outcomes everywhere over many rounds with
 * changing votes; a rank that never comes; an abort). CPU only. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "comm_vote.h"
#include "pcl_test.h"

#define V(k, g) ((pcl_vote_t){(k), (g)})
#define NONE PCL_VOTE_NONE

static pcl_vote_outcome_t decide(int n, const pcl_vote_t *v) {
  pcl_vote_outcome_t o;
  memset(&o, 0x5a, sizeof(o)); /* every field must be written */
  pcl_vote_decide(v, n, &o);
  return o;
}

START_TEST(test_decide) {
  /* Anyone who cannot: unregistered, whatever the others hold. */
  pcl_vote_t a[3] = {V(PCL_VOTE_HIT, 4), V(PCL_VOTE_NO, NONE), V(PCL_VOTE_HIT, 4)};
  pcl_vote_outcome_t o = decide(3, a);
  ck_assert_int_eq(o.action, PCL_VOTE_UNREGISTERED);
  ck_assert_int_eq(o.ndrop, 0);
  /* Every rank holds generation 4: use it. */
  pcl_vote_t b[3] = {V(PCL_VOTE_HIT, 4), V(PCL_VOTE_HIT, 4), V(PCL_VOTE_HIT, 4)};
  o = decide(3, b);
  ck_assert_int_eq(o.action, PCL_VOTE_USE_GEN);
  ck_assert_uint_eq(o.gen, 4);
  ck_assert_int_eq(o.ndrop, 0);
  /* Hits that disagree (the ranks' address patterns differ): exchange, both generations go. */
  pcl_vote_t c[3] = {V(PCL_VOTE_HIT, 7), V(PCL_VOTE_HIT, 2), V(PCL_VOTE_HIT, 7)};
  o = decide(3, c);
  ck_assert_int_eq(o.action, PCL_VOTE_EXCHANGE);
  ck_assert_int_eq(o.ndrop, 2);
  ck_assert_uint_eq(o.drop[0], 2);
  ck_assert_uint_eq(o.drop[1], 7);
  /* One rank misses (a new buffer), another's buffer changed under generation 3. */
  pcl_vote_t d[3] = {V(PCL_VOTE_HIT, 5), V(PCL_VOTE_MISS, NONE), V(PCL_VOTE_MISS, 3)};
  o = decide(3, d);
  ck_assert_int_eq(o.action, PCL_VOTE_EXCHANGE);
  ck_assert_int_eq(o.ndrop, 2);
  ck_assert_uint_eq(o.drop[0], 3);
  ck_assert_uint_eq(o.drop[1], 5);
  /* A stale generation is dropped even when the call runs unregistered. */
  pcl_vote_t e[2] = {V(PCL_VOTE_MISS, 9), V(PCL_VOTE_NO, NONE)};
  o = decide(2, e);
  ck_assert_int_eq(o.action, PCL_VOTE_UNREGISTERED);
  ck_assert_int_eq(o.ndrop, 1);
  ck_assert_uint_eq(o.drop[0], 9);
  /* Explicit registrations on every rank: theirs; mixed with automatic ones: neither. */
  pcl_vote_t f[2] = {V(PCL_VOTE_EXPLICIT, NONE), V(PCL_VOTE_EXPLICIT, NONE)};
  ck_assert_int_eq(decide(2, f).action, PCL_VOTE_USE_EXPLICIT);
  pcl_vote_t g[2] = {V(PCL_VOTE_EXPLICIT, NONE), V(PCL_VOTE_HIT, 1)};
  ck_assert_int_eq(decide(2, g).action, PCL_VOTE_UNREGISTERED);
  /* A vote of no known kind (a corrupted board) counts as "cannot". */
  pcl_vote_t h[2] = {V(PCL_VOTE_HIT, 1), V(17, 1)};
  ck_assert_int_eq(decide(2, h).action, PCL_VOTE_UNREGISTERED);
  /* Many ranks naming the same stale generation: listed once. */
  pcl_vote_t m[PCL_VOTE_MAX_RANKS];
  for (int r = 0; r < PCL_VOTE_MAX_RANKS; r++)
    m[r] = V(PCL_VOTE_MISS, r % 2 ? 11 : (uint32_t)(PCL_VOTE_MAX_RANKS - r));
  o = decide(PCL_VOTE_MAX_RANKS, m);
  ck_assert_int_eq(o.action, PCL_VOTE_EXCHANGE);
  ck_assert_int_eq(o.ndrop, PCL_VOTE_MAX_RANKS / 2 + 1); /* the even 2..64, and 11 */
  for (int k = 1; k < o.ndrop; k++)
    ck_assert_uint_lt(o.drop[k - 1], o.drop[k]);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

#define NR 3
#define ROUNDS 3000

/* Rank r's vote of round s: a mix that changes every round (splitmix64 of both). */
static pcl_vote_t vote_of(int r, uint64_t s) {
  uint64_t x = s * 1000003u + (uint64_t)r + 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return V((uint32_t)(x % 4), (uint32_t)((x >> 8) % 3));
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

struct board_test {
  void *board;
  pcl_vote_outcome_t *seen; /* [ROUNDS][NR] */
};

static int rank_rounds(int r, void *arg) {
  struct board_test *t = arg;
  pcl_vote_t votes[NR];
  for (uint64_t s = 1; s <= ROUNDS; s++) {
    if (pcl_vote_round(t->board, NR, r, s, vote_of(r, s), votes, 30, NULL) != ncclSuccess)
      return 1;
    for (int q = 0; q < NR; q++) /* what everyone posted for this very round */
      if (votes[q].kind != vote_of(q, s).kind || votes[q].gen != vote_of(q, s).gen)
        return 2;
    pcl_vote_decide(votes, NR, &t->seen[(s - 1) * NR + (uint64_t)r]);
  }
  return 0;
}

START_TEST(test_rounds_agree) {
  struct board_test t = {shared(pcl_vote_board_bytes(NR)),
                         shared(sizeof(pcl_vote_outcome_t) * ROUNDS * NR)};
  ck_assert_int_eq(run_ranks(NR, rank_rounds, &t), NR);
  int exchanges = 0;
  for (int s = 0; s < ROUNDS; s++) {
    const pcl_vote_outcome_t *o = &t.seen[s * NR];
    exchanges += o->action == PCL_VOTE_EXCHANGE;
    for (int r = 1; r < NR; r++) {
      ck_assert_int_eq(o[r].action, o->action);
      ck_assert_uint_eq(o[r].gen, o->gen);
      ck_assert_int_eq(o[r].ndrop, o->ndrop);
      ck_assert_mem_eq(o[r].drop, o->drop, sizeof(uint32_t) * (size_t)o->ndrop);
    }
  }
  ck_assert_int_gt(exchanges, 0); /* the votes did vary */
  munmap(t.board, pcl_vote_board_bytes(NR));
  munmap(t.seen, sizeof(pcl_vote_outcome_t) * ROUNDS * NR);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Rank 1 votes in round 1 only; rank 0 must give up in round 2 after the timeout. */
static int rank_absent(int r, void *arg) {
  pcl_vote_t votes[2];
  if (pcl_vote_round(arg, 2, r, 1, V(PCL_VOTE_MISS, NONE), votes, 1, NULL) != ncclSuccess)
    return 1;
  if (r == 1)
    return 0;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  ncclResult_t res = pcl_vote_round(arg, 2, r, 2, V(PCL_VOTE_MISS, NONE), votes, 1, NULL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  const double waited = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
  return res == ncclRemoteError && waited >= 0.9 && waited < 10 ? 0 : 3;
}

START_TEST(test_absent_peer) {
  void *board = shared(pcl_vote_board_bytes(2));
  ck_assert_int_eq(run_ranks(2, rank_absent, board), 2);
  munmap(board, pcl_vote_board_bytes(2));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_abort) {
  void *board = shared(pcl_vote_board_bytes(2));
  volatile uint32_t flag = 1;
  pcl_vote_t votes[2];
  /* The peer never votes; the set flag ends the wait long before the timeout. */
  ck_assert_int_eq(pcl_vote_round(board, 2, 0, 1, V(PCL_VOTE_HIT, 0), votes, 3600, &flag),
                   ncclInternalError);
  munmap(board, pcl_vote_board_bytes(2));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

TCase *dispatch_tcase_comm_vote(void) {
  TCase *tc = tcase_create("comm_vote");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_decide);
  tcase_add_test(tc, test_rounds_agree);
  tcase_add_test(tc, test_absent_peer);
  tcase_add_test(tc, test_abort);
  return tc;
}
