/* SPDX-License-Identifier: MIT
 * Private to transport/: the dlopen'd libibverbs (libplanccl never links it, so it loads where
 * rdma-core is absent) and wrappers that turn every verbs failure into a WARN + ncclResult_t. */
#ifndef PCL_IB_INT_H
#define PCL_IB_INT_H

#include <infiniband/verbs.h>
#include <nccl.h>

/* 1 when libibverbs.so.1 was loaded and every required symbol resolved (once per process). */
int pcl_ibv_available(void);

ncclResult_t pcl_ibv_get_device_list(struct ibv_device ***list, int *n);
void pcl_ibv_free_device_list(struct ibv_device **list);
const char *pcl_ibv_get_device_name(struct ibv_device *dev);
ncclResult_t pcl_ibv_open_device(struct ibv_device *dev, struct ibv_context **ctx);
void pcl_ibv_close_device(struct ibv_context *ctx);
ncclResult_t pcl_ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr);
ncclResult_t pcl_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
ncclResult_t pcl_ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index,
                               union ibv_gid *gid);
ncclResult_t pcl_ibv_alloc_pd(struct ibv_context *ctx, struct ibv_pd **pd);
void pcl_ibv_dealloc_pd(struct ibv_pd *pd);
ncclResult_t pcl_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access,
                            struct ibv_mr **mr);
/* 0 and *mr == NULL (no WARN) when this libibverbs has no ibv_reg_dmabuf_mr. */
ncclResult_t pcl_ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                                   int fd, int access, struct ibv_mr **mr);
void pcl_ibv_dereg_mr(struct ibv_mr *mr);
ncclResult_t pcl_ibv_create_cq(struct ibv_context *ctx, int cqe, struct ibv_cq **cq);
void pcl_ibv_destroy_cq(struct ibv_cq *cq);
ncclResult_t pcl_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
                               struct ibv_qp **qp);
void pcl_ibv_destroy_qp(struct ibv_qp *qp);
/* `state` names the transition in the message ("INIT", "RTR", "RTS"). */
ncclResult_t pcl_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
                               const char *state);
ncclResult_t pcl_ibv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr);
/* Returns the number of completions (>= 0) in *n. */
ncclResult_t pcl_ibv_poll_cq(struct ibv_cq *cq, int max, struct ibv_wc *wc, int *n);
const char *pcl_ibv_wc_status_str(enum ibv_wc_status s);

#endif
