/* SPDX-License-Identifier: MIT
 * The JSON text of a plan or tuning file, from the file to yajl's tree: reads the file, refuses
 * what is not a JSON object (binary data, control bytes, nesting too deep) and places yajl's
 * parse errors, each with a line and column, so that a refusal says where the text went wrong. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <yajl/yajl_parse.h>
#include "alloc.h"
#include "plan_json_int.h"

/* Line and column (both from 1) of byte `off`. */
static void where(const char *s, size_t off, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < off; i++) {
    if (s[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

/* 1 when s[0 .. len) may be JSON text: it starts like a JSON value, has no control bytes but
 * whitespace outside strings and none inside, nests at most max_depth; else 0 with why (line and
 * column of the first offence). The object shape is checked after parsing. */
static int prescan(const char *s, size_t len, int max_depth, const char *what, char *why,
                   size_t n) {
  size_t i = 0;
  int line, col;
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
    i++;
  if (i == len) {
    snprintf(why, n, "empty file: %s is a JSON object", what);
    return 0;
  }
  if (strchr("{[\"-0123456789tfn", s[i]) == NULL || s[i] == '\0') { /* cannot start JSON */
    where(s, i, &line, &col);
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x20 && ch < 0x7f)
      snprintf(why, n, "not JSON: starts with '%c' at line %d, column %d", ch, line, col);
    else
      snprintf(why, n, "not JSON: byte 0x%02x at line %d, column %d (binary data?)", ch, line, col);
    return 0;
  }
  int depth = 0, in_str = 0;
  for (; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch < 0x20 && (in_str || (ch != '\t' && ch != '\n' && ch != '\r'))) {
      where(s, i, &line, &col);
      snprintf(why, n, "not JSON text: control byte 0x%02x at line %d, column %d%s", ch, line, col,
               in_str ? " (inside a string)" : "");
      return 0;
    }
    if (in_str) {
      if (ch == '\\')
        i++;
      else if (ch == '"')
        in_str = 0;
    } else if (ch == '"') {
      in_str = 1;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max_depth) {
        where(s, i, &line, &col);
        snprintf(why, n, "JSON nested deeper than %d levels at line %d, column %d", max_depth, line,
                 col);
        return 0;
      }
    } else if (ch == ']' || ch == '}') {
      depth--;
    }
  }
  return 1;
}

/* For text yajl refused: where (line, column, byte) and yajl's reason, into why. */
static void locate(const char *s, size_t len, char *why, size_t n) {
  yajl_handle h = yajl_alloc(NULL, NULL, NULL);
  if (h == NULL) {
    snprintf(why, n, "invalid JSON");
    return;
  }
  size_t off = len;
  yajl_status st = yajl_parse(h, (const unsigned char *)s, len);
  if (st == yajl_status_ok) {
    st = yajl_complete_parse(h); /* the text ends too early */
    off = len;
  } else {
    off = yajl_get_bytes_consumed(h); /* just past the byte yajl choked on */
    if (off > 0)
      off--;
  }
  int line, col;
  where(s, off < len ? off : len, &line, &col);
  if (st == yajl_status_ok) {
    snprintf(why, n, "invalid JSON at line %d, column %d", line, col);
  } else {
    unsigned char *msg = yajl_get_error(h, 0, (const unsigned char *)s, len);
    char first[160] = "parse error";
    if (msg != NULL) {
      snprintf(first, sizeof(first), "%s", (const char *)msg);
      first[strcspn(first, "\n")] = '\0';
      yajl_free_error(h, msg);
    }
    snprintf(why, n, "invalid JSON at line %d, column %d (byte %zu): %s", line, col,
             off < len ? off : len, first);
  }
  yajl_free(h);
}

ncclResult_t pcl_json_parse_text(pcl_plan_ctx_t *c, const char *json, size_t len, int max_depth,
                                 const char *what, yajl_val *root) {
  char why[256];
  *root = NULL;
  if (c->err != NULL && c->errlen > 0)
    c->err[0] = '\0';
  if (json == NULL)
    return pcl_plan_fail(c, NULL, "no text");
  /* Also refuses NUL bytes: yajl_tree_parse wants a NUL-terminated string. */
  if (!prescan(json, len, max_depth, what, why, sizeof(why)))
    return pcl_plan_fail(c, NULL, "%s", why);
  char *text = pcl_calloc(len + 1, 1, "json text");
  if (text == NULL)
    return ncclSystemError;
  memcpy(text, json, len);
  ncclResult_t res = ncclSuccess;
  *root = yajl_tree_parse(text, NULL, 0);
  if (*root == NULL) {
    locate(text, len, why, sizeof(why));
    res = pcl_plan_fail(c, NULL, "%s", why);
  }
  pcl_free(text);
  return res;
}

/* Appends the rest of f to *buf (grown up to max_bytes + 1, so that a longer file shows). */
static ncclResult_t read_all(FILE *f, size_t max_bytes, char **buf, size_t *len) {
  size_t cap = 0;
  for (;;) {
    if (*len == cap) {
      size_t ncap = cap ? cap * 2 : 65536;
      if (ncap > max_bytes + 1)
        ncap = max_bytes + 1;
      if (ncap == cap)
        return ncclSuccess; /* the caller sees len > max_bytes */
      char *nb = pcl_realloc(*buf, cap, ncap, 1, "json file");
      if (nb == NULL)
        return ncclSystemError;
      *buf = nb;
      cap = ncap;
    }
    size_t n = fread(*buf + *len, 1, cap - *len, f);
    *len += n;
    if (n == 0)
      return ncclSuccess;
  }
}

ncclResult_t pcl_json_read_file(const char *path, size_t max_bytes, const char *not_dir, char **out,
                                size_t *len, char *err, size_t errlen) {
  char dummy[1];
  if (err == NULL || errlen == 0) {
    err = dummy;
    errlen = sizeof(dummy);
  }
  *out = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return ncclSystemError;
  }
  ncclResult_t res = ncclSuccess;
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) { /* fopen opens them; reads fail */
    snprintf(err, errlen, "%s: a directory, not %s", path, not_dir);
    res = ncclInvalidArgument;
  } else if ((res = read_all(f, max_bytes, out, len)) != ncclSuccess) {
    snprintf(err, errlen, "%s: out of memory", path);
  } else if (*len > max_bytes) {
    snprintf(err, errlen, "%s: file larger than %zu bytes", path, max_bytes);
    res = ncclInvalidArgument;
  } else if (ferror(f)) {
    snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
    res = ncclSystemError;
  }
  fclose(f);
  if (res != ncclSuccess) {
    pcl_free(*out);
    *out = NULL;
    *len = 0;
  }
  return res;
}
