/* SPDX-License-Identifier: MIT
 * The JSON text of a plan before and after yajl: refuses what is not a JSON object (binary data,
 * control bytes, nesting too deep) and places yajl's parse errors, each with a line and column,
 * so that a refusal says where the text went wrong, not only that it did. */
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_parse.h>
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

int pcl_plan_json_prescan(const char *s, size_t len, int max_depth, char *why, size_t n) {
  size_t i = 0;
  int line, col;
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
    i++;
  if (i == len) {
    snprintf(why, n, "empty file: a plan is a JSON object");
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

void pcl_plan_json_locate(const char *s, size_t len, char *why, size_t n) {
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
