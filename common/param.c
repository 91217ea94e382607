/* SPDX-License-Identifier: MIT
 * Resolution and caching of the PLANCCL_* parameters of params.def. Values are read from the
 * environment once, under a lock, and published with release stores so readers on the call path
 * pay one acquire load. */
#include "param.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "log.h"

static const pcl_param_info_t table[PCL_PARAM_COUNT] = {
#define PCL_PARAM(fn, var, type, idef, sdef, lo, hi, help)                                         \
  [PCL_PARAM_IDX_##fn] = {"PLANCCL_" #var, PCL_PARAM_##type, (idef), (sdef), (lo), (hi), (help)},
#include "params.def"
#undef PCL_PARAM
};

typedef struct {
  atomic_int ready; /* 1 once num/str/from_env are written; release/acquire pairs */
  int from_env;
  int64_t num;
  const char *str; /* points into the environment or the table; never freed */
} slot_t;

static slot_t slots[PCL_PARAM_COUNT];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Fork handlers, registered by the logger so that the two locks are taken in one order. */
void pcl_param_fork_lock(void) {
  pthread_mutex_lock(&lock);
}
void pcl_param_fork_unlock(void) {
  pthread_mutex_unlock(&lock);
}

int pcl_param_parse_bool(const char *s, int64_t *out) {
  static const char *yes[] = {"1", "true", "yes", "on"};
  static const char *no[] = {"0", "false", "no", "off"};
  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
    if (strcasecmp(s, yes[i]) == 0) {
      *out = 1;
      return 0;
    }
    if (strcasecmp(s, no[i]) == 0) {
      *out = 0;
      return 0;
    }
  }
  return -1;
}

int pcl_param_parse_int(const char *s, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno != 0 || end == s)
    return -1;
  while (isspace((unsigned char)*end))
    end++;
  if (*end != '\0')
    return -1;
  *out = v;
  return 0;
}

int pcl_param_parse_size(const char *s, int64_t *out) {
  char *end = NULL;
  errno = 0;
  if (*s == '-')
    return -1;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno != 0 || end == s)
    return -1;
  unsigned long long mul = 1;
  switch (toupper((unsigned char)*end)) {
  case 'K':
    mul = 1ull << 10;
    end++;
    break;
  case 'M':
    mul = 1ull << 20;
    end++;
    break;
  case 'G':
    mul = 1ull << 30;
    end++;
    break;
  case 'T':
    mul = 1ull << 40;
    end++;
    break;
  default:
    break;
  }
  if (mul != 1 && (*end == 'B' || *end == 'b'))
    end++; /* "4KB" reads like "4K" */
  if (*end != '\0')
    return -1;
  if (v > (unsigned long long)INT64_MAX / mul)
    return -1;
  *out = (int64_t)(v * mul);
  return 0;
}

static void resolve(pcl_param_idx_t idx) {
  const pcl_param_info_t *info = &table[idx];
  slot_t *slot = &slots[idx];
  pthread_mutex_lock(&lock);
  if (atomic_load_explicit(&slot->ready, memory_order_relaxed)) {
    pthread_mutex_unlock(&lock);
    return;
  }
  const char *env = getenv(info->env);
  int bad = 0;
  slot->from_env = 0;
  slot->num = info->int_default;
  slot->str = info->str_default;
  if (env != NULL && env[0] != '\0') {
    int64_t v = 0;
    int rc = 0;
    switch (info->type) {
    case PCL_PARAM_BOOL:
      rc = pcl_param_parse_bool(env, &v);
      break;
    case PCL_PARAM_INT:
      rc = pcl_param_parse_int(env, &v);
      break;
    case PCL_PARAM_SIZE:
      rc = pcl_param_parse_size(env, &v);
      break;
    case PCL_PARAM_STR:
      break;
    }
    if (info->type == PCL_PARAM_STR) {
      slot->str = env;
      slot->from_env = 1;
    } else if (rc != 0 || v < info->min || v > info->max) {
      bad = 1;
    } else {
      slot->num = v;
      slot->from_env = 1;
    }
  }
  atomic_store_explicit(&slot->ready, 1, memory_order_release);
  pthread_mutex_unlock(&lock);
  /* Logged after the lock is dropped: the logger itself reads parameters. */
  if (bad) {
    PCL_WARN(PCL_LOG_ENV,
             "invalid value '%s' for %s (expected %s in [%lld, %lld]); using default %lld", env,
             info->env,
             info->type == PCL_PARAM_BOOL   ? "a boolean (0/1/true/false/yes/no)"
             : info->type == PCL_PARAM_SIZE ? "a byte size (K/M/G suffixes)"
                                            : "an integer",
             (long long)info->min, (long long)info->max, (long long)info->int_default);
  }
}

static int64_t get_num(pcl_param_idx_t idx) {
  if (!atomic_load_explicit(&slots[idx].ready, memory_order_acquire))
    resolve(idx);
  return slots[idx].num;
}

static const char *get_str(pcl_param_idx_t idx) {
  if (!atomic_load_explicit(&slots[idx].ready, memory_order_acquire))
    resolve(idx);
  const char *s = slots[idx].str;
  return (s && s[0]) ? s : NULL;
}

#define PCL_PARAM_DEF_BOOL(fn)                                                                     \
  int64_t pcl_param_##fn(void) {                                                                   \
    return get_num(PCL_PARAM_IDX_##fn);                                                            \
  }
#define PCL_PARAM_DEF_INT(fn)                                                                      \
  int64_t pcl_param_##fn(void) {                                                                   \
    return get_num(PCL_PARAM_IDX_##fn);                                                            \
  }
#define PCL_PARAM_DEF_SIZE(fn)                                                                     \
  int64_t pcl_param_##fn(void) {                                                                   \
    return get_num(PCL_PARAM_IDX_##fn);                                                            \
  }
#define PCL_PARAM_DEF_STR(fn)                                                                      \
  const char *pcl_param_##fn(void) {                                                               \
    return get_str(PCL_PARAM_IDX_##fn);                                                            \
  }
#define PCL_PARAM(fn, var, type, idef, sdef, lo, hi, help) PCL_PARAM_DEF_##type(fn)
#include "params.def"
#undef PCL_PARAM

const pcl_param_info_t *pcl_param_info(pcl_param_idx_t idx) {
  return (idx >= 0 && idx < PCL_PARAM_COUNT) ? &table[idx] : NULL;
}

const char *pcl_param_source(pcl_param_idx_t idx) {
  if (idx < 0 || idx >= PCL_PARAM_COUNT)
    return "?";
  if (!atomic_load_explicit(&slots[idx].ready, memory_order_acquire))
    resolve(idx);
  return slots[idx].from_env ? "environment" : "default";
}

static void dump_all(void) {
  for (int i = 0; i < PCL_PARAM_COUNT; i++) {
    const pcl_param_info_t *info = &table[i];
    const char *src = pcl_param_source((pcl_param_idx_t)i);
    if (info->type == PCL_PARAM_STR) {
      const char *s = get_str((pcl_param_idx_t)i);
      PCL_INFO(PCL_LOG_ENV, "%s = %s (%s)", info->env, s ? s : "(unset)", src);
    } else {
      PCL_INFO(PCL_LOG_ENV, "%s = %lld (%s)", info->env, (long long)get_num((pcl_param_idx_t)i),
               src);
    }
  }
}

void pcl_param_dump(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, dump_all);
}

void pcl_param_reset(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < PCL_PARAM_COUNT; i++)
    atomic_store_explicit(&slots[i].ready, 0, memory_order_release);
  pthread_mutex_unlock(&lock);
}
