/* SPDX-License-Identifier: MIT
 * The host side of a communicator's abort flag: a 32-bit word the application's thread sets once
 * (release) and proxy, socket and transport threads poll (acquire); kernels read a mapped copy. */
#ifndef PCL_ABORT_H
#define PCL_ABORT_H

#include <stdint.h>

/* 1 once the flag is set; NULL means "no flag", never aborted. */
static inline int pcl_abort_requested(const volatile uint32_t *flag) {
  return flag != NULL && __atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0;
}

static inline void pcl_abort_set(volatile uint32_t *flag) {
  if (flag != NULL)
    __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
}

#endif
