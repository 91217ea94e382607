/* SPDX-License-Identifier: MIT
 * One host's shared host memory for a communicator (shm.h): rank 0 creates a memfd and publishes
 * it at its fd server for the duration of the setup; the others fetch and map it. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "alloc.h"
#include "log.h"
#include "mem_int.h"
#include "pcl_check.h"
#include "shm.h"

struct pcl_shm {
  void *ptr;
  size_t bytes;
};

struct shm_name {
  uint64_t server, secret, bytes;
  int32_t ok; /* rank 0 made it */
  int32_t pad;
};

static void *map_fd(int fd, size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Rank 0: the memfd, mapped, and published (the entry owns the fd from here on). */
static int make(size_t bytes, struct shm_name *name, void **ptr, pcl_ipc_fd_entry_t **entry) {
  int fd = memfd_create("planccl-comm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0 || (*ptr = map_fd(fd, bytes)) == NULL) {
    PCL_WARN(PCL_LOG_IPC, "shared host memory of %zu bytes: memfd or mmap failed", bytes);
    if (fd >= 0)
      close(fd);
    return 0;
  }
  pcl_ipc_fd_chunk_t ch = {0, bytes, fd};
  if (pcl_ipc_fd_publish(&ch, 1, &name->server, &name->secret, entry) != ncclSuccess) {
    munmap(*ptr, bytes);
    *ptr = NULL;
    return 0;
  }
  return 1;
}

static void *fetch(const struct shm_name *name) {
  int fd = -1;
  uint64_t off = 0, got = 0;
  if (pcl_ipc_fd_fetch(name->server, name->secret, 0, &fd, &off, &got) != ncclSuccess)
    return NULL;
  void *p = got == name->bytes && off == 0 ? map_fd(fd, (size_t)got) : NULL;
  close(fd);
  if (p == NULL)
    PCL_WARN(PCL_LOG_IPC, "shared host memory of %llu bytes could not be mapped",
             (unsigned long long)name->bytes);
  return p;
}

ncclResult_t pcl_shm_create(pcl_bootstrap_t *b, size_t bytes, pcl_shm_t **out) {
  ncclResult_t res;
  const int me = pcl_bootstrap_rank(b), n = pcl_bootstrap_nranks(b);
  struct shm_name name = {0, 0, bytes, 0, 0};
  pcl_ipc_fd_entry_t *entry = NULL;
  void *ptr = NULL;
  int32_t *ok = NULL;
  pcl_shm_t *shm = NULL;
  *out = NULL;
  if (me == 0)
    name.ok = make(bytes, &name, &ptr, &entry);
  PCL_CHECK_GOTO(pcl_bootstrap_bcast(b, &name, sizeof(name), 0), res, done);
  if (me != 0 && name.ok)
    ptr = fetch(&name);
  PCL_CALLOC(shm, 1, "shared host memory");
  if (PCL_CALLOC(ok, (size_t)n, "shm agreement") == NULL) {
    res = ncclSystemError; /* the caller drops the bootstrap: the peers see it fail */
    goto done;
  }
  ok[me] = ptr != NULL && shm != NULL;
  /* Also the point after which nobody fetches: rank 0 withdraws the fd below. */
  PCL_CHECK_GOTO(pcl_bootstrap_allgather(b, ok, sizeof(*ok)), res, done);
  int all = 1;
  for (int r = 0; r < n; r++)
    all &= ok[r] != 0;
  if (all) {
    shm->ptr = ptr;
    shm->bytes = bytes;
    *out = shm;
    shm = NULL;
    ptr = NULL;
  }
  res = ncclSuccess;
done:
  pcl_free(shm);
  pcl_ipc_fd_withdraw(entry);
  if (ptr != NULL)
    munmap(ptr, bytes);
  pcl_free(ok);
  return res;
}

void *pcl_shm_ptr(const pcl_shm_t *shm) {
  return shm->ptr;
}

void pcl_shm_destroy(pcl_shm_t *shm) {
  if (shm == NULL)
    return;
  munmap(shm->ptr, shm->bytes);
  pcl_free(shm);
}
