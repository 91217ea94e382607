/* SPDX-License-Identifier: MIT
 * Around the tuning file's reader: its names, the identity check (does the file describe the
 * machine it is read on), and where the file is looked for (docs/tuning.md). */
#include "tune.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "log.h"

static const char *const link_names[PCL_TUNE_LINK_COUNT] = {"nvlink", "pcie", "shared"};
static const char *const procs_names[PCL_TUNE_PROCS_COUNT] = {"threads", "processes"};

static int from_name(const char *const *names, int n, const char *s) {
  for (int i = 0; s != NULL && i < n; i++)
    if (strcmp(names[i], s) == 0)
      return i;
  return -1;
}

const char *pcl_tune_link_name(int link) {
  return link >= 0 && link < PCL_TUNE_LINK_COUNT ? link_names[link] : "?";
}

const char *pcl_tune_procs_name(int procs) {
  return procs >= 0 && procs < PCL_TUNE_PROCS_COUNT ? procs_names[procs] : "?";
}

int pcl_tune_link_from_name(const char *s) {
  return from_name(link_names, PCL_TUNE_LINK_COUNT, s);
}

int pcl_tune_procs_from_name(const char *s) {
  return from_name(procs_names, PCL_TUNE_PROCS_COUNT, s);
}

/* ---- Identity ------------------------------------------------------------------------------ */

/* Appends "field is 'here' here, 'file' in the file" to why[0 .. n), "; "-separated. */
static void differ(char *why, size_t n, const char *field, const char *here, const char *file) {
  size_t used = strlen(why);
  if (used + 1 < n)
    snprintf(why + used, n - used, "%s%s is '%s' here, '%s' in the file", used ? "; " : "", field,
             here, file);
}

static void differ_text(char *why, size_t n, const char *field, const char *here,
                        const char *file) {
  if (strncmp(here, file, PCL_TUNE_STR_MAX) != 0)
    differ(why, n, field, here, file);
}

/* Numbers in decimal, or as 16 hex digits (digests). */
static void differ_num(char *why, size_t n, const char *field, int hex, unsigned long long here,
                       unsigned long long file) {
  char a[32], b[32];
  snprintf(a, sizeof(a), hex ? "%016llx" : "%llu", here);
  snprintf(b, sizeof(b), hex ? "%016llx" : "%llu", file);
  if (here != file)
    differ(why, n, field, a, b);
}

int pcl_tune_identity_check(const pcl_tune_t *t, const pcl_tune_identity_t *here, char *why,
                            size_t whylen) {
  char buf[2048] = "";
  if (t == NULL || here == NULL)
    return 0;
  const pcl_tune_identity_t *f = &t->identity;
  /* In the file's order. */
  differ_text(buf, sizeof(buf), "gpu", here->gpu, f->gpu);
  differ_num(buf, sizeof(buf), "gpus", 0, (unsigned)here->gpus, (unsigned)f->gpus);
  if (here->link != f->link)
    differ(buf, sizeof(buf), "link", pcl_tune_link_name(here->link), pcl_tune_link_name(f->link));
  differ_text(buf, sizeof(buf), "driver", here->driver, f->driver);
  differ_text(buf, sizeof(buf), "cuda", here->cuda, f->cuda);
  differ_text(buf, sizeof(buf), "planccl", here->planccl, f->planccl);
  differ_text(buf, sizeof(buf), "nccl", here->nccl, f->nccl);
  differ_num(buf, sizeof(buf), "plans_digest", 1, here->plans_digest, f->plans_digest);
  if (buf[0] == '\0')
    return 1;
  PCL_INFO(PCL_LOG_PLAN, "tuning file %s does not apply here (ignored): %s", t->file, buf);
  if (why != NULL && whylen > 0)
    snprintf(why, whylen, "%s", buf);
  return 0;
}

/* ---- Where the file is --------------------------------------------------------------------- */

/* Appends dir[0 .. dir_len)/rest; dropped when it does not fit. */
static void add(pcl_tune_paths_t *out, const char *dir, size_t dir_len, const char *rest) {
  if (out->n >= PCL_TUNE_MAX_PATHS || dir_len >= PATH_MAX)
    return;
  int len = snprintf(out->path[out->n], PATH_MAX, "%.*s/%s", (int)dir_len, dir, rest);
  if (len > 0 && len < PATH_MAX)
    out->n++;
}

