/* SPDX-License-Identifier: MIT
 * Finds the real libnccl.so.2 (PLANCCL_NCCL_LIB, else next to a loaded libtorch, else the system
 * library paths, else $CUDA_HOME/lib64), opens it by absolute path with RTLD_DEEPBIND so its calls
 * to its own public functions stay inside it, and resolves its symbols once into pcl_nccl_fns. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "log.h"
#include "param.h"
#include "shim_int.h"

/* planccl's marker: a section that only planccl has, read from a candidate file before it is
 * opened (opening a copy of planccl would run a second planccl inside this one). */
__attribute__((section(".planccl_marker"), used)) static const char pcl_marker[] =
    "planccl: NCCL-compatible library; not the real NCCL";
#define MARKER_SECTION ".planccl_marker"

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct pcl_nccl_fns fns;
static int loaded;
static int real_version;
static char real_path[PATH_MAX];
static char self_path[PATH_MAX];
static void *self_base;
static void *real_base;   /* load address of the real library */
static int real_not_deep; /* the real library was already loaded without RTLD_DEEPBIND */

/* The sanitizer runtimes refuse RTLD_DEEPBIND (their interceptors must bind first). A sanitizer
 * build binds the real library the ordinary way and relies on the path a real library loaded
 * before planccl takes anyway: its calls to its own public names reach planccl with real
 * handles, which are forwarded back (pcl_fallback_called_by_real). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define PCL_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define PCL_SANITIZED_BUILD 1
#endif
#endif
#ifdef PCL_SANITIZED_BUILD
#define PCL_DLOPEN_DEEP 0
#else
#define PCL_DLOPEN_DEEP RTLD_DEEPBIND
#endif

struct candidates {
  char paths[64][PATH_MAX];
  int n;
};

static void add_candidate(struct candidates *c, const char *dir, const char *file) {
  if (c->n >= (int)(sizeof(c->paths) / sizeof(c->paths[0])) || dir == NULL || dir[0] == '\0')
    return;
  int len = file ? snprintf(c->paths[c->n], PATH_MAX, "%s/%s", dir, file)
                 : snprintf(c->paths[c->n], PATH_MAX, "%s", dir);
  if (len > 0 && len < PATH_MAX)
    c->n++;
}

/* ---- the directory of the nvidia/nccl package next to a loaded libtorch ---- */

static int find_torch_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  struct candidates *c = arg;
  const char *name = info->dlpi_name;
  if (name == NULL || name[0] == '\0')
    return 0;
  const char *base = strrchr(name, '/');
  if (base == NULL || strncmp(base + 1, "libtorch", 8) != 0 || strstr(base, ".so") == NULL)
    return 0;
  /* .../site-packages/torch/lib/libtorch_cuda.so -> .../site-packages */
  char dir[PATH_MAX];
  size_t dlen = (size_t)(base - name);
  if (dlen >= sizeof(dir))
    return 0;
  memcpy(dir, name, dlen);
  dir[dlen] = '\0';
  const char *suffix = "/torch/lib";
  size_t slen = strlen(suffix);
  if (dlen < slen || strcmp(dir + dlen - slen, suffix) != 0)
    return 0;
  dir[dlen - slen] = '\0';
  char pkg[PATH_MAX];
  static const char *const layouts[] = {"nvidia/nccl/lib", "nvidia/cu13/lib", "nvidia/cu12/lib"};
  for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++) {
    if (snprintf(pkg, sizeof(pkg), "%s/%s", dir, layouts[i]) < (int)sizeof(pkg))
      add_candidate(c, pkg, "libnccl.so.2");
  }
  return 1; /* the first libtorch decides */
}

/* ---- ld.so.cache ("glibc-ld.so.cache1.1" format, possibly after the old format) ---- */

struct cache_entry_new {
  int32_t flags;
  uint32_t key, value;
  uint32_t osversion;
  uint64_t hwcap;
};
#define CACHE_MAGIC_NEW "glibc-ld.so.cache1.1"
#define CACHE_HEADER_NEW_BYTES 48 /* magic+version 20, nlibs, len_strings, flags..., unused[3] */

