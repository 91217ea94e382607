/* SPDX-License-Identifier: MIT
 * The recording fake NCCL's control block: every call is appended with its name and arguments;
 * tests choose the return codes. Tests reach it with dlopen(path, RTLD_NOLOAD) + dlsym. */
#ifndef PCL_FAKE_NCCL_H
#define PCL_FAKE_NCCL_H

#include <stdint.h>

#define FAKE_MAX_CALLS 8192
#define FAKE_MAX_ARGS 12   /* ncclPutSignal's 11 */
#define FAKE_VERSION 22999 /* distinct from every real NCCL, so tests see whose version it is */
#define FAKE_ID_BYTE 0xab  /* bytes 0..39 of the fake's unique ids */

struct fake_call {
  char name[40];
  uint64_t a[FAKE_MAX_ARGS];
};

struct fake_result {
  char name[40];
  int result;
};

struct fake_state {
  int ncalls;
  struct fake_call calls[FAKE_MAX_CALLS];
  struct fake_result results[32]; /* name -> result returned by that function (persistent) */
  int nresults;
  int async_in_progress; /* ncclCommGetAsyncError reports ncclInProgress this many more times */
  int group_depth;
  int foreign_comms; /* calls that received a comm the fake did not create */
  void *last_comm;   /* the most recent comm the fake created */
  int live_comms;
  char last_error[128];
};

typedef struct fake_state *(*fake_state_fn)(void);

#endif
