/* SPDX-License-Identifier: MIT
 * Counted host allocations: every pcl_calloc/pcl_strdup bumps one atomic counter and every
 * pcl_free drops it, so tests prove that create/destroy pairs leave nothing behind. */
#include "alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "log.h"

static atomic_llong outstanding;

void *pcl_calloc(size_t n, size_t sz, const char *what) {
  if (n == 0 || sz == 0)
    n = sz = 1; /* a valid, freeable pointer for empty arrays */
  void *p = calloc(n, sz);
  if (p == NULL) {
    PCL_WARN(PCL_LOG_ALL, "out of memory allocating %zu x %zu bytes for %s", n, sz,
             what ? what : "?");
    return NULL;
  }
  atomic_fetch_add_explicit(&outstanding, 1, memory_order_relaxed);
  return p;
}

void *pcl_realloc(void *p, size_t old_n, size_t new_n, size_t sz, const char *what) {
  if (p == NULL)
    return pcl_calloc(new_n, sz, what);
  if (new_n != 0 && sz > SIZE_MAX / new_n) {
    PCL_WARN(PCL_LOG_ALL, "allocation size overflow for %s", what ? what : "?");
    return NULL;
  }
  size_t bytes = new_n * sz;
  void *q = realloc(p, bytes != 0 ? bytes : 1);
  if (q == NULL) {
    PCL_WARN(PCL_LOG_ALL, "out of memory growing %s to %zu x %zu bytes", what ? what : "?", new_n,
             sz);
    return NULL;
  }
  if (new_n > old_n)
    memset((char *)q + old_n * sz, 0, (new_n - old_n) * sz);
  return q;
}

char *pcl_strdup(const char *s, const char *what) {
  if (s == NULL)
    return NULL;
  size_t len = strlen(s) + 1;
  char *d = pcl_calloc(len, 1, what);
  if (d)
    memcpy(d, s, len);
  return d;
}

void pcl_free(void *p) {
  if (p == NULL)
    return;
  free(p);
  atomic_fetch_sub_explicit(&outstanding, 1, memory_order_relaxed);
}

int64_t pcl_alloc_outstanding(void) {
  return atomic_load_explicit(&outstanding, memory_order_relaxed);
}
