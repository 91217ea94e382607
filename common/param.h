/* SPDX-License-Identifier: MIT
 * Cached accessors for every PLANCCL_* variable, generated from params.def. Each variable is read
 * once; a bad value is one WARN naming the variable and the default used. */
#ifndef PCL_PARAM_H
#define PCL_PARAM_H

#include <stdint.h>

typedef enum { PCL_PARAM_BOOL, PCL_PARAM_INT, PCL_PARAM_SIZE, PCL_PARAM_STR } pcl_param_type_t;

typedef enum {
#define PCL_PARAM(fn, var, type, idef, sdef, lo, hi, help) PCL_PARAM_IDX_##fn,
#include "params.def"
#undef PCL_PARAM
  PCL_PARAM_COUNT
} pcl_param_idx_t;

/* Numeric parameters (BOOL, INT, SIZE) return int64_t; STR ones return NULL when unset or empty. */
#define PCL_PARAM_DECL_BOOL(fn) int64_t pcl_param_##fn(void);
#define PCL_PARAM_DECL_INT(fn) int64_t pcl_param_##fn(void);
#define PCL_PARAM_DECL_SIZE(fn) int64_t pcl_param_##fn(void);
#define PCL_PARAM_DECL_STR(fn) const char *pcl_param_##fn(void);
#define PCL_PARAM(fn, var, type, idef, sdef, lo, hi, help) PCL_PARAM_DECL_##type(fn)
#include "params.def"
#undef PCL_PARAM

typedef struct {
  const char *env; /* full variable name, e.g. "PLANCCL_DEBUG" */
  pcl_param_type_t type;
  int64_t int_default;
  const char *str_default;
  int64_t min, max;
  const char *help;
} pcl_param_info_t;

const pcl_param_info_t *pcl_param_info(pcl_param_idx_t idx);

/* "environment" or "default", once the value has been resolved. */
const char *pcl_param_source(pcl_param_idx_t idx);

/* Log every resolved value and its source at INFO (subsystem ENV); done once per process. */
void pcl_param_dump(void);

/* Forget cached values so the next access re-reads the environment (tests only). */
void pcl_param_reset(void);

/* Taken around fork() by the logger's fork handlers (common/ internal). */
void pcl_param_fork_lock(void);
void pcl_param_fork_unlock(void);

/* Parsers, exposed for tests and for other modules' list values. Return 0 on success. */
int pcl_param_parse_bool(const char *s, int64_t *out);
int pcl_param_parse_int(const char *s, int64_t *out);
int pcl_param_parse_size(const char *s, int64_t *out);

#endif
