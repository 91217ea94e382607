/* SPDX-License-Identifier: MIT
 * The per-call agreement of automatic registration: each rank of a one-host communicator posts
 * its vote for a call on a board in shared host memory and reads everyone's, so that every rank
 * takes the same registered or unregistered path even though each sees only its own buffers. */
#ifndef PCL_COMM_VOTE_H
#define PCL_COMM_VOTE_H

#include <stddef.h>
#include <stdint.h>
#include <nccl.h>
#include "mem.h"

#define PCL_VOTE_MAX_RANKS 64 /* ranks of one host that may vote */
#define PCL_VOTE_SLOTS 64     /* slots of the ranks' registration tables (a bit each) */

typedef enum {
  PCL_VOTE_NO = 0,       /* this call cannot run registered here (capture, group, memory kind) */
  PCL_VOTE_EXPLICIT = 1, /* the buffers are in ncclCommRegister'ed ranges or windows */
  PCL_VOTE_AUTO = 2,     /* automatic registration: `side` says where the buffers are */
} pcl_vote_kind_t;

/* One side of the call (its input [0] or output [1]) on one rank. */
typedef struct {
  uint64_t held; /* table slots whose registered allocation holds this buffer, unchanged */
  uint64_t ptr;  /* the buffer, in this rank's address space */
  uint64_t span; /* the base of the allocations holding it: what an exchange registers */
} pcl_vote_side_t;

typedef struct {
  uint32_t kind;        /* pcl_vote_kind_t; the fields below only for PCL_VOTE_AUTO */
  uint32_t out_in_span; /* 1: this rank's output lies inside its input's span */
  uint64_t stale;       /* table slots whose memory was freed or remapped since their exchange */
  pcl_vote_side_t side[2];
} pcl_vote_t;

typedef enum {
  PCL_VOTE_UNREGISTERED = 0, /* every rank runs the call unregistered */
  PCL_VOTE_USE_EXPLICIT = 1, /* every rank uses its explicit registration */
  PCL_VOTE_USE_AUTO = 2,     /* every rank uses slot[0] and slot[1] (a view at the votes' ptrs) */
} pcl_vote_action_t;

#define PCL_VOTE_EXCHANGE (-1) /* slot[k]: every rank registers its side k's span anew */
#define PCL_VOTE_AS_INPUT (-2) /* slot[1]: the output lies in the input's new registration */

typedef struct {
  int action;    /* pcl_vote_action_t */
  int slot[2];   /* USE_AUTO: a slot every rank holds the side in, or one of the above */
  uint64_t drop; /* slots every rank drops (those any rank found stale): marked when the round
                  * is read, freed before this round's exchanges (USE_AUTO) or at the rank's
                  * next call outside groups and captures, so the tables are alike again
                  * whenever every rank votes from them */
} pcl_vote_outcome_t;

/* Pure: the outcome every rank computes from the same votes of all n (<= PCL_VOTE_MAX_RANKS)
 * ranks. A side held in several common slots uses the lowest. */
void pcl_vote_decide(const pcl_vote_t *votes, int n, pcl_vote_outcome_t *out);

/* Pure, what a rank's table needs to stay alike everywhere and to vote from (comm_auto_table.c).
 * The slot an exchange fills: the lowest one not live (bit s of `live`), else the live one of the
 * oldest generation, never `keep` (a slot the call's other side uses; negative: none). */
int pcl_vote_pick_slot(uint64_t live, const uint32_t gen[PCL_VOTE_SLOTS], int keep);
/* 1 when the allocations behind a buffer (b[0 .. nb), ascending, nb >= 1) are a run of those a
 * slot exchanged (have[0 .. nhave), ascending), each at the same address with the same size and
 * driver buffer id: the slot still holds that buffer's memory. */
int pcl_vote_chunks_held(const pcl_mem_chunk_t *have, int nhave, const pcl_mem_chunk_t *b, int nb);

/* Rounds a rank may post ahead of the slowest reader of the board. A rank that votes NO (inside
 * a group or a capture) posts without waiting for the others and reads the round later, so the
 * ranks of a communicator never wait for each other there: NCCL lets a group issue calls on
 * several communicators in a different order on each rank. More rounds than this ahead, it waits
 * until the others have read the oldest. */
#define PCL_VOTE_DEPTH 64

/* Bytes of a board for n ranks: a header line, then per rank a line of what it has read and
 * PCL_VOTE_DEPTH slots, two cache lines each. */
size_t pcl_vote_board_bytes(int n);

/* Called once per round, in round order, with the round's outcome, when this rank reads it (for
 * a round it voted NO in, possibly during a later call): the drops of every round must be
 * applied in the same order on every rank, so that the tables stay alike. */
typedef void (*pcl_vote_apply_fn)(void *ctx, const pcl_vote_outcome_t *o);

/* One rank's view of a board (zeroed memory shared by the n ranks). Not thread-safe: the calls
 * of one communicator are serialised by the caller. */
typedef struct {
  void *board;
  int n, rank;
  uint64_t posted; /* rounds this rank has posted: 1, 2, ... alike on every rank */
  uint64_t read;   /* rounds whose outcome this rank has applied (<= posted) */
  int timeout_s;   /* without progress for this long a wait gives up (ncclRemoteError) */
  const volatile uint32_t *abort_flag; /* may be NULL; set: a wait ends with ncclInternalError */
  pcl_vote_apply_fn apply;
  void *ctx;
  pcl_vote_outcome_t last;              /* the outcome of round `read` */
  pcl_vote_t votes[PCL_VOTE_MAX_RANKS]; /* and everyone's votes in it */
  uint64_t room_until; /* rounds up to this one are known to have room (every rank's read) */
  int failed;          /* a wait failed here or on another rank: every later call fails */
} pcl_vote_ledger_t;

void pcl_vote_ledger_init(pcl_vote_ledger_t *L, void *board, int n, int rank, int timeout_s,
                          const volatile uint32_t *abort_flag, pcl_vote_apply_fn apply, void *ctx);

/* Reads, in order, the rounds this rank posted and has not read yet: with block = 0 only those
 * every rank has posted already, with block = 1 all of them, waiting for the others. */
ncclResult_t pcl_vote_catch_up(pcl_vote_ledger_t *L, int block);

/* Posts `mine` as the next round. A NO vote returns at once with *o = unregistered and no drops
 * (any NO makes the round unregistered; its drops are applied when a later call reads it).
 * Any other vote waits for everyone's votes, reads every round up to this one in order and
 * returns this one's outcome in *o; a vote made from the table should be made after
 * pcl_vote_catch_up(L, 1), so that the table holds every earlier round's drops. A wait that makes
 * no progress for timeout_s returns ncclRemoteError and marks the board dead, so every rank's later
 * rounds fail at once instead of waiting for a rank that gave up; an abort returns
 * ncclInternalError. Both are final. */
ncclResult_t pcl_vote_round(pcl_vote_ledger_t *L, pcl_vote_t mine, pcl_vote_outcome_t *o);

#endif
