/* SPDX-License-Identifier: MIT
 * The per-call agreement of automatic registration: each rank of a one-host communicator posts
 * its vote for a call on a board in shared host memory and reads everyone's, so that every rank
 * takes the same registered or unregistered path even though each sees only its own buffers. */
#ifndef PCL_COMM_VOTE_H
#define PCL_COMM_VOTE_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>

#define PCL_VOTE_NONE 0xffffffffu /* no generation */
#define PCL_VOTE_MAX_RANKS 64     /* ranks of one host that may vote */

typedef enum {
  PCL_VOTE_NO = 0,       /* this call cannot run registered here (capture, group, memory kind) */
  PCL_VOTE_EXPLICIT = 1, /* the buffers are in ncclCommRegister'ed ranges or windows */
  PCL_VOTE_HIT = 2,      /* an auto-registration of generation `gen` still holds these buffers */
  PCL_VOTE_MISS = 3,     /* not auto-registered (yet); `gen`: a stale one of the same addresses */
} pcl_vote_kind_t;

typedef struct {
  uint32_t kind; /* pcl_vote_kind_t */
  uint32_t gen;  /* HIT: the generation; MISS: the stale generation to drop, or PCL_VOTE_NONE */
} pcl_vote_t;

typedef enum {
  PCL_VOTE_UNREGISTERED = 0, /* every rank runs the call unregistered */
  PCL_VOTE_USE_EXPLICIT = 1, /* every rank uses its explicit registration */
  PCL_VOTE_USE_GEN = 2,      /* every rank uses its auto-registration of generation `gen` */
  PCL_VOTE_EXCHANGE = 3,     /* every rank registers the call's buffers anew (collective) */
} pcl_vote_action_t;

typedef struct {
  int action; /* pcl_vote_action_t */
  uint32_t gen;
  /* Generations every rank drops before anything else (alike everywhere, so the ranks' tables
   * keep the same generations): the stale ones named by misses, and on an exchange the hits,
   * which the new generation replaces. Sorted, without repeats. */
  uint32_t drop[PCL_VOTE_MAX_RANKS]; /* each rank names at most one */
  int ndrop;
} pcl_vote_outcome_t;

/* Pure: the outcome every rank computes from the same votes of all n (<= PCL_VOTE_MAX_RANKS)
 * ranks. */
void pcl_vote_decide(const pcl_vote_t *votes, int n, pcl_vote_outcome_t *out);

/* Bytes of a board for n ranks (two slots per rank, a cache line each). */
size_t pcl_vote_board_bytes(int n);

/* Posts this rank's vote for round `seq` (1, 2, ... alike on every rank) and waits for every
 * rank's vote of that round into votes[n]. A rank can be at most one round ahead of any other
 * (it waits for all), so two slots per rank, by parity, suffice: nobody overwrites a slot that
 * someone may still read. Gives up with ncclRemoteError after timeout_s, ncclInternalError when
 * *abort_flag is set (may be NULL). board is zeroed memory shared by the n ranks. */
ncclResult_t pcl_vote_round(void *board, int n, int rank, uint64_t seq, pcl_vote_t mine,
                            pcl_vote_t *votes, int timeout_s, const volatile uint32_t *abort_flag);

#endif
