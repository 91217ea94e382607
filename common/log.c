/* SPDX-License-Identifier: MIT
 * The logger. Lines follow NCCL's layout with PLANCCL in place of NCCL:
 *   host:pid:tid [rank/dev] PLANCCL INFO message
 *   \nhost:pid:tid [rank/dev] file:line PLANCCL WARN message
 * Every WARN is also kept, even with logging off, for ncclGetLastError. */
#define _GNU_SOURCE
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "param.h"

#define LINE_MAX_BYTES 1024

static atomic_int level = -1; /* -1: not yet initialised */
static atomic_uint subsys_mask;
static FILE *out_file;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* A child forked while another thread held a lock must not inherit it held. The logger's lock
 * is taken before the parameters' one (ensure_init reads parameters under it), so fork does too. */
static void atfork_prepare(void) {
  pthread_mutex_lock(&lock);
  pcl_param_fork_lock();
}
static void atfork_release(void) {
  pcl_param_fork_unlock();
  pthread_mutex_unlock(&lock);
}
__attribute__((constructor)) static void register_atfork(void) {
  pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}
static char last_error[LINE_MAX_BYTES];
static char hostname[64];
static struct timespec start_time;
static _Thread_local int thread_rank = -1;
static _Thread_local int thread_dev = -1;
static _Thread_local char last_error_copy[LINE_MAX_BYTES];

static const struct {
  const char *name;
  uint32_t bit;
} subsys_names[] = {
    {"INIT", PCL_LOG_INIT}, {"BOOT", PCL_LOG_BOOT}, {"BOOTSTRAP", PCL_LOG_BOOT},
    {"TOPO", PCL_LOG_TOPO}, {"IPC", PCL_LOG_IPC},   {"PORT", PCL_LOG_PORT},
    {"NET", PCL_LOG_NET},   {"IB", PCL_LOG_IB},     {"PLAN", PCL_LOG_PLAN},
    {"SIM", PCL_LOG_SIM},   {"EXEC", PCL_LOG_EXEC}, {"SHIM", PCL_LOG_SHIM},
    {"ENV", PCL_LOG_ENV},   {"COLL", PCL_LOG_COLL}, {"ALL", PCL_LOG_ALL},
};

uint32_t pcl_log_parse_subsys(const char *value) {
  if (value == NULL || value[0] == '\0')
    return PCL_LOG_ALL;
  int invert = 0;
  if (value[0] == '^') {
    invert = 1;
    value++;
  }
  uint32_t mask = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", value);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ')
      tok++;
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
      if (strcasecmp(tok, subsys_names[i].name) == 0)
        mask |= subsys_names[i].bit;
  }
  return invert ? ~mask : mask;
}

static FILE *open_log_file(const char *pattern) {
  char path[4096];
  size_t o = 0;
  for (const char *p = pattern; *p && o + 32 < sizeof(path); p++) {
    if (p[0] == '%' && p[1] == 'h') {
      o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", hostname);
      p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
      p++;
    } else {
      path[o++] = *p;
    }
  }
  path[o] = '\0';
  FILE *f = fopen(path, "a");
  if (f)
    setvbuf(f, NULL, _IOLBF, 0);
  return f;
}

/* Resolves the level, mask and destination; returns the text of a bad PLANCCL_DEBUG, if any. */
static const char *init_locked(void) {
  const char *bad = NULL;
  gethostname(hostname, sizeof(hostname) - 1);
  char *dot = strchr(hostname, '.');
  if (dot)
    *dot = '\0';
  clock_gettime(CLOCK_MONOTONIC, &start_time);
  const char *lv = pcl_param_debug();
  int l = PCL_LOG_WARN;
  if (lv) {
    if (strcasecmp(lv, "NONE") == 0)
      l = PCL_LOG_NONE;
    else if (strcasecmp(lv, "WARN") == 0 || strcasecmp(lv, "VERSION") == 0)
      l = PCL_LOG_WARN;
    else if (strcasecmp(lv, "INFO") == 0)
      l = PCL_LOG_INFO;
    else if (strcasecmp(lv, "TRACE") == 0)
      l = PCL_LOG_TRACE;
    else
      bad = lv;
  }
  atomic_store(&subsys_mask, pcl_log_parse_subsys(pcl_param_debug_subsys()));
  const char *file = pcl_param_debug_file();
  out_file = NULL;
  if (file)
    out_file = open_log_file(file);
  if (out_file == NULL)
    out_file = stderr;
  atomic_store_explicit(&level, l, memory_order_release);
  return bad;
}

