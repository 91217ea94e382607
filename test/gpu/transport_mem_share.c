/* SPDX-License-Identifier: MIT
 * Exports and mappings shared per span: an owner process registers several buffers of one
 * allocation (cuMem and cudaMalloc), a peer process imports them all and must map each
 * allocation once; the mapping lives until its last import closes, the export until its last
 * registration goes; memory remapped at the same address is exported and mapped anew, never
 * mistaken for the old. Two processes on GPU 0; 77 without a GPU. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "mem.h"
#include "mem_int.h"
#include "mp_launch.h"

#define MIB (1u << 20)

typedef struct {
  pcl_mem_desc_t d[6]; /* cuMem +0, +1 MiB; cudaMalloc +0, +1 MiB; remap before, after */
  int arrived, generation;
  int failed; /* a rank failed: barriers no longer wait */
} shared_t;

static void barrier(shared_t *sh) {
  int gen = __atomic_load_n(&sh->generation, __ATOMIC_ACQUIRE);
  if (__atomic_add_fetch(&sh->arrived, 1, __ATOMIC_ACQ_REL) == 2) {
    __atomic_store_n(&sh->arrived, 0, __ATOMIC_RELAXED);
    __atomic_add_fetch(&sh->generation, 1, __ATOMIC_RELEASE);
    return;
  }
  while (__atomic_load_n(&sh->generation, __ATOMIC_ACQUIRE) == gen &&
         !__atomic_load_n(&sh->failed, __ATOMIC_ACQUIRE))
    usleep(100);
}

/* d[i] = v for 64 KiB of bytes; 1 when it could be written. */
static int put(void *dptr, unsigned char v) {
  return cudaMemset(dptr, v, 65536) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
}

static int holds(const void *dptr, unsigned char v) {
  static unsigned char h[65536];
  if (cudaMemcpy(h, dptr, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess)
    return 0;
  for (size_t i = 0; i < sizeof(h); i++)
    if (h[i] != v)
      return 0;
  return 1;
}

/* A cuMem allocation of `bytes` with a POSIX-fd handle, mapped at va (read-write on dev 0). */
static int cumem_map(const pcl_cu_fns_t *cu, CUdeviceptr va, size_t bytes,
                     CUmemGenericAllocationHandle *h) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemAccessDesc acc;
  memset(&acc, 0, sizeof(acc));
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return cu->mem_create(h, bytes, &prop, 0) == CUDA_SUCCESS &&
         cu->mem_map(va, bytes, 0, *h, 0) == CUDA_SUCCESS &&
         cu->mem_set_access(va, bytes, &acc, 1) == CUDA_SUCCESS;
}

static int owner(shared_t *sh) {
  int rc = 0, rank = 0;
  const pcl_cu_fns_t *cu = NULL;
  pcl_mem_alloc_t *a = NULL;
  pcl_mem_reg_t *r[6] = {NULL};
  char *b = NULL;
  CUdeviceptr va = 0;
  CUmemGenericAllocationHandle h1 = 0, h2 = 0;
  size_t gran = 2 * MIB;
  PCL_MP_CHECK(cudaSetDevice(0) == cudaSuccess && pcl_cu_load(&cu) == ncclSuccess, 1);
  PCL_MP_CHECK(pcl_mem_alloc(0, 4 * MIB, PCL_MEM_ALLOC_CUMEM, &a) == ncclSuccess, 2);
  PCL_MP_CHECK(cudaMalloc((void **)&b, 2 * MIB) == cudaSuccess, 2);
  /* Two buffers of one allocation of each kind: one export each. */
  PCL_MP_CHECK(pcl_mem_reg(a->ptr, MIB, &r[0]) == ncclSuccess, 3);
  PCL_MP_CHECK(pcl_mem_reg((char *)a->ptr + MIB, MIB, &r[1]) == ncclSuccess, 3);
  PCL_MP_CHECK(pcl_mem_reg(b, 65536, &r[2]) == ncclSuccess, 3);
  PCL_MP_CHECK(pcl_mem_reg(b + MIB, 65536, &r[3]) == ncclSuccess, 3);
  for (int i = 0; i < 4; i++)
    sh->d[i] = *pcl_mem_reg_desc(r[i]);
  PCL_MP_CHECK(sh->d[0].kind == PCL_MEM_KIND_CUMEM_FD && sh->d[2].kind == PCL_MEM_KIND_CUDA_IPC, 4);
  PCL_MP_CHECK(sh->d[0].export_id == sh->d[1].export_id && sh->d[0].offset + MIB == sh->d[1].offset,
               4);
  PCL_MP_CHECK(sh->d[2].export_id == sh->d[3].export_id && sh->d[0].export_id != sh->d[2].export_id,
               4);
  PCL_MP_CHECK(pcl_mem_exports_live() == 2 && pcl_ipc_fd_server_entries() == 1, 5);
  /* The remap case: a cuMem allocation at va, registered; then another mapped at the same va. */
  PCL_MP_CHECK(cu->mem_address_reserve(&va, gran, 0, 0, 0) == CUDA_SUCCESS, 6);
  PCL_MP_CHECK(cumem_map(cu, va, gran, &h1), 6);
  PCL_MP_CHECK(pcl_mem_reg((void *)(uintptr_t)va, 65536, &r[4]) == ncclSuccess, 6);
  sh->d[4] = *pcl_mem_reg_desc(r[4]);
  barrier(sh); /* 1: the peer imports 0-4 */
  barrier(sh); /* 2: it wrote 0x11 through +1 MiB of each, 0x44 through the remap's first */
  PCL_MP_CHECK(holds((char *)a->ptr + MIB, 0x11) && holds(b + MIB, 0x11), 7);
  PCL_MP_CHECK(holds((void *)(uintptr_t)va, 0x44), 7);
  /* The old registration stays (as a cached one may): the new memory must not be taken for it. */
  PCL_MP_CHECK(cu->mem_unmap(va, gran) == CUDA_SUCCESS && cu->mem_release(h1) == CUDA_SUCCESS, 8);
  h1 = 0;
  PCL_MP_CHECK(cumem_map(cu, va, gran, &h2) && put((void *)(uintptr_t)va, 0), 8);
  PCL_MP_CHECK(pcl_mem_reg((void *)(uintptr_t)va, 65536, &r[5]) == ncclSuccess, 8);
  sh->d[5] = *pcl_mem_reg_desc(r[5]);
  PCL_MP_CHECK(sh->d[5].export_id != sh->d[4].export_id && pcl_mem_exports_live() == 4, 8);
  barrier(sh); /* 3: the peer imports 5 and writes 0x55 through it */
  barrier(sh); /* 4 */
  PCL_MP_CHECK(holds((void *)(uintptr_t)va, 0x55), 9);
  /* Exports go with their last registration. */
  pcl_mem_dereg(r[0]);
  r[0] = NULL;
  PCL_MP_CHECK(pcl_mem_exports_live() == 4 && pcl_ipc_fd_server_entries() == 3, 10);
  pcl_mem_dereg(r[1]);
  r[1] = NULL;
  PCL_MP_CHECK(pcl_mem_exports_live() == 3 && pcl_ipc_fd_server_entries() == 2, 10);
  barrier(sh); /* 5: the peer closed everything */
out:
  if (rc != 0)
    __atomic_store_n(&sh->failed, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 6; i++)
    pcl_mem_dereg(r[i]);
  if (rc == 0 && (pcl_mem_exports_live() != 0 || pcl_ipc_fd_server_entries() != 0))
    rc = 11;
  if (va != 0) {
    (void)cu->mem_unmap(va, gran);
    (void)cu->mem_address_free(va, gran);
  }
  if (h1 != 0)
    (void)cu->mem_release(h1);
  if (h2 != 0)
    (void)cu->mem_release(h2);
  cudaFree(b);
  pcl_mem_free(a);
  return rc;
}

