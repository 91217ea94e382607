/* SPDX-License-Identifier: MIT
 * Helpers shared by the tuning suites: a good tuning file for 2-rank in-place allreduce (one
 * shape, three ranges), variants of it with one piece of text replaced, and the identity it
 * was measured on. */
#ifndef PCL_TUNE_TEST_UTIL_H
#define PCL_TUNE_TEST_UTIL_H

#include <stdio.h>
#include <string.h>

#include "pcl_test.h"
#include "plan_test_util.h"
#include "tune.h"

/* Ranges: [64, 2048] a_wide; [2080, 4096] extra (the tuned-only plan of the registry suite);
 * [4128, 65536] NCCL. */
#define TUNE_GOOD                                                                                  \
  "{\"planccl_tune\": 1,\n"                                                                        \
  " \"identity\": {\"gpu\": \"NVIDIA H200\", \"gpus\": 8, \"link\": \"nvlink\",\n"                 \
  "              \"driver\": \"580.65.06\", \"cuda\": \"13.0\", \"planccl\": \"0.1.0\",\n"         \
  "              \"nccl\": \"2.30.7\", \"plans_digest\": \"00000000000000aa\"},\n"                 \
  " \"entries\": [\n"                                                                              \
  "  {\"collective\": \"allreduce\", \"world\": 2, \"ranks_per_node\": 2, \"ranks_per_gpu\": 1,\n" \
  "   \"process_model\": \"threads\", \"inplace\": true, \"registered\": false,\n"                 \
  "   \"ranges\": [\n"                                                                             \
  "    {\"min\": 64, \"max\": 2048, \"path\": \"a_wide\", \"us\": 5.4,\n"                          \
  "     \"runner_up\": \"nccl\", \"runner_up_us\": 6.25},\n"                                       \
  "    {\"min\": 2080, \"max\": 4096, \"path\": \"extra\", \"us\": 6},\n"                          \
  "    {\"min\": 4128, \"max\": 65536, \"path\": \"nccl\", \"us\": 9.5,\n"                         \
  "     \"runner_up\": \"a_wide\", \"runner_up_us\": 10}]}]}\n"

/* TUNE_GOOD with `from` (which must occur) replaced by `to`, malloc'd. */
static inline char *tune_text(const char *from, const char *to) {
  ck_assert_msg(strstr(TUNE_GOOD, from) != NULL, "'%s' is not in the file", from);
  return replace_all(TUNE_GOOD, from, to);
}

/* Parses text as "t.json"; on refusal err holds the message. */
static inline ncclResult_t tune_parse(const char *text, pcl_tune_t **t, char *err, size_t n) {
  return pcl_tune_load_buffer("t.json", text, strlen(text), t, err, n);
}

/* The good file, parsed. */
static inline pcl_tune_t *tune_good(void) {
  char err[512];
  pcl_tune_t *t = NULL;
  ck_assert_int_eq(tune_parse(TUNE_GOOD, &t, err, sizeof(err)), ncclSuccess);
  ck_assert_ptr_nonnull(t);
  return t;
}

/* The identity TUNE_GOOD names. */
static inline pcl_tune_identity_t tune_here(void) {
  pcl_tune_identity_t id = {.gpus = 8, .link = PCL_TUNE_LINK_NVLINK, .plans_digest = 0xaa};
  snprintf(id.gpu, sizeof(id.gpu), "NVIDIA H200");
  snprintf(id.driver, sizeof(id.driver), "580.65.06");
  snprintf(id.cuda, sizeof(id.cuda), "13.0");
  snprintf(id.planccl, sizeof(id.planccl), "0.1.0");
  snprintf(id.nccl, sizeof(id.nccl), "2.30.7");
  return id;
}

#endif
