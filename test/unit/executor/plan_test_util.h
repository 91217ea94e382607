/* SPDX-License-Identifier: MIT
 * Helpers shared by the plan test suites: locating test data and reading files. */
#ifndef PCL_PLAN_TEST_UTIL_H
#define PCL_PLAN_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *test_src_dir(void) {
  const char *s = getenv("PCL_SOURCE_DIR");
#ifdef PCL_TEST_SOURCE_DIR
  if (s == NULL || s[0] == '\0')
    s = PCL_TEST_SOURCE_DIR;
#endif
  return s ? s : ".";
}

/* "<source>/test/data/plans/<rel>" into buf. */
static inline const char *plan_path(char *buf, size_t len, const char *rel) {
  snprintf(buf, len, "%s/test/data/plans/%s", test_src_dir(), rel);
  return buf;
}

/* Whole file, NUL-terminated, malloc'd (plain malloc: not counted by the leak checker). */
static inline char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  if (b) {
    b[n] = '\0';
    if (len)
      *len = (size_t)n;
  }
  return b;
}

/* Replaces every occurrence of `from` by `to` (malloc'd result). */
static inline char *replace_all(const char *s, const char *from, const char *to) {
  size_t fl = strlen(from), tl = strlen(to), n = 0;
  for (const char *p = strstr(s, from); p; p = strstr(p + fl, from))
    n++;
  char *out = malloc(strlen(s) + n * (tl > fl ? tl - fl : 0) + 1), *o = out;
  for (const char *p = s;;) {
    const char *q = strstr(p, from);
    if (q == NULL) {
      strcpy(o, p);
      break;
    }
    memcpy(o, p, (size_t)(q - p));
    o += q - p;
    memcpy(o, to, tl);
    o += tl;
    p = q + fl;
  }
  return out;
}

#endif
