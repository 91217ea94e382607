/* SPDX-License-Identifier: MIT
 * A program linked like an NCCL user's (-lnccl against <prefix>/lib/nccl): it must record
 * libnccl.so.2, start from that directory, and reach planccl. */
#include <stdio.h>
#include <nccl.h>

int main(void) {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess)
    return 1;
  printf("nccl version %d through %s\n", v, ncclGetErrorString(ncclSuccess));
  return 0;
}
