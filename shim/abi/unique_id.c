/* SPDX-License-Identifier: MIT
 * The layout of an ncclUniqueId: bytes 0..39 are the real NCCL's id (the real library reads only
 * those), bytes 40..127 are planccl's part: the bootstrap handle of transport/bootstrap.h, whose
 * root thread this process starts. All zero when planccl cannot run its own part here (disabled,
 * no CUDA device): communicators made from such an id run pass-through. */
#include <string.h>
#include "bootstrap.h"
#include "comm_int.h"
#include "pcl_check.h"
#include "shim_int.h"

_Static_assert(PCL_UNIQUE_ID_PCL_OFFSET == PCL_BOOTSTRAP_HANDLE_OFFSET, "same layout");

ncclResult_t pcl_unique_id_fill(ncclUniqueId *id) {
  pcl_bootstrap_handle_t h;
  memset(&h, 0, sizeof(h));
  if (pcl_setup_possible())
    PCL_CHECK(pcl_bootstrap_root_create(&h));
  memcpy(id->internal + PCL_UNIQUE_ID_PCL_OFFSET, &h, sizeof(h));
  return ncclSuccess;
}

int pcl_unique_id_get(const ncclUniqueId *id, pcl_bootstrap_handle_t *h) {
  memcpy(h, id->internal + PCL_UNIQUE_ID_PCL_OFFSET, sizeof(*h));
  return pcl_bootstrap_handle_valid(h);
}
