/* SPDX-License-Identifier: MIT
 * What the simulator's suites share: loading a plan that must load, running one simulator
 * configuration, and asserting a PASS with the simulator's message on failure. */
#ifndef PCL_SIM_TEST_UTIL_H
#define PCL_SIM_TEST_UTIL_H

#include <string.h>
#include "alloc.h"
#include "dtype.h"
#include "pcl_test.h"
#include "plan.h"
#include "sim.h"

static inline pcl_plan_t *load_ok(const char *path) {
  pcl_plan_t *p = NULL;
  char err[1024] = "";
  ncclResult_t rc = pcl_plan_load(path, &p, err, sizeof(err));
  ck_assert_msg(rc == ncclSuccess && p, "%s refused: %s", path, err);
  return p;
}

static inline pcl_plan_t *load_text(const char *name, const char *text) {
  pcl_plan_t *p = NULL;
  char err[1024] = "";
  ncclResult_t rc = pcl_plan_load_buffer(name, text, strlen(text), &p, err, sizeof(err));
  ck_assert_msg(rc == ncclSuccess && p, "%s refused: %s", name, err);
  return p;
}

/* Runs one configuration; returns the verdict and keeps the message in *out. */
static inline pcl_sim_verdict_t run(const pcl_plan_t *p, ncclDataType_t dt, ncclRedOp_t op,
                                    pcl_sim_packet_t pk, uint64_t max_bytes, int nseeds, int any_op,
                                    pcl_sim_result_t *out) {
  pcl_sim_opts_t o;
  pcl_sim_opts_init(&o);
  o.dtype = dt;
  o.op = op;
  o.packet = pk;
  o.max_bytes = max_bytes;
  o.nseeds = nseeds;
  o.call_op_everywhere = any_op;
  ck_assert_int_eq(pcl_sim_run(p, &o, out), ncclSuccess);
  return out->verdict;
}

/* PASS (or, with allow_skip, SKIPPED: op not applicable, no size holds whole elements). */
static inline void expect_ok(const pcl_plan_t *p, const char *path, ncclDataType_t dt,
                             ncclRedOp_t op, pcl_sim_packet_t pk, uint64_t max_bytes, int nseeds,
                             int any_op, int allow_skip) {
  pcl_sim_result_t *r = pcl_calloc(1, sizeof(*r), "result");
  pcl_sim_verdict_t v = run(p, dt, op, pk, max_bytes, nseeds, any_op, r);
  ck_assert_msg(v == PCL_SIM_PASS || (allow_skip && v == PCL_SIM_SKIPPED), "%s %s/%s/%s: %s: %s",
                path, pcl_dtype_name(dt), pcl_sim_op_name(op), pk == PCL_SIM_LL8 ? "ll8" : "ll16",
                pcl_sim_verdict_name(v), r->message);
  pcl_free(r);
}

#endif
