/* SPDX-License-Identifier: MIT
 * libibverbs through dlopen: the symbols are resolved once into a table; each wrapper maps the
 * verbs convention (NULL/errno or a positive error number) to a WARN naming the call and the
 * cause, and an ncclResult_t. Data-path calls (post_send, poll_cq) are inline in verbs.h. */
#define _GNU_SOURCE
#include "ib_int.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

static struct {
  struct ibv_device **(*get_device_list)(int *);
  void (*free_device_list)(struct ibv_device **);
  const char *(*get_device_name)(struct ibv_device *);
  struct ibv_context *(*open_device)(struct ibv_device *);
  int (*close_device)(struct ibv_context *);
  int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
  int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
  int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *);
  int (*dealloc_pd)(struct ibv_pd *);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
  struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *, uint64_t, size_t, uint64_t, int, int);
  int (*dereg_mr)(struct ibv_mr *);
  struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
  int (*destroy_cq)(struct ibv_cq *);
  struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
  int (*destroy_qp)(struct ibv_qp *);
  int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
  const char *(*wc_status_str)(enum ibv_wc_status);
} fn;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;

static void load(void) {
  void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    PCL_INFO(PCL_LOG_IB, "ib: libibverbs.so.1 not available (%s); no InfiniBand transport",
             dlerror());
    return;
  }
  int missing = 0;
#define PCL_IBV_SYM(field, name, required)                                                         \
  do {                                                                                             \
    *(void **)&fn.field = dlsym(h, name);                                                          \
    if (fn.field == NULL && (required)) {                                                          \
      PCL_WARN(PCL_LOG_IB, "ib: libibverbs.so.1 lacks %s; InfiniBand transport disabled", name);   \
      missing = 1;                                                                                 \
    }                                                                                              \
  } while (0)
  PCL_IBV_SYM(get_device_list, "ibv_get_device_list", 1);
  PCL_IBV_SYM(free_device_list, "ibv_free_device_list", 1);
  PCL_IBV_SYM(get_device_name, "ibv_get_device_name", 1);
  PCL_IBV_SYM(open_device, "ibv_open_device", 1);
  PCL_IBV_SYM(close_device, "ibv_close_device", 1);
  PCL_IBV_SYM(query_device, "ibv_query_device", 1);
  PCL_IBV_SYM(query_port, "ibv_query_port", 1);
  PCL_IBV_SYM(query_gid, "ibv_query_gid", 1);
  PCL_IBV_SYM(alloc_pd, "ibv_alloc_pd", 1);
  PCL_IBV_SYM(dealloc_pd, "ibv_dealloc_pd", 1);
  PCL_IBV_SYM(reg_mr, "ibv_reg_mr", 1);
  PCL_IBV_SYM(reg_dmabuf_mr, "ibv_reg_dmabuf_mr", 0);
  PCL_IBV_SYM(dereg_mr, "ibv_dereg_mr", 1);
  PCL_IBV_SYM(create_cq, "ibv_create_cq", 1);
  PCL_IBV_SYM(destroy_cq, "ibv_destroy_cq", 1);
  PCL_IBV_SYM(create_qp, "ibv_create_qp", 1);
  PCL_IBV_SYM(destroy_qp, "ibv_destroy_qp", 1);
  PCL_IBV_SYM(modify_qp, "ibv_modify_qp", 1);
  PCL_IBV_SYM(wc_status_str, "ibv_wc_status_str", 1);
#undef PCL_IBV_SYM
  if (missing) {
    dlclose(h);
    return;
  }
  loaded = 1; /* the handle stays open for the life of the process */
}

int pcl_ibv_available(void) {
  pthread_once(&once, load);
  return loaded;
}

#define NEED_LIB()                                                                                 \
  do {                                                                                             \
    if (!pcl_ibv_available()) {                                                                    \
      PCL_WARN(PCL_LOG_IB, "ib: %s called without libibverbs", __func__);                          \
      return ncclSystemError;                                                                      \
    }                                                                                              \
  } while (0)