void pcl_tune_search_paths(const char *env_file, const char *xdg_cache_home, const char *home,
                           const char *lib_dir, pcl_tune_paths_t *out) {
  out->n = 0;
  out->from_env = env_file != NULL && env_file[0] != '\0';
  if (out->from_env) {
    if (strcasecmp(env_file, "none") != 0 && strlen(env_file) < PATH_MAX)
      snprintf(out->path[out->n++], PATH_MAX, "%s", env_file);
    return;
  }
  /* XDG: a relative $XDG_CACHE_HOME is invalid and ignored; its default is $HOME/.cache. */
  if (xdg_cache_home != NULL && xdg_cache_home[0] == '/')
    add(out, xdg_cache_home, strlen(xdg_cache_home), "planccl/tune.json");
  else if (home != NULL && home[0] == '/')
    add(out, home, strlen(home), ".cache/planccl/tune.json");
  if (lib_dir == NULL)
    return;
  const char *slash = strrchr(lib_dir, '/'); /* <prefix>/lib -> <prefix> */
  add(out, lib_dir, slash != NULL ? (size_t)(slash - lib_dir) : strlen(lib_dir),
      "share/planccl/tune.json");
}

pcl_tune_t *pcl_tune_find(const pcl_tune_paths_t *paths) {
  if (paths->from_env && paths->n == 0)
    PCL_INFO(PCL_LOG_PLAN, "PLANCCL_TUNE_FILE=none: no tuning file (untuned rules)");
  for (int i = 0; i < paths->n; i++) {
    const char *path = paths->path[i];
    struct stat st;
    if (stat(path, &st) != 0 && errno == ENOENT) {
      if (paths->from_env)
        PCL_WARN(PCL_LOG_PLAN, "PLANCCL_TUNE_FILE %s: no such file (untuned rules)", path);
      else
        PCL_INFO(PCL_LOG_PLAN, "no tuning file at %s", path);
      continue;
    }
    char err[1024];
    pcl_tune_t *t = NULL;
    if (pcl_tune_load(path, &t, err, sizeof(err)) != ncclSuccess) {
      PCL_WARN(PCL_LOG_PLAN, "tuning file refused (untuned rules): %s", err);
      return NULL;
    }
    PCL_INFO(PCL_LOG_PLAN, "tuning file %s read: %d call shapes", path, t->n_entries);
    return t;
  }
  return NULL;
}

/* ---- The identity as JSON ---------------------------------------------------------------- */

/* snprintf at *at of buf[len], counting past the end as snprintf does. */
static void appendf(char *buf, size_t len, size_t *at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + (*at < len ? *at : len), *at < len ? len - *at : 0, fmt, ap);
  va_end(ap);
  *at += k > 0 ? (size_t)k : 0;
}

/* Appends s as a JSON string: quotes, backslashes and control characters escaped. */
static void append_str(char *buf, size_t len, size_t *at, const char *s) {
  appendf(buf, len, at, "\"");
  for (const unsigned char *c = (const unsigned char *)s; *c; c++)
    if (*c == '"' || *c == '\\')
      appendf(buf, len, at, "\\%c", *c);
    else if (*c < 0x20)
      appendf(buf, len, at, "\\u%04x", *c);
    else
      appendf(buf, len, at, "%c", *c);
  appendf(buf, len, at, "\"");
}

size_t pcl_tune_identity_json(const pcl_tune_identity_t *id, char *buf, size_t len) {
  const char *const keys[] = {"gpu", "driver", "cuda", "planccl", "nccl"};
  const char *const vals[] = {id->gpu, id->driver, id->cuda, id->planccl, id->nccl};
  size_t at = 0;
  if (len > 0)
    buf[0] = '\0';
  for (int i = 0; i < 5; i++) {
    appendf(buf, len, &at, "%s\"%s\": ", i == 0 ? "{" : ", ", keys[i]);
    append_str(buf, len, &at, vals[i]);
  }
  appendf(buf, len, &at, ", \"gpus\": %d, \"link\": \"%s\", \"plans_digest\": \"%016llx\"}",
          id->gpus, pcl_tune_link_name(id->link), (unsigned long long)id->plans_digest);
  return at;
}