static void add_ld_cache(struct candidates *c, const char *cache_file) {
  int fd = open(cache_file, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < CACHE_HEADER_NEW_BYTES) {
    close(fd);
    return;
  }
  size_t size = (size_t)st.st_size;
  const char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return;
  const char *hdr =
      memmem(map, size < 4096 ? size : 4096, CACHE_MAGIC_NEW, strlen(CACHE_MAGIC_NEW));
  if (hdr != NULL && (size_t)(hdr - map) + CACHE_HEADER_NEW_BYTES <= size) {
    size_t avail = size - (size_t)(hdr - map);
    uint32_t nlibs;
    memcpy(&nlibs, hdr + 20, sizeof(nlibs));
    size_t entries_end = CACHE_HEADER_NEW_BYTES + (size_t)nlibs * sizeof(struct cache_entry_new);
    for (uint32_t i = 0; entries_end <= avail && i < nlibs; i++) {
      struct cache_entry_new e;
      memcpy(&e, hdr + CACHE_HEADER_NEW_BYTES + i * sizeof(e), sizeof(e));
      /* String offsets are relative to the new header; both must be NUL-terminated in range. */
      if (e.key >= avail || e.value >= avail)
        continue;
      if (memchr(hdr + e.key, '\0', avail - e.key) == NULL)
        continue;
      if (memchr(hdr + e.value, '\0', avail - e.value) == NULL)
        continue;
      if (strcmp(hdr + e.key, "libnccl.so.2") == 0)
        add_candidate(c, hdr + e.value, NULL);
    }
  }
  munmap((void *)map, size);
}

/* ---- is this file planccl? ---- */

/* 1 when the ELF file at `path` has planccl's marker section. */
static int file_has_marker(const char *path) {
  int found = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  Elf64_Ehdr eh;
  Elf64_Shdr *sh = NULL;
  char *names = NULL;
  if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh))
    goto out;
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    goto out;
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shstrndx >= eh.e_shnum ||
      eh.e_shnum > 4096)
    goto out;
  sh = malloc((size_t)eh.e_shnum * sizeof(*sh));
  if (sh == NULL)
    goto out;
  ssize_t want = (ssize_t)((size_t)eh.e_shnum * sizeof(*sh));
  if (pread(fd, sh, (size_t)want, (off_t)eh.e_shoff) != want)
    goto out;
  Elf64_Shdr *strs = &sh[eh.e_shstrndx];
  if (strs->sh_size == 0 || strs->sh_size > (1u << 20))
    goto out;
  names = malloc(strs->sh_size + 1);
  if (names == NULL)
    goto out;
  if (pread(fd, names, strs->sh_size, (off_t)strs->sh_offset) != (ssize_t)strs->sh_size)
    goto out;
  names[strs->sh_size] = '\0';
  for (int i = 0; i < eh.e_shnum && !found; i++)
    if (sh[i].sh_name < strs->sh_size && strcmp(names + sh[i].sh_name, MARKER_SECTION) == 0)
      found = 1;
out:
  free(names);
  free(sh);
  close(fd);
  return found;
}

/* ---- opening one candidate ---- */

static void resolve_self(void) {
  Dl_info di;
  if (dladdr((void *)&resolve_self, &di) && di.dli_fname) {
    self_base = di.dli_fbase;
    if (realpath(di.dli_fname, self_path) == NULL)
      snprintf(self_path, sizeof(self_path), "%s", di.dli_fname);
  }
}

/* Fills `fns` from the opened library. A missing 2.28 function is worth a WARN now (planccl's
 * baseline: the library is broken or very old); a newer one is expected to be absent from an
 * older NCCL and is reported once, at INFO, by report_newer. */
