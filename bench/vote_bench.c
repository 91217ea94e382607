/* SPDX-License-Identifier: MIT
 * planccl-votebench: what automatic registration's per-call vote costs (shim/comm/comm_vote.c, a
 * round on a board in shared host memory) between forked ranks on this host, next to a bootstrap
 * allgather of the same 8 bytes per rank, the other way the ranks could agree. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_spawn.h"
#include "bench_time.h"
#include "bootstrap.h"
#include "comm_vote.h"
#include "param.h"

#define MAX_ROUNDS 1000000

typedef struct {
  pcl_bootstrap_handle_t handle;
  int nranks, rounds, boot_rounds;
  double vote_med, vote_p99, boot_med, boot_p99; /* rank 0's, us */
} shared_t;

static void stats(double *t, int n, double *med, double *p99) {
  *med = bench_sorted_stats(t, n, 0.99, p99);
}

static void *g_board;

static int rank_main(int rank, void *arg) {
  shared_t *sh = arg;
  const int nranks = sh->nranks;
  pcl_bootstrap_t *b = NULL;
  /* Every rank's buffers in slot 1: the vote of a call on known memory. */
  pcl_vote_t mine = {.kind = PCL_VOTE_AUTO, .side = {{.held = 2}, {.held = 2}}};
  pcl_vote_outcome_t o;
  pcl_vote_ledger_t L;
  uint64_t all[PCL_VOTE_MAX_RANKS];
  const int warm = 1000;
  double *t = malloc(sizeof(double) *
                     (size_t)(sh->rounds > sh->boot_rounds ? sh->rounds : sh->boot_rounds));
  int rc = 1;
  if (t == NULL || pcl_bootstrap_create(&sh->handle, rank, nranks, NULL, &b) != ncclSuccess)
    goto out;
  pcl_vote_ledger_init(&L, g_board, nranks, rank, 30, NULL, NULL, NULL);
  for (int i = 0; i < warm + sh->rounds; i++) {
    double a = bench_now_us();
    if (pcl_vote_round(&L, mine, &o) != ncclSuccess || o.action != PCL_VOTE_USE_AUTO ||
        o.slot[0] != 1)
      goto out;
    if (i >= warm)
      t[i - warm] = bench_now_us() - a;
  }
  if (rank == 0)
    stats(t, sh->rounds, &sh->vote_med, &sh->vote_p99);
  for (int i = 0; i < 10 + sh->boot_rounds; i++) {
    all[rank] = (uint64_t)i;
    double a = bench_now_us();
    if (pcl_bootstrap_allgather(b, all, sizeof(all[0])) != ncclSuccess)
      goto out;
    if (i >= 10)
      t[i - 10] = bench_now_us() - a;
  }
  if (rank == 0)
    stats(t, sh->boot_rounds, &sh->boot_med, &sh->boot_p99);
  rc = 0;
out:
  pcl_bootstrap_destroy(b);
  free(t);
  return rc;
}

int main(int argc, char **argv) {
  int nranks = 2, rounds = 100000;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-r") && i + 1 < argc)
      nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: planccl-votebench [-r RANKS (2..%d)] [-n ROUNDS (1..%d)]\n",
              PCL_VOTE_MAX_RANKS, MAX_ROUNDS);
      return 2;
    }
  }
  if (nranks < 2 || nranks > PCL_VOTE_MAX_RANKS || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "planccl-votebench: -r must be 2..%d and -n 1..%d\n", PCL_VOTE_MAX_RANKS,
            MAX_ROUNDS);
    return 2;
  }
  shared_t *sh = bench_shm_alloc(sizeof(*sh));
  g_board = bench_shm_alloc(pcl_vote_board_bytes(nranks));
  if (sh == NULL || g_board == NULL)
    return 1;
  sh->nranks = nranks;
  sh->rounds = rounds;
  sh->boot_rounds = rounds / 100 > 100 ? rounds / 100 : 100;
  (void)pcl_param_socket_ifname(); /* resolved before forking: no lock held in a child */
  (void)pcl_param_bootstrap_timeout_s();
  (void)pcl_param_host_id();
  if (pcl_bootstrap_root_create(&sh->handle) != ncclSuccess)
    return 1;
  if (bench_spawn(nranks, rank_main, sh, "planccl-votebench", 600, 10, NULL) != 0)
    return 1;
  printf("# %d ranks (processes), rank 0's time per round\n", nranks);
  printf("# vote round (shared host memory): median %.3f us, p99 %.3f us over %d rounds\n",
         sh->vote_med, sh->vote_p99, rounds);
  printf("# bootstrap allgather of 8 bytes:  median %.3f us, p99 %.3f us over %d rounds\n",
         sh->boot_med, sh->boot_p99, sh->boot_rounds);
  printf("# result: ok\n");
  return 0;
}
