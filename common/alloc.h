/* SPDX-License-Identifier: MIT
 * Host allocation helpers with a process-wide outstanding counter, so every test can assert that
 * nothing it created is left behind. */
#ifndef PCL_ALLOC_H
#define PCL_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* Zeroed allocation of n elements of size sz; NULL (with a WARN naming `what`) on failure. */
void *pcl_calloc(size_t n, size_t sz, const char *what);
void *pcl_realloc(void *p, size_t old_n, size_t new_n, size_t sz, const char *what);
char *pcl_strdup(const char *s, const char *what);
void pcl_free(void *p);

/* Number of pcl_* allocations not yet freed. */
int64_t pcl_alloc_outstanding(void);

#define PCL_CALLOC(ptr, n, what) ((ptr) = pcl_calloc((n), sizeof(*(ptr)), (what)))

#endif