static void resolve_all(void *h, const char *rp) {
#define PCL_NCCL_FN_RESOLVE(name)                                                                  \
  fns.name = (__typeof__(fns.name))dlsym(h, #name);                                                \
  if (fns.name == NULL)                                                                            \
    PCL_WARN(PCL_LOG_SHIM, "real NCCL %s lacks %s; that function will return ncclInvalidUsage",    \
             rp, #name);
  PCL_NCCL_FNS_2_28(PCL_NCCL_FN_RESOLVE)
#undef PCL_NCCL_FN_RESOLVE
#define PCL_NCCL_FN_RESOLVE_QUIET(name) fns.name = (__typeof__(fns.name))dlsym(h, #name);
  PCL_NCCL_FNS_2_29(PCL_NCCL_FN_RESOLVE_QUIET)
  PCL_NCCL_FNS_2_30(PCL_NCCL_FN_RESOLVE_QUIET)
  PCL_NCCL_FNS_2_31(PCL_NCCL_FN_RESOLVE_QUIET)
  PCL_NCCL_FNS_2_32(PCL_NCCL_FN_RESOLVE_QUIET)
#undef PCL_NCCL_FN_RESOLVE_QUIET
}

/* "2.28.9" for 22809 (NCCL_VERSION's two schemes: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z
 * from 2.9 on). */
void pcl_nccl_version_text(int code, char *buf, size_t size) {
  if (code <= 0)
    snprintf(buf, size, "(unknown version)");
  else if (code < 10000)
    snprintf(buf, size, "%d.%d.%d", code / 1000, code % 1000 / 100, code % 100);
  else
    snprintf(buf, size, "%d.%d.%d", code / 10000, code % 10000 / 100, code % 100);
}

/* One INFO line at load for the newer functions the real library lacks (each call WARNs once). */
static void report_newer(void) {
  int absent = 0, total = 0;
  const char *first = NULL;
#define PCL_NCCL_FN_ABSENT(name)                                                                   \
  total++;                                                                                         \
  if (fns.name == NULL && absent++ == 0)                                                           \
    first = #name;
  PCL_NCCL_FNS_2_29(PCL_NCCL_FN_ABSENT)
  PCL_NCCL_FNS_2_30(PCL_NCCL_FN_ABSENT)
  PCL_NCCL_FNS_2_31(PCL_NCCL_FN_ABSENT)
  PCL_NCCL_FNS_2_32(PCL_NCCL_FN_ABSENT)
#undef PCL_NCCL_FN_ABSENT
  if (absent == 0)
    return;
  char v[32];
  pcl_nccl_version_text(real_version, v, sizeof(v));
  PCL_INFO(PCL_LOG_SHIM | PCL_LOG_INIT,
           "real NCCL %s lacks %d of the %d functions NCCL 2.29.7 to 2.32.3 added (%s%s); "
           "planccl exports them all, and each returns ncclInvalidUsage here",
           v, absent, total, first, absent > 1 ? " and more" : "");
}

/* Returns 1 and fills `fns` when `path` is a real NCCL that opened; 0 to try the next one. */
static int try_open(const char *path, int explicit) {
  char rp[PATH_MAX];
  if (realpath(path, rp) == NULL) {
    if (explicit)
      PCL_WARN(PCL_LOG_SHIM, "PLANCCL_NCCL_LIB=%s: no such file", path);
    else
      PCL_INFO(PCL_LOG_SHIM, "real NCCL candidate %s: not found", path);
    return 0;
  }
  if (strcmp(rp, self_path) == 0 || file_has_marker(rp)) {
    if (explicit)
      PCL_WARN(PCL_LOG_SHIM, "PLANCCL_NCCL_LIB=%s is planccl itself, not NCCL", path);
    else
      PCL_INFO(PCL_LOG_SHIM, "real NCCL candidate %s: is planccl, skipped", path);
    return 0;
  }
  /* A copy already loaded normally (for example by libtorch's DT_NEEDED when planccl was
   * preloaded under its own soname) keeps its global binding: dlopen returns that object and
   * its calls to its own public names land in planccl. comm.c then maps those real handles back. */
  void *pre = dlopen(rp, RTLD_NOW | RTLD_NOLOAD);
  real_not_deep = pre != NULL || PCL_DLOPEN_DEEP == 0;
  if (pre != NULL) {
    PCL_INFO(PCL_LOG_SHIM,
             "real NCCL %s was already loaded without RTLD_DEEPBIND; its internal "
             "calls reach planccl and are forwarded back",
             rp);
    dlclose(pre);
  }
  void *h = dlopen(rp, RTLD_NOW | RTLD_LOCAL | PCL_DLOPEN_DEEP);
  if (h == NULL) {
    const char *err = dlerror();
    if (explicit)
      PCL_WARN(PCL_LOG_SHIM, "PLANCCL_NCCL_LIB=%s: dlopen failed: %s", path, err);
    else
      PCL_INFO(PCL_LOG_SHIM, "real NCCL candidate %s: dlopen failed: %s", rp, err);
    return 0;
  }
  void *gv = dlsym(h, "ncclGetVersion");
  Dl_info di;
  if (gv == NULL || (dladdr(gv, &di) && di.dli_fbase == self_base)) {
    if (explicit)
      PCL_WARN(PCL_LOG_SHIM, "PLANCCL_NCCL_LIB=%s: %s", path,
               gv ? "is planccl itself, not NCCL" : "has no ncclGetVersion, not an NCCL library");
    else
      PCL_INFO(PCL_LOG_SHIM, "real NCCL candidate %s: not NCCL or planccl, skipped", rp);
    dlclose(h);
    return 0;
  }
  resolve_all(h, rp);
  snprintf(real_path, sizeof(real_path), "%s", rp);
  real_base = dladdr(gv, &di) ? di.dli_fbase : NULL;
  /* The handle stays open for the life of the process (never dlclose'd: comms may outlive us). */
  return 1;
}

static void load(void) {
  resolve_self();
  struct candidates *c = calloc(1, sizeof(*c));
  if (c == NULL)
    return;
  const char *env = pcl_param_nccl_lib();
  if (env != NULL) {
    /* An explicit path is the only candidate: silently using another library would hide a typo. */
    loaded = try_open(env, 1);
  } else {
    dl_iterate_phdr(find_torch_cb, c);
    const char *llp = getenv("LD_LIBRARY_PATH");
    if (llp != NULL) {
      char *copy = strdup(llp), *save = NULL;
      for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save))
        add_candidate(c, d, "libnccl.so.2");
      free(copy);
    }
    add_ld_cache(c, "/etc/ld.so.cache");
    static const char *const sysdirs[] = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                          "/lib64", "/usr/lib64", "/usr/lib"};
    for (size_t i = 0; i < sizeof(sysdirs) / sizeof(sysdirs[0]); i++)
      add_candidate(c, sysdirs[i], "libnccl.so.2");
    const char *cuda = getenv("CUDA_HOME");
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/lib64", cuda && cuda[0] ? cuda : "/usr/local/cuda");
    add_candidate(c, dir, "libnccl.so.2");
    for (int i = 0; i < c->n && !loaded; i++) {
      if (access(c->paths[i], F_OK) != 0)
        continue;
      loaded = try_open(c->paths[i], 0);
    }
  }
  free(c);
  if (!loaded) {
    memset(&fns, 0, sizeof(fns));
    PCL_INFO(PCL_LOG_SHIM | PCL_LOG_INIT, "no real NCCL found; only planccl's own paths can run");
    return;
  }
  if (fns.ncclGetVersion == NULL || fns.ncclGetVersion(&real_version) != ncclSuccess)
    real_version = 0;
  PCL_INFO(PCL_LOG_SHIM | PCL_LOG_INIT,
           "real NCCL version %d loaded from %s (planccl built with "
           "nccl.h %d%s)",
           real_version, real_path, NCCL_VERSION_CODE,
           real_version == NCCL_VERSION_CODE ? "" : ", versions differ");
  report_newer();
}

