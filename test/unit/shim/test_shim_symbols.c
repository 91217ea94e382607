/* SPDX-License-Identifier: MIT
 * ABI coverage: libplanccl.so exports exactly NCCL 2.32's 193 names (a list kept as test data) as
 * NCCL binds them, a real libnccl.so.2 found here exports nothing beyond that list, and the fake
 * NCCL has every function of it. */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "shim_test.h"

struct sym {
  char name[64];
  int bind;
  uint64_t value;
};

struct symtab {
  struct sym *syms;
  int n;
};

/* Defined global/weak function or object symbols of the ELF file's .dynsym. */
static struct symtab read_dynsym(const char *path) {
  struct symtab t = {NULL, 0};
  int fd = open(path, O_RDONLY);
  ck_assert_msg(fd >= 0, "cannot open %s", path);
  struct stat sb;
  ck_assert_int_eq(fstat(fd, &sb), 0);
  const uint8_t *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ck_assert(m != MAP_FAILED);
  close(fd);
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m;
  ck_assert(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0);
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(m + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM)
      continue;
    const Elf64_Sym *s = (const Elf64_Sym *)(m + sh[i].sh_offset);
    const char *str = (const char *)(m + sh[sh[i].sh_link].sh_offset);
    int n = (int)(sh[i].sh_size / sizeof(Elf64_Sym));
    t.syms = calloc((size_t)n, sizeof(*t.syms));
    for (int k = 0; k < n; k++) {
      int bind = ELF64_ST_BIND(s[k].st_info);
      if (s[k].st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK))
        continue;
      snprintf(t.syms[t.n].name, sizeof(t.syms[0].name), "%s", str + s[k].st_name);
      t.syms[t.n].bind = bind;
      t.syms[t.n].value = s[k].st_value;
      t.n++;
    }
  }
  munmap((void *)m, (size_t)sb.st_size);
  return t;
}

static const struct sym *find(const struct symtab *t, const char *name) {
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->syms[i].name, name) == 0)
      return &t->syms[i];
  return NULL;
}

/* NCCL 2.32's export list (test/data/nccl-2.32-symbols.txt, from nm -D --defined-only of the
 * 2.32.6 wheel's libnccl.so.2; 2.32.3 exports the same), one name per line. */
static struct symtab read_list(void) {
  const char *path = shim_test_path("PCL_NCCL_SYMBOLS");
  FILE *f = fopen(path, "r");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  struct symtab t = {calloc(512, sizeof(struct sym)), 0};
  char line[sizeof(t.syms[0].name)];
  while (fgets(line, sizeof(line), f) != NULL && t.n < 512) {
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] != '\0')
      memcpy(t.syms[t.n++].name, line, sizeof(line));
  }
  fclose(f);
  return t;
}

/* NCCL's bindings (src/include/core.h, NCCL_API): the nccl* body is weak, its pnccl* twin a
 * strong alias; ncclResetDebugInitInternal is a plain strong export. */
static int nccl_binding(const char *name) {
  if (strncmp(name, "pnccl", 5) == 0 || strcmp(name, "ncclResetDebugInitInternal") == 0)
    return STB_GLOBAL;
  return STB_WEAK;
}

/* planccl exports exactly NCCL 2.32's names, bound as NCCL binds them, twins at their bodies. */
START_TEST(test_exports_match_nccl_232) {
  struct symtab list = read_list();
  struct symtab ours = read_dynsym(shim_test_path("PCL_PLANCCL_LIB"));
  ck_assert_int_eq(list.n, 193);
  for (int i = 0; i < list.n; i++) {
    const struct sym *o = find(&ours, list.syms[i].name);
    ck_assert_msg(o != NULL, "planccl does not export %s", list.syms[i].name);
    ck_assert_msg(o->bind == nccl_binding(o->name), "%s: binding %d", o->name, o->bind);
  }
  for (int i = 0; i < ours.n; i++)
    ck_assert_msg(find(&list, ours.syms[i].name) != NULL, "planccl exports %s, NCCL 2.32 does not",
                  ours.syms[i].name);
  ck_assert_int_eq(ours.n, list.n);
  for (int i = 0; i < ours.n; i++) {
    if (strncmp(ours.syms[i].name, "pnccl", 5) != 0)
      continue;
    const struct sym *base = find(&ours, ours.syms[i].name + 1);
    ck_assert_ptr_nonnull(base);
    ck_assert_uint_eq(base->value, ours.syms[i].value);
  }
  free(list.syms);
  free(ours.syms);
}
END_TEST

