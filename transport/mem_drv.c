/* SPDX-License-Identifier: MIT
 * CUDA driver entry points for the GPU-memory code, resolved once through
 * cudaGetDriverEntryPointByVersion so that libplanccl never links libcuda and loads where no
 * driver is installed; plus the per-process identity token. */
#include <pthread.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "log.h"
#include "mem_int.h"

/* The ABI version every entry point is requested at: 12.0 picks the 64-bit variants (for example
 * cuMemGetAddressRange_v2) that the prototypes in mem_int.h describe. */
#define PCL_CU_ABI_VERSION 12000

static pthread_once_t g_cu_once = PTHREAD_ONCE_INIT;
static pcl_cu_fns_t g_cu;
static ncclResult_t g_cu_result = ncclSystemError;

static int resolve(const char *name, void **fn) {
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err =
      cudaGetDriverEntryPointByVersion(name, fn, PCL_CU_ABI_VERSION, cudaEnableDefault, &q);
  if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || *fn == NULL) {
    (void)cudaGetLastError(); /* do not leave a sticky-looking error for the caller */
    PCL_WARN(PCL_LOG_IPC, "cuda driver entry point %s unavailable (%s, query result %d)", name,
             cudaGetErrorString(err), (int)q);
    *fn = NULL;
    return -1;
  }
  return 0;
}

#define PCL_CU_RESOLVE(field, name)                                                                \
  do {                                                                                             \
    void *p_ = NULL;                                                                               \
    if (resolve(name, &p_) != 0)                                                                   \
      return;                                                                                      \
    *(void **)&g_cu.field = p_;                                                                    \
  } while (0)

static void cu_load_once(void) {
  PCL_CU_RESOLVE(get_error_string, "cuGetErrorString");
  PCL_CU_RESOLVE(device_get, "cuDeviceGet");
  PCL_CU_RESOLVE(device_get_attribute, "cuDeviceGetAttribute");
  PCL_CU_RESOLVE(pointer_get_attribute, "cuPointerGetAttribute");
  PCL_CU_RESOLVE(mem_get_address_range, "cuMemGetAddressRange");
  PCL_CU_RESOLVE(mem_retain_allocation_handle, "cuMemRetainAllocationHandle");
  PCL_CU_RESOLVE(mem_get_allocation_properties_from_handle,
                 "cuMemGetAllocationPropertiesFromHandle");
  PCL_CU_RESOLVE(mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  PCL_CU_RESOLVE(mem_export_to_shareable_handle, "cuMemExportToShareableHandle");
  PCL_CU_RESOLVE(mem_import_from_shareable_handle, "cuMemImportFromShareableHandle");
  PCL_CU_RESOLVE(mem_create, "cuMemCreate");
  PCL_CU_RESOLVE(mem_release, "cuMemRelease");
  PCL_CU_RESOLVE(mem_address_reserve, "cuMemAddressReserve");
  PCL_CU_RESOLVE(mem_address_free, "cuMemAddressFree");
  PCL_CU_RESOLVE(mem_map, "cuMemMap");
  PCL_CU_RESOLVE(mem_unmap, "cuMemUnmap");
  PCL_CU_RESOLVE(mem_set_access, "cuMemSetAccess");
  g_cu_result = ncclSuccess;
}

ncclResult_t pcl_cu_load(const pcl_cu_fns_t **out) {
  pthread_once(&g_cu_once, cu_load_once);
  if (g_cu_result != ncclSuccess) {
    *out = NULL;
    return g_cu_result;
  }
  *out = &g_cu;
  return ncclSuccess;
}

ncclResult_t pcl_cu_fail(const char *call, CUresult res) {
  const char *text = NULL;
  if (g_cu.get_error_string == NULL || g_cu.get_error_string(res, &text) != CUDA_SUCCESS ||
      text == NULL)
    text = "unknown error";
  PCL_WARN(PCL_LOG_IPC, "cuda driver call %s failed: %s (%d)", call, text, (int)res);
  return ncclUnhandledCudaError;
}

uint64_t pcl_mem_random64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v) || v == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16) ^
        (uint64_t)(uintptr_t)&v;
    v |= 1;
  }
  return v;
}

static pthread_mutex_t g_token_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t g_token_pid;
static uint64_t g_token;

uint64_t pcl_mem_proc_token(void) {
  pthread_mutex_lock(&g_token_lock);
  if (g_token == 0 || g_token_pid != getpid()) {
    g_token = pcl_mem_random64();
    g_token_pid = getpid();
  }
  uint64_t t = g_token;
  pthread_mutex_unlock(&g_token_lock);
  return t;
}
