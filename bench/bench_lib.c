/* SPDX-License-Identifier: MIT
 * dlopen and symbol resolution of the libraries planccl-bench compares (bench_lib.h). */
#define _GNU_SOURCE
#include "bench_lib.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  size_t off;
  const char *name;
  int need; /* 0 optional, 1 always, 2 with symmetric windows */
} sym_t;

#define S(field, name, need)                                                                       \
  { offsetof(bench_lib_t, field), name, need }
static const sym_t syms[] = {
    S(get_unique_id, "ncclGetUniqueId", 1),
    S(init_rank, "ncclCommInitRank", 1),
    S(init_all, "ncclCommInitAll", 0),
    S(destroy, "ncclCommDestroy", 1),
    S(group_start, "ncclGroupStart", 1),
    S(group_end, "ncclGroupEnd", 1),
    S(error_string, "ncclGetErrorString", 1),
    S(all_reduce, "ncclAllReduce", 1),
    S(all_gather, "ncclAllGather", 1),
    S(reduce_scatter, "ncclReduceScatter", 1),
    S(broadcast, "ncclBroadcast", 1),
    S(reduce, "ncclReduce", 1),
    S(alltoall, "ncclAlltoAll", 0),
    S(send, "ncclSend", 1),
    S(recv, "ncclRecv", 1),
    S(mem_alloc, "ncclMemAlloc", 2),
    S(mem_free, "ncclMemFree", 2),
    S(win_register, "ncclCommWindowRegister", 2),
    S(win_deregister, "ncclCommWindowDeregister", 2),
};
#undef S

int bench_lib_open(bench_lib_t *l, const char *path, int symm, char *err, size_t errlen) {
  memset(l, 0, sizeof(*l));
  /* DEEPBIND: a library's calls into NCCL symbols reach its own copies, not another's. */
  l->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (l->handle == NULL) {
    snprintf(err, errlen, "cannot open %s: %s", path, dlerror());
    return -1;
  }
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    if (syms[i].need == 2 && !symm)
      continue;
    void *f = dlsym(l->handle, syms[i].name);
    if (f == NULL && syms[i].need != 0) {
      snprintf(err, errlen, "%s lacks %s%s", path, syms[i].name,
               syms[i].need == 2 ? " (needed by :symm)" : "");
      bench_lib_close(l);
      return -1;
    }
    memcpy((char *)l + syms[i].off, &f, sizeof(f));
  }
  return 0;
}

void bench_lib_close(bench_lib_t *l) {
  if (l->handle)
    dlclose(l->handle);
  memset(l, 0, sizeof(*l));
}
