/* SPDX-License-Identifier: MIT
 * Replays a fuzz target's checked-in inputs without libFuzzer (any compiler): the directories
 * given, else PCL_FUZZ_DIRS under $PCL_SOURCE_DIR. A crashing input fails the test. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv); /* optional */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of dir in name order; returns how many, or -1 if dir is unreadable. */
static int replay_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.')
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      names = realloc(names, cap * sizeof(*names));
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof(*names), cmp_names);
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
      fprintf(stderr, "replay: cannot open %s\n", path);
      exit(1);
    }
    uint8_t *buf = malloc(1 << 20);
    size_t len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    (void)LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    free(names[i]);
  }
  free(names);
  return (int)n;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize != NULL)
    LLVMFuzzerInitialize(&argc, &argv);
  int total = 0;
  if (argc > 1) {
    for (int i = 1; i < argc; i++) {
      int n = replay_dir(argv[i]);
      if (n < 0) {
        fprintf(stderr, "replay: cannot read %s\n", argv[i]);
        return 1;
      }
      total += n;
    }
  } else {
    const char *src = getenv("PCL_SOURCE_DIR");
    if (src == NULL) {
      fprintf(stderr, "replay: give directories or set PCL_SOURCE_DIR\n");
      return 1;
    }
    char dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s", PCL_FUZZ_DIRS);
    char *save = NULL;
    for (char *rel = strtok_r(dirs, ":", &save); rel; rel = strtok_r(NULL, ":", &save)) {
      char dir[4096];
      snprintf(dir, sizeof(dir), "%s/%s", src, rel);
      int n = replay_dir(dir);
      total += n > 0 ? n : 0; /* a target may have no regressions yet */
    }
    if (total == 0) {
      fprintf(stderr, "replay: no inputs for %s\n", PCL_FUZZ_TARGET);
      return 1;
    }
  }
  printf("replay %s: %d inputs, no crash\n", PCL_FUZZ_TARGET, total);
  return 0;
}