int pcl_fallback_called_by_real(const void *caller) {
  if (pcl_fallback_fns() == NULL || !real_not_deep || caller == NULL)
    return 0;
  Dl_info di;
  return dladdr(caller, &di) && di.dli_fbase == real_base && real_base != NULL;
}

const struct pcl_nccl_fns *pcl_fallback_fns(void) {
  pthread_once(&load_once, load);
  return loaded ? &fns : NULL;
}

int pcl_fallback_version(void) {
  return pcl_fallback_fns() ? real_version : 0;
}

const char *pcl_fallback_path(void) {
  return pcl_fallback_fns() ? real_path : "";
}

ncclResult_t pcl_fallback_none(const char *fn) {
  static atomic_flag warned = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&warned))
    PCL_WARN(PCL_LOG_SHIM,
             "no real NCCL library was found, so calls that need it (the first was "
             "%s) return ncclInvalidUsage. Set PLANCCL_NCCL_LIB to the absolute path of the real "
             "libnccl.so.2 (for a pip PyTorch: .../site-packages/nvidia/nccl/lib/libnccl.so.2)",
             fn);
  return ncclInvalidUsage;
}

/* The functions of the table, with the first release exporting each (0: planccl's 2.28
 * baseline) and whether its absence was said at WARN yet. */
