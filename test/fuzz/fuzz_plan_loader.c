/* SPDX-License-Identifier: MIT
 * libFuzzer target for the plan loader: any byte string must either load into a plan whose
 * layout math is safe for a spread of sizes, or be refused with a message; never crash, hang
 * or leak (pcl allocations are counted after every input). */
#include <stdint.h>
#include <stdlib.h>

#include "alloc.h"
#include "plan.h"

static void exercise(const pcl_plan_t *p) {
  uint64_t sizes[] = {0,
                      16,
                      32,
                      1024,
                      4096,
                      (uint64_t)p->n_gpus * 4096,
                      1u << 20,
                      3u << 20,
                      p->min_message_size,
                      p->max_message_size,
                      UINT64_MAX};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    uint64_t in, out;
    (void)pcl_plan_scratch_bytes_bound(p, sizes[s]);
    if (!pcl_plan_size_runnable(p, sizes[s]))
      continue;
    (void)pcl_plan_scratch_bytes(p, sizes[s]);
    if (pcl_plan_buffer_bytes(p, sizes[s], &in, &out) != 0)
      abort(); /* runnable implies this */
    for (int r = 0; r < p->n_gpus; r++) {
      pcl_plan_layout_t l;
      if (pcl_plan_layout(p, r, in, out, &l) != ncclSuccess)
        abort(); /* and this */
      const pcl_plan_gpu_t *g = &p->gpus[r];
      for (int b = 0; b < g->n_blocks; b++)
        for (int k = 0; k < g->blocks[b].n_ops; k++) {
          const pcl_plan_op_t *op = &g->blocks[b].ops[k];
          if (op->type == PCL_PLAN_OP_PIPELINE)
            (void)pcl_plan_pipeline_iters(&l, op);
          for (int i = 0; i < op->n_src; i++) {
            uint64_t off, len;
            pcl_plan_tbg_slice(pcl_plan_chunk_size(&l, op->src[i].type, op->src[i].size), l.align,
                               op->tbg_id, op->tbg_size, &off, &len);
            if (off + len > pcl_plan_chunk_size(&l, op->src[i].type, op->src[i].size))
              abort();
          }
        }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pcl_plan_t *p = NULL;
  char err[512];
  if (pcl_plan_load_buffer("fuzz.json", (const char *)data, size, &p, err, sizeof(err)) ==
      ncclSuccess) {
    exercise(p);
    pcl_plan_destroy(p);
  }
  if (pcl_alloc_outstanding() != 0)
    abort(); /* a leak on some path */
  return 0;
}