ncclResult_t pcl_ibv_get_device_list(struct ibv_device ***list, int *n) {
  NEED_LIB();
  errno = 0;
  *list = fn.get_device_list(n);
  if (*list == NULL) {
    int e = errno ? errno : ENODEV;
    if (e == ENOSYS || e == ENODEV || e == ENOENT) /* no RDMA support here: normal on many hosts */
      PCL_INFO(PCL_LOG_IB, "ibv_get_device_list: %s; no InfiniBand transport", strerror(e));
    else
      PCL_WARN(PCL_LOG_IB, "ibv_get_device_list failed: %s", strerror(e));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void pcl_ibv_free_device_list(struct ibv_device **list) {
  if (list != NULL && loaded)
    fn.free_device_list(list);
}

const char *pcl_ibv_get_device_name(struct ibv_device *dev) {
  return loaded ? fn.get_device_name(dev) : "?";
}

ncclResult_t pcl_ibv_open_device(struct ibv_device *dev, struct ibv_context **ctx) {
  NEED_LIB();
  errno = 0;
  *ctx = fn.open_device(dev);
  if (*ctx == NULL) {
    PCL_WARN(PCL_LOG_IB, "ibv_open_device(%s) failed: %s", fn.get_device_name(dev),
             strerror(errno ? errno : ENODEV));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void pcl_ibv_close_device(struct ibv_context *ctx) {
  if (ctx == NULL || !loaded)
    return;
  int r = fn.close_device(ctx);
  if (r != 0)
    PCL_WARN(PCL_LOG_IB, "ibv_close_device failed: %s", strerror(errno));
}

/* Verbs calls returning an int report the error as the return value or in errno. */
static ncclResult_t rc_check(int r, const char *call, const char *detail) {
  if (r == 0)
    return ncclSuccess;
  int e = r > 0 ? r : errno;
  PCL_WARN(PCL_LOG_IB, "%s%s%s failed: %s", call, detail ? " " : "", detail ? detail : "",
           strerror(e));
  return ncclSystemError;
}

ncclResult_t pcl_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr) {
  NEED_LIB();
  return rc_check(fn.query_device(ctx, attr), "ibv_query_device", NULL);
}

ncclResult_t pcl_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr) {
  NEED_LIB();
  memset(attr, 0, sizeof(*attr));
  return rc_check(fn.query_port(ctx, port, attr), "ibv_query_port", NULL);
}

ncclResult_t pcl_ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index,
                               union ibv_gid *gid) {
  NEED_LIB();
  return rc_check(fn.query_gid(ctx, port, index, gid), "ibv_query_gid", NULL);
}

ncclResult_t pcl_ibv_alloc_pd(struct ibv_context *ctx, struct ibv_pd **pd) {
  NEED_LIB();
  errno = 0;
  *pd = fn.alloc_pd(ctx);
  if (*pd == NULL) {
    PCL_WARN(PCL_LOG_IB, "ibv_alloc_pd failed: %s", strerror(errno ? errno : ENOMEM));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void pcl_ibv_dealloc_pd(struct ibv_pd *pd) {
  if (pd != NULL && loaded)
    (void)rc_check(fn.dealloc_pd(pd), "ibv_dealloc_pd", NULL);
}

ncclResult_t pcl_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
                            struct ibv_mr **mr) {
  NEED_LIB();
  errno = 0;
  *mr = fn.reg_mr(pd, addr, len, access);
  if (*mr == NULL) {
    int e = errno ? errno : EINVAL;
    PCL_WARN(PCL_LOG_IB, "ibv_reg_mr(%p, %zu bytes) failed: %s%s", addr, len, strerror(e),
             e == ENOMEM   ? " (check ulimit -l)"
             : e == EFAULT ? " (GPU memory needs nvidia-peermem or dma-buf)"
                           : "");
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t pcl_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                                   int fd, int access, struct ibv_mr **mr) {
  NEED_LIB();
  *mr = NULL;
  if (fn.reg_dmabuf_mr == NULL)
    return ncclSuccess;
  errno = 0;
  *mr = fn.reg_dmabuf_mr(pd, offset, len, iova, fd, access);
  if (*mr == NULL) {
    PCL_INFO(PCL_LOG_IB, "ibv_reg_dmabuf_mr(%zu bytes) failed: %s; trying ibv_reg_mr", len,
             strerror(errno ? errno : EINVAL));
  }
  return ncclSuccess;
}

void pcl_ibv_dereg_mr(struct ibv_mr *mr) {
  if (mr != NULL && loaded)
    (void)rc_check(fn.dereg_mr(mr), "ibv_dereg_mr", NULL);
}

ncclResult_t pcl_ibv_create_cq(struct ibv_context *ctx, int cqe, struct ibv_cq **cq) {
  NEED_LIB();
  errno = 0;
  *cq = fn.create_cq(ctx, cqe, NULL, NULL, 0);
  if (*cq == NULL) {
    PCL_WARN(PCL_LOG_IB, "ibv_create_cq(%d entries) failed: %s", cqe,
             strerror(errno ? errno : ENOMEM));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void pcl_ibv_destroy_cq(struct ibv_cq *cq) {
  if (cq != NULL && loaded)
    (void)rc_check(fn.destroy_cq(cq), "ibv_destroy_cq", NULL);
}

ncclResult_t pcl_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
                               struct ibv_qp **qp) {
  NEED_LIB();
  errno = 0;
  *qp = fn.create_qp(pd, attr);
  if (*qp == NULL) {
    PCL_WARN(PCL_LOG_IB, "ibv_create_qp(RC, %u send wr) failed: %s", attr->cap.max_send_wr,
             strerror(errno ? errno : ENOMEM));
    return ncclSystemError;
  }
  return ncclSuccess;
}

void pcl_ibv_destroy_qp(struct ibv_qp *qp) {
  if (qp != NULL && loaded)
    (void)rc_check(fn.destroy_qp(qp), "ibv_destroy_qp", NULL);
}

ncclResult_t pcl_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
                               const char *state) {
  NEED_LIB();
  char detail[48];
  snprintf(detail, sizeof(detail), "to %s (qp 0x%x)", state, qp->qp_num);
  return rc_check(fn.modify_qp(qp, attr, mask), "ibv_modify_qp", detail);
}

ncclResult_t pcl_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr) {
  struct ibv_send_wr *bad = NULL;
  int r = ibv_post_send(qp, wr, &bad);
  if (r != 0) {
    PCL_WARN(PCL_LOG_IB, "ibv_post_send (qp 0x%x, opcode %d) failed: %s", qp->qp_num,
             bad ? (int)bad->opcode : -1, strerror(r > 0 ? r : errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t pcl_ibv_poll_cq(struct ibv_cq *cq, int max, struct ibv_wc *wc, int *n) {
  int r = ibv_poll_cq(cq, max, wc);
  if (r < 0) {
    PCL_WARN(PCL_LOG_IB, "ibv_poll_cq failed: %d", r);
    return ncclSystemError;
  }
  *n = r;
  return ncclSuccess;
}

const char *pcl_ibv_wc_status_str(enum ibv_wc_status s) {
  return loaded ? fn.wc_status_str(s) : "?";
}
