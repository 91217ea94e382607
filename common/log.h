/* SPDX-License-Identifier: MIT
 * The one logger: levels from PLANCCL_DEBUG, subsystems from PLANCCL_DEBUG_SUBSYS, output to
 * stderr or PLANCCL_DEBUG_FILE, NCCL's line layout, and the last WARN kept for ncclGetLastError. */
#ifndef PCL_LOG_H
#define PCL_LOG_H

#include <stdint.h>

typedef enum {
  PCL_LOG_NONE = 0,
  PCL_LOG_WARN = 1,
  PCL_LOG_INFO = 2,
  PCL_LOG_TRACE = 3,
} pcl_log_level_t;

/* Subsystem bits; PCL_LOG_ALL is used where a message belongs to no one subsystem. */
#define PCL_LOG_INIT (1u << 0)
#define PCL_LOG_BOOT (1u << 1)
#define PCL_LOG_TOPO (1u << 2)
#define PCL_LOG_IPC (1u << 3)
#define PCL_LOG_PORT (1u << 4)
#define PCL_LOG_NET (1u << 5)
#define PCL_LOG_IB (1u << 6)
#define PCL_LOG_PLAN (1u << 7)
#define PCL_LOG_SIM (1u << 8)
#define PCL_LOG_EXEC (1u << 9)
#define PCL_LOG_SHIM (1u << 10)
#define PCL_LOG_ENV (1u << 11)
#define PCL_LOG_COLL (1u << 12)
#define PCL_LOG_ALL (~0u)

void pcl_log(pcl_log_level_t level, uint32_t subsys, const char *file, int line, const char *fmt,
             ...) __attribute__((format(printf, 5, 6)));

/* Cheap test used by the macros so that disabled messages cost one load and a compare. */
int pcl_log_enabled(pcl_log_level_t level, uint32_t subsys);

/* Per-thread identity shown in each line: "[rank/dev]" once known, "[dev]" before. */
void pcl_log_set_thread_rank(int rank, int cuda_dev);

/* Text of the most recent WARN in this process ("" if none); never NULL. */
const char *pcl_log_last_error(void);

/* Re-read PLANCCL_DEBUG* (tests only; the variables are otherwise read once). */
void pcl_log_reset(void);

/* Parses a PLANCCL_DEBUG_SUBSYS value into a mask; exposed for tests. */
uint32_t pcl_log_parse_subsys(const char *value);

#define PCL_WARN(subsys, ...) pcl_log(PCL_LOG_WARN, (subsys), __FILE__, __LINE__, __VA_ARGS__)
#define PCL_INFO(subsys, ...)                                                                      \
  do {                                                                                             \
    if (pcl_log_enabled(PCL_LOG_INFO, (subsys)))                                                   \
      pcl_log(PCL_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__);                            \
  } while (0)
#ifdef PCL_ENABLE_TRACE
#define PCL_TRACE(subsys, ...)                                                                     \
  do {                                                                                             \
    if (pcl_log_enabled(PCL_LOG_TRACE, (subsys)))                                                  \
      pcl_log(PCL_LOG_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__);                           \
  } while (0)
#else
#define PCL_TRACE(subsys, ...) ((void)0)
#endif

#endif
