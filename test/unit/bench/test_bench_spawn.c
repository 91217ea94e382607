/* SPDX-License-Identifier: MIT
 * planccl-bench's launcher and barrier: ranks in processes share memory, a failing rank releases
 * its peers' barrier and fails the run, a hung run is killed at its timeout; threads too. */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include "bench_spawn.h"
#include "bench_test.h"

typedef struct {
  bench_barrier_t bar;
  int seen[8], after[8];
  int fail_rank, hang;
} shared_t;

static int child(int rank, void *arg) {
  shared_t *s = arg;
  s->seen[rank] = rank + 100;
  if (rank == s->fail_rank)
    return 3;
  if (s->hang)
    sleep(30);
  s->after[rank] = bench_barrier_wait(&s->bar) == 0 ? 1 : -1;
  return 0;
}

static shared_t *make(int n) {
  shared_t *s = bench_shm_alloc(sizeof(*s));
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(bench_barrier_init(&s->bar, n, 1), 0);
  s->fail_rank = -1;
  return s;
}

static void drop(shared_t *s) {
  bench_barrier_destroy(&s->bar);
  bench_shm_free(s, sizeof(*s));
}

START_TEST(test_spawn_all_succeed) {
  shared_t *s = make(4);
  ck_assert_int_eq(bench_spawn(4, child, s, "test", 30, 5, &s->bar), 0);
  for (int r = 0; r < 4; r++) {
    ck_assert_int_eq(s->seen[r], r + 100);
    ck_assert_int_eq(s->after[r], 1);
  }
  drop(s);
}
END_TEST

START_TEST(test_spawn_failure_releases_peers) {
  shared_t *s = make(4);
  s->fail_rank = 2;
  ck_assert_int_eq(bench_spawn(4, child, s, "test", 30, 5, &s->bar), -1);
  for (int r = 0; r < 4; r++)
    ck_assert_int_eq(s->seen[r], r + 100);
  /* the others were not left waiting for rank 2: the barrier was aborted */
  ck_assert_int_eq(s->after[0], -1);
  ck_assert_int_eq(s->after[3], -1);
  ck_assert_int_eq(s->after[2], 0);
  drop(s);
}
END_TEST

START_TEST(test_spawn_timeout_kills) {
  shared_t *s = make(2);
  s->hang = 1;
  time_t t0 = time(NULL);
  ck_assert_int_eq(bench_spawn(2, child, s, "test", 1, 1, &s->bar), -1);
  ck_assert_int_lt(time(NULL) - t0, 10);
  ck_assert_int_eq(s->after[0], 0); /* killed before the barrier */
  drop(s);
}
END_TEST

typedef struct {
  bench_barrier_t *bar;
  int *counter, rounds, bad;
} thr_t;

static void *thr(void *arg) {
  thr_t *t = arg;
  for (int i = 0; i < t->rounds; i++) {
    __atomic_add_fetch(t->counter, 1, __ATOMIC_RELAXED);
    if (bench_barrier_wait(t->bar) != 0)
      t->bad++;
    /* every thread has added for round i and none for round i+1 yet */
    if (__atomic_load_n(t->counter, __ATOMIC_RELAXED) < 4 * (i + 1))
      t->bad++;
    if (bench_barrier_wait(t->bar) != 0)
      t->bad++;
  }
  return NULL;
}

START_TEST(test_barrier_threads_and_abort) {
  bench_barrier_t bar;
  int counter = 0;
  pthread_t th[4];
  thr_t t[4];
  ck_assert_int_eq(bench_barrier_init(&bar, 4, 0), 0);
  for (int i = 0; i < 4; i++) {
    t[i] = (thr_t){.bar = &bar, .counter = &counter, .rounds = 200};
    pthread_create(&th[i], NULL, thr, &t[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    ck_assert_int_eq(t[i].bad, 0);
  }
  ck_assert_int_eq(counter, 800);
  bench_barrier_abort(&bar);
  ck_assert_int_eq(bench_barrier_wait(&bar), -1);
  bench_barrier_destroy(&bar);
}
END_TEST

TCase *bench_tcase_spawn(void) {
  TCase *tc = tcase_create("spawn");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_spawn_all_succeed);
  tcase_add_test(tc, test_spawn_failure_releases_peers);
  tcase_add_test(tc, test_spawn_timeout_kills);
  tcase_add_test(tc, test_barrier_threads_and_abort);
  return tc;
}