static int importer(shared_t *sh) {
  int rc = 0, rank = 1;
  pcl_mem_import_t *im[6] = {NULL};
  PCL_MP_CHECK(cudaSetDevice(0) == cudaSuccess, 1);
  barrier(sh); /* 1 */
  for (int i = 0; i < 5; i++)
    PCL_MP_CHECK(pcl_mem_import(&sh->d[i], 0, &im[i]) == ncclSuccess, 2);
  /* One mapping per allocation: cuMem, cudaMalloc, the remap's first memory. */
  PCL_MP_CHECK(pcl_mem_mappings_live() == 3, 3);
  PCL_MP_CHECK((char *)pcl_mem_import_ptr(im[1]) == (char *)pcl_mem_import_ptr(im[0]) + MIB, 3);
  PCL_MP_CHECK((char *)pcl_mem_import_ptr(im[3]) == (char *)pcl_mem_import_ptr(im[2]) + MIB, 3);
  /* The first import of each goes; the mapping stays for the second. */
  pcl_mem_import_close(im[0]);
  pcl_mem_import_close(im[2]);
  im[0] = im[2] = NULL;
  PCL_MP_CHECK(pcl_mem_mappings_live() == 3, 4);
  PCL_MP_CHECK(put(pcl_mem_import_ptr(im[1]), 0x11) && put(pcl_mem_import_ptr(im[3]), 0x11), 4);
  PCL_MP_CHECK(put(pcl_mem_import_ptr(im[4]), 0x44), 4);
  barrier(sh); /* 2 */
  barrier(sh); /* 3: the owner remapped and registered anew */
  PCL_MP_CHECK(pcl_mem_import(&sh->d[5], 0, &im[5]) == ncclSuccess, 5);
  PCL_MP_CHECK(pcl_mem_mappings_live() == 4, 5);
  PCL_MP_CHECK(put(pcl_mem_import_ptr(im[5]), 0x55), 5);
  barrier(sh); /* 4 */
  for (int i = 0; i < 6; i++) {
    pcl_mem_import_close(im[i]);
    im[i] = NULL;
  }
  PCL_MP_CHECK(pcl_mem_mappings_live() == 0, 6);
  barrier(sh); /* 5 */
out:
  if (rc != 0)
    __atomic_store_n(&sh->failed, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < 6; i++)
    pcl_mem_import_close(im[i]);
  return rc;
}

static int rank_main(int rank, int n, void *arg) {
  (void)n;
  return rank == 0 ? owner(arg) : importer(arg);
}

int main(void) {
  int ndev = 0;
  pid_t p = fork(); /* count the GPUs in a child: the ranks must initialise CUDA themselves */
  if (p == 0)
    _exit(cudaGetDeviceCount(&ndev) == cudaSuccess && ndev > 0 ? 0 : 77);
  int st = 0;
  waitpid(p, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    printf("transport_mem_share: no GPU: skipped\n");
    return 77;
  }
  shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED)
    return 1;
  memset(sh, 0, sizeof(*sh));
  int codes[2] = {0, 0};
  int rc = pcl_mp_run(2, rank_main, sh, 120, codes);
  printf("transport_mem_share: rank codes %d %d: %s\n", codes[0], codes[1],
         rc == 0 ? "passed" : "FAILED");
  return rc == 0 ? 0 : 1;
}
