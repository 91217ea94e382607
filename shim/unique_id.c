/* SPDX-License-Identifier: MIT
 * The layout of an ncclUniqueId: bytes 0..39 are the real NCCL's id (the real library reads only
 * those), bytes 40..127 are planccl's part (its bootstrap handle, see transport/bootstrap.h). */
#include <stdint.h>
#include <string.h>
#include "shim_int.h"

_Static_assert(PCL_UNIQUE_ID_PCL_OFFSET + 8 <= NCCL_UNIQUE_ID_BYTES, "planccl part fits");

ncclResult_t pcl_unique_id_fill(ncclUniqueId *id) {
  uint64_t magic = PCL_UNIQUE_ID_MAGIC;
  memset(id->internal + PCL_UNIQUE_ID_PCL_OFFSET, 0,
         NCCL_UNIQUE_ID_BYTES - PCL_UNIQUE_ID_PCL_OFFSET);
  memcpy(id->internal + PCL_UNIQUE_ID_PCL_OFFSET, &magic, sizeof(magic));
  return ncclSuccess;
}

int pcl_unique_id_is_planccl(const ncclUniqueId *id) {
  uint64_t magic;
  memcpy(&magic, id->internal + PCL_UNIQUE_ID_PCL_OFFSET, sizeof(magic));
  return magic == PCL_UNIQUE_ID_MAGIC;
}
