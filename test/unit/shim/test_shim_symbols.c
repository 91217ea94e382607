/* SPDX-License-Identifier: MIT
 * ABI coverage: every defined dynamic symbol of the real libnccl.so.2 is exported by
 * libplanccl.so with the same binding (weak nccl*, strong pnccl* twins at the same address,
 * strong ncclResetDebugInitInternal), and planccl exports nothing else. */
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

START_TEST(test_exports_match_real_nccl) {
  const char *real_path = getenv("PCL_REAL_NCCL");
  if (real_path == NULL || access(real_path, R_OK) != 0) {
    fprintf(stderr, "no real libnccl.so.2 at %s; symbol coverage not checked\n",
            real_path ? real_path : "(unset)");
    return;
  }
  struct symtab real = read_dynsym(real_path);
  struct symtab ours = read_dynsym(shim_test_path("PCL_PLANCCL_LIB"));
  ck_assert_int_ge(real.n, 105);
  for (int i = 0; i < real.n; i++) {
    const struct sym *o = find(&ours, real.syms[i].name);
    ck_assert_msg(o != NULL, "planccl does not export %s", real.syms[i].name);
    ck_assert_msg(o->bind == real.syms[i].bind, "%s: binding %d, NCCL has %d", o->name, o->bind,
                  real.syms[i].bind);
  }
  /* Nothing extra: planccl's exports are exactly NCCL's. */
  for (int i = 0; i < ours.n; i++)
    ck_assert_msg(find(&real, ours.syms[i].name) != NULL, "planccl exports %s, NCCL does not",
                  ours.syms[i].name);
  /* pnccl* twins are aliases of nccl*. */
  for (int i = 0; i < ours.n; i++) {
    if (strncmp(ours.syms[i].name, "pnccl", 5) != 0)
      continue;
    const struct sym *base = find(&ours, ours.syms[i].name + 1);
    ck_assert_ptr_nonnull(base);
    ck_assert_uint_eq(base->value, ours.syms[i].value);
  }
  free(real.syms);
  free(ours.syms);
}
END_TEST

/* The names PyTorch 2.11 resolves beyond the classic API (a missing one breaks import torch). */
START_TEST(test_exports_needed_by_pytorch) {
  struct symtab ours = read_dynsym(shim_test_path("PCL_PLANCCL_LIB"));
  static const char *const names[] = {"ncclCommShrink",
                                      "ncclCommWindowRegister",
                                      "ncclCommWindowDeregister",
                                      "ncclDevCommCreate",
                                      "ncclDevCommDestroy",
                                      "ncclGroupSimulateEnd",
                                      "ncclAlltoAll",
                                      "ncclCommRegister",
                                      "ncclMemAlloc",
                                      "ncclCommInitRankScalable",
                                      "ncclCommSplit"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    ck_assert_msg(find(&ours, names[i]) != NULL, "missing %s", names[i]);
  free(ours.syms);
}
END_TEST

TCase *shim_tcase_symbols(void) {
  TCase *tc = tcase_create("symbols");
  tcase_add_test(tc, test_exports_match_real_nccl);
  tcase_add_test(tc, test_exports_needed_by_pytorch);
  return tc;
}
