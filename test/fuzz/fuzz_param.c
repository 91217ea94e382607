/* SPDX-License-Identifier: MIT
 * libFuzzer target for the PLANCCL_* parsers (bool/int/size, resolution from the environment,
 * subsystem lists, interface names); the first byte picks the parser, the rest is the text. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "fuzz_init.h"
#include "log.h"
#include "param.h"
#include "socket.h"

/* Sets var to text, re-resolves it and checks the value against the table's bounds. */
static void resolve(pcl_param_idx_t idx, int64_t (*get)(void), const char *text) {
  const pcl_param_info_t *info = pcl_param_info(idx);
  setenv(info->env, text, 1);
  pcl_param_reset();
  int64_t v = get();
  int from_env = strcmp(pcl_param_source(idx), "environment") == 0;
  if (from_env ? (v < info->min || v > info->max) : v != info->int_default)
    abort();
  unsetenv(info->env);
  pcl_param_reset();
}

static void parse_checks(const char *s) {
  int64_t v = -1;
  if (pcl_param_parse_bool(s, &v) == 0 && v != 0 && v != 1)
    abort();
  if (pcl_param_parse_size(s, &v) == 0 && v < 0)
    abort();
  int64_t i;
  if (pcl_param_parse_int(s, &i) == 0) {
    char *end;
    errno = 0;
    if (strtoll(s, &end, 0) != i || errno != 0)
      abort(); /* the same number strtoll reads */
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 4096)
    return 0;
  char *s = malloc(size);
  memcpy(s, data + 1, size - 1);
  s[size - 1] = '\0';
  switch (data[0] % 6) {
  case 0:
    parse_checks(s);
    break;
  case 1:
    if (s[0] != '\0') /* setenv refuses nothing but '=' in names; values may be anything */
      resolve(PCL_PARAM_IDX_bootstrap_timeout_s, pcl_param_bootstrap_timeout_s, s);
    break;
  case 2:
    if (s[0] != '\0')
      resolve(PCL_PARAM_IDX_scratch_bytes, pcl_param_scratch_bytes, s);
    break;
  case 3:
    if (s[0] != '\0')
      resolve(PCL_PARAM_IDX_stats, pcl_param_stats, s);
    break;
  case 4:
    (void)pcl_log_parse_subsys(s);
    break;
  default: {
    /* spec, NUL, interface name */
    size_t n = strlen(s);
    const char *ifname = n < size - 1 ? s + n + 1 : "";
    int hit = pcl_socket_ifname_match(s, ifname);
    if (hit != 0 && hit != 1)
      abort();
    break;
  }
  }
  free(s);
  if (pcl_alloc_outstanding() != 0)
    abort();
  return 0;
}