static struct {
  const char *name;
  int since;
  atomic_flag warned;
} fn_info[] = {
/* clang-format off */
#define PCL_NCCL_FN_INFO_2_28(name) {#name, 0, ATOMIC_FLAG_INIT},
#define PCL_NCCL_FN_INFO_2_29(name) {#name, PCL_NCCL_SINCE_2_29, ATOMIC_FLAG_INIT},
#define PCL_NCCL_FN_INFO_2_30(name) {#name, PCL_NCCL_SINCE_2_30, ATOMIC_FLAG_INIT},
#define PCL_NCCL_FN_INFO_2_31(name) {#name, PCL_NCCL_SINCE_2_31, ATOMIC_FLAG_INIT},
#define PCL_NCCL_FN_INFO_2_32(name) {#name, PCL_NCCL_SINCE_2_32, ATOMIC_FLAG_INIT},
  PCL_NCCL_FNS_2_28(PCL_NCCL_FN_INFO_2_28)
  PCL_NCCL_FNS_2_29(PCL_NCCL_FN_INFO_2_29)
  PCL_NCCL_FNS_2_30(PCL_NCCL_FN_INFO_2_30)
  PCL_NCCL_FNS_2_31(PCL_NCCL_FN_INFO_2_31)
  PCL_NCCL_FNS_2_32(PCL_NCCL_FN_INFO_2_32)
/* clang-format on */
#undef PCL_NCCL_FN_INFO_2_28
#undef PCL_NCCL_FN_INFO_2_29
#undef PCL_NCCL_FN_INFO_2_30
#undef PCL_NCCL_FN_INFO_2_31
#undef PCL_NCCL_FN_INFO_2_32
};

ncclResult_t pcl_fallback_missing(const char *fn) {
  int i = 0, n = (int)(sizeof(fn_info) / sizeof(fn_info[0]));
  while (i < n && strcmp(fn_info[i].name, fn) != 0)
    i++;
  char have[32], since[64] = "";
  pcl_nccl_version_text(real_version, have, sizeof(have));
  if (i < n && fn_info[i].since > 0) {
    char v[32];
    pcl_nccl_version_text(fn_info[i].since, v, sizeof(v));
    snprintf(since, sizeof(since), " (NCCL exports it since %s)", v);
  }
  if (i == n || !atomic_flag_test_and_set(&fn_info[i].warned))
    PCL_WARN(PCL_LOG_SHIM,
             "%s: the real NCCL %s at %s does not export it%s; returning ncclInvalidUsage", fn,
             have, real_path, since);
  else
    PCL_INFO(PCL_LOG_SHIM, "%s: not in the real NCCL %s; ncclInvalidUsage", fn, have);
  return ncclInvalidUsage;
}
