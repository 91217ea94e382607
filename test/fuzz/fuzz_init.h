/* SPDX-License-Identifier: MIT
 * The LLVMFuzzerInitialize of the targets that feed junk on purpose: logging off (every refused
 * input would be a line) and a short bootstrap timeout. Included by exactly one file per target. */
#ifndef PCL_FUZZ_INIT_H
#define PCL_FUZZ_INIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("PLANCCL_DEBUG", "NONE", 1);
  setenv("PLANCCL_BOOTSTRAP_TIMEOUT_S", "5", 1);
  return 0;
}

#endif