/* Internal names NCCL 2.30.3 exported by mistake (2.30.7 dropped them): not API, not planccl's. */
static int known_leak(const char *name) {
  static const char *const leaks[] = {"ncclParamDumpAllFlag",     "ncclParamDumpAllFlagKey",
                                      "ncclParamEnvPluginGet",    "ncclParamIsCacheDisabled",
                                      "ncclParamNoCacheStr",      "ncclParamNoCacheStrKey",
                                      "ncclParamRegistryInstance"};
  for (size_t i = 0; i < sizeof(leaks) / sizeof(leaks[0]); i++)
    if (strcmp(name, leaks[i]) == 0)
      return 1;
  return 0;
}

/* The real libnccl.so.2 found here (any release up to 2.32) exports no name beyond the list, with
 * the same bindings as planccl. Skipped where the build machine has NCCL's headers only. */
START_TEST(test_real_nccl_within_list) {
  const char *real_path = getenv("PCL_REAL_NCCL");
  if (real_path == NULL || access(real_path, R_OK) != 0) {
    fprintf(stderr, "no real libnccl.so.2 at %s; its exports not checked\n",
            real_path ? real_path : "(unset)");
    return;
  }
  struct symtab list = read_list();
  struct symtab real = read_dynsym(real_path);
  struct symtab ours = read_dynsym(shim_test_path("PCL_PLANCCL_LIB"));
  ck_assert_int_ge(real.n, 105);
  for (int i = 0; i < real.n; i++) {
    const char *name = real.syms[i].name;
    if (known_leak(name))
      continue;
    ck_assert_msg(find(&list, name) != NULL, "%s exports %s, which NCCL 2.32 does not", real_path,
                  name);
    const struct sym *o = find(&ours, name);
    ck_assert_msg(o != NULL, "planccl does not export %s", name);
    ck_assert_msg(o->bind == real.syms[i].bind, "%s: binding %d, NCCL has %d", name, o->bind,
                  real.syms[i].bind);
  }
  free(list.syms);
  free(real.syms);
  free(ours.syms);
}
END_TEST

/* The recording fake has every function of the list (it exports no pnccl* twins). */
START_TEST(test_fake_exports_list) {
  struct symtab list = read_list();
  struct symtab fake = read_dynsym(shim_test_path("PCL_FAKE_NCCL"));
  for (int i = 0; i < list.n; i++)
    if (strncmp(list.syms[i].name, "nccl", 4) == 0)
      ck_assert_msg(find(&fake, list.syms[i].name) != NULL, "the fake lacks %s", list.syms[i].name);
  free(list.syms);
  free(fake.syms);
}
END_TEST

/* The names PyTorch resolves beyond the classic API (a missing one breaks import torch): 2.11's,
 * then the eleven NCCL 2.29.7 functions 2.15's libtorch_cuda.so imports. */
START_TEST(test_exports_needed_by_pytorch) {
  struct symtab ours = read_dynsym(shim_test_path("PCL_PLANCCL_LIB"));
  static const char *const names[] = {
      "ncclCommShrink", "ncclCommWindowRegister", "ncclCommWindowDeregister", "ncclDevCommCreate",
      "ncclDevCommDestroy", "ncclGroupSimulateEnd", "ncclAlltoAll", "ncclCommRegister",
      "ncclMemAlloc", "ncclCommInitRankScalable", "ncclCommSplit",
      /* torch 2.15 */
      "ncclCommGetUniqueId", "ncclCommGrow", "ncclCommMemStats", "ncclCommResume",
      "ncclCommSuspend", "ncclGetLsaMultimemDevicePointer", "ncclGetPeerDevicePointer",
      "ncclPutSignal", "ncclSignal", "ncclWaitSignal", "ncclWinGetUserPtr"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    ck_assert_msg(find(&ours, names[i]) != NULL, "missing %s", names[i]);
  free(ours.syms);
}
END_TEST

TCase *shim_tcase_symbols(void) {
  TCase *tc = tcase_create("symbols");
  tcase_add_test(tc, test_exports_match_nccl_232);
  tcase_add_test(tc, test_real_nccl_within_list);
  tcase_add_test(tc, test_fake_exports_list);
  tcase_add_test(tc, test_exports_needed_by_pytorch);
  return tc;
}