static void ensure_init(void) {
  if (atomic_load_explicit(&level, memory_order_acquire) >= 0)
    return;
  pthread_mutex_lock(&lock);
  const char *bad = NULL;
  if (atomic_load_explicit(&level, memory_order_relaxed) < 0)
    bad = init_locked();
  pthread_mutex_unlock(&lock);
  if (bad)
    PCL_WARN(PCL_LOG_ENV,
             "invalid value '%s' for PLANCCL_DEBUG (expected NONE, WARN, INFO or "
             "TRACE); using default WARN",
             bad);
}

int pcl_log_enabled(pcl_log_level_t lvl, uint32_t subsys) {
  ensure_init();
  return (int)lvl <= atomic_load_explicit(&level, memory_order_relaxed) &&
         (subsys & atomic_load_explicit(&subsys_mask, memory_order_relaxed)) != 0;
}

void pcl_log_set_thread_rank(int rank, int cuda_dev) {
  thread_rank = rank;
  thread_dev = cuda_dev;
}

const char *pcl_log_last_error(void) {
  pthread_mutex_lock(&lock);
  memcpy(last_error_copy, last_error, sizeof(last_error_copy));
  pthread_mutex_unlock(&lock);
  return last_error_copy;
}

void pcl_log(pcl_log_level_t lvl, uint32_t subsys, const char *file, int line, const char *fmt,
             ...) {
  ensure_init();
  char msg[LINE_MAX_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (lvl == PCL_LOG_WARN) {
    pthread_mutex_lock(&lock);
    snprintf(last_error, sizeof(last_error), "%s", msg);
    pthread_mutex_unlock(&lock);
  }
  if (!pcl_log_enabled(lvl, lvl == PCL_LOG_WARN ? PCL_LOG_ALL : subsys))
    return;

  char who[32];
  if (thread_rank >= 0)
    snprintf(who, sizeof(who), "%d/%d", thread_rank, thread_dev);
  else
    snprintf(who, sizeof(who), "%d", thread_dev);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char buf[LINE_MAX_BYTES + 256];
  long tid = (long)syscall(SYS_gettid);
  int pid = (int)getpid();
  switch (lvl) {
  case PCL_LOG_WARN:
    snprintf(buf, sizeof(buf), "\n%s:%d:%ld [%s] %s:%d PLANCCL WARN %s\n", hostname, pid, tid, who,
             base, line, msg);
    break;
  case PCL_LOG_TRACE: {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - start_time.tv_sec) * 1e3 +
                (double)(now.tv_nsec - start_time.tv_nsec) / 1e6;
    snprintf(buf, sizeof(buf), "%s:%d:%ld [%s] %f %s:%d PLANCCL TRACE %s\n", hostname, pid, tid,
             who, ms, base, line, msg);
    break;
  }
  default:
    snprintf(buf, sizeof(buf), "%s:%d:%ld [%s] PLANCCL INFO %s\n", hostname, pid, tid, who, msg);
    break;
  }
  pthread_mutex_lock(&lock);
  fputs(buf, out_file);
  fflush(out_file);
  pthread_mutex_unlock(&lock);
}

void pcl_log_reset(void) {
  pthread_mutex_lock(&lock);
  if (out_file && out_file != stderr)
    fclose(out_file);
  out_file = NULL;
  last_error[0] = '\0';
  atomic_store_explicit(&level, -1, memory_order_release);
  pthread_mutex_unlock(&lock);
}
