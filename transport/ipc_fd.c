/* SPDX-License-Identifier: MIT
 * Hands cuMem allocations to peer processes: a per-process server thread on an abstract Unix
 * socket ("\0planccl-mem-<id>") answers "chunk i of entry <secret>" with the exported POSIX fd
 * (SCM_RIGHTS). The server runs only while some registration is published. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include "alloc.h"
#include "log.h"
#include "mem_int.h"
#include "param.h"

#define PCL_IPC_FD_MAGIC 0x50434c46u /* "PCLF" */
#define PCL_IPC_FD_IO_TIMEOUT_S 10   /* one request/answer on an accepted connection */

typedef struct {
  uint32_t magic;
  uint32_t index;
  uint64_t secret;
} fd_request_t;

typedef struct {
  uint32_t magic;
  int32_t status; /* 0 = ok (an fd is attached), else an errno-like code */
  uint64_t off;
  uint64_t bytes;
} fd_answer_t;

struct pcl_ipc_fd_entry {
  struct pcl_ipc_fd_entry *next;
  uint64_t secret;
  uint32_t nchunks;
  pcl_ipc_fd_chunk_t *chunks;
};

/* `life` serialises publish/withdraw (server start and stop); `table` guards the entry list and
 * is the only lock the server thread takes. */
static struct {
  pthread_mutex_t life;
  pthread_mutex_t table;
  pid_t pid; /* process that owns the state below; a forked child starts from scratch */
  int running;
  int listen_fd;
  int wake_fd;
  pthread_t thread;
  uint64_t id;
  pcl_ipc_fd_entry_t *entries;
  int nentries;
} g_srv = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, 0, 0, -1, -1, 0, 0, NULL, 0};

static socklen_t abstract_addr(uint64_t id, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  /* sun_path[0] = 0 selects the abstract namespace: no file, gone with the socket. */
  int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "planccl-mem-%016llx",
                   (unsigned long long)id);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static void set_io_timeout(int fd, int seconds) {
  struct timeval tv = {.tv_sec = seconds, .tv_usec = 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int read_full(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    got += (size_t)r;
  }
  return 0;
}

static void serve_one(int conn) {
  fd_request_t req;
  fd_answer_t ans = {.magic = PCL_IPC_FD_MAGIC, .status = ENOENT};
  int send_fd = -1;
  struct ucred cred;
  socklen_t clen = sizeof(cred);
  set_io_timeout(conn, PCL_IPC_FD_IO_TIMEOUT_S);
  /* Only processes of our own user get our memory; the secret is a second, per-entry check. */
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 || cred.uid != getuid()) {
    PCL_WARN(PCL_LOG_IPC, "fd server: refusing a connection from another user");
    return;
  }
  if (read_full(conn, &req, sizeof(req)) != 0 || req.magic != PCL_IPC_FD_MAGIC) {
    PCL_WARN(PCL_LOG_IPC, "fd server: malformed request");
    return;
  }
  pthread_mutex_lock(&g_srv.table);
  for (pcl_ipc_fd_entry_t *e = g_srv.entries; e != NULL; e = e->next) {
    if (e->secret != req.secret)
      continue;
    if (req.index >= e->nchunks) {
      ans.status = ERANGE;
      break;
    }
    /* dup so that a withdraw racing with this answer cannot close the fd under sendmsg. */
    send_fd = dup(e->chunks[req.index].fd);
    ans.status = send_fd < 0 ? EMFILE : 0;
    ans.off = e->chunks[req.index].off;
    ans.bytes = e->chunks[req.index].bytes;
    break;
  }
  pthread_mutex_unlock(&g_srv.table);

  struct iovec iov = {.iov_base = &ans, .iov_len = sizeof(ans)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (send_fd >= 0) {
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &send_fd, sizeof(int));
  }
  ssize_t r;
  do {
    r = sendmsg(conn, &msg, MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r != (ssize_t)sizeof(ans))
    PCL_WARN(PCL_LOG_IPC, "fd server: answer not sent: %s", strerror(errno));
  if (send_fd >= 0)
    close(send_fd);
}

static void *server_main(void *arg) {
  (void)arg;
  for (;;) {
    struct pollfd p[2] = {{.fd = g_srv.listen_fd, .events = POLLIN},
                          {.fd = g_srv.wake_fd, .events = POLLIN}};
    int n = poll(p, 2, -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      PCL_WARN(PCL_LOG_IPC, "fd server: poll failed: %s", strerror(errno));
      break;
    }
    if (p[1].revents)
      break; /* stop request */
    if (p[0].revents & POLLIN) {
      int conn = accept4(g_srv.listen_fd, NULL, NULL, SOCK_CLOEXEC);
      if (conn < 0)
        continue;
      serve_one(conn);
      close(conn);
    }
  }
  return NULL;
}

/* Called with g_srv.life held. */
static ncclResult_t server_start(void) {
  int lfd = -1, wfd = -1;
  struct sockaddr_un sa;
  lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) {
    PCL_WARN(PCL_LOG_IPC, "fd server: socket failed: %s", strerror(errno));
    goto fail;
  }
  uint64_t id = 0;
  int bound = 0;
  for (int attempt = 0; attempt < 8 && !bound; attempt++) {
    id = pcl_mem_random64();
    socklen_t len = abstract_addr(id, &sa);
    if (bind(lfd, (struct sockaddr *)&sa, len) == 0)
      bound = 1;
    else if (errno != EADDRINUSE)
      break;
  }
  if (!bound || listen(lfd, 128) != 0) {
    PCL_WARN(PCL_LOG_IPC, "fd server: bind/listen on an abstract socket failed: %s",
             strerror(errno));
    goto fail;
  }
  wfd = eventfd(0, EFD_CLOEXEC);
  if (wfd < 0) {
    PCL_WARN(PCL_LOG_IPC, "fd server: eventfd failed: %s", strerror(errno));
    goto fail;
  }
  g_srv.listen_fd = lfd;
  g_srv.wake_fd = wfd;
  g_srv.id = id;
  int err = pthread_create(&g_srv.thread, NULL, server_main, NULL);
  if (err != 0) {
    PCL_WARN(PCL_LOG_IPC, "fd server: pthread_create failed: %s", strerror(err));
    g_srv.listen_fd = g_srv.wake_fd = -1;
    goto fail;
  }
  g_srv.running = 1;
  PCL_INFO(PCL_LOG_IPC, "fd server started on planccl-mem-%016llx", (unsigned long long)id);
  return ncclSuccess;
fail:
  if (wfd >= 0)
    close(wfd);
  if (lfd >= 0)
    close(lfd);
  return ncclSystemError;
}

/* Called with g_srv.life held and no entries left. */
static void server_stop(void) {
  uint64_t one = 1;
  if (write(g_srv.wake_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
    PCL_WARN(PCL_LOG_IPC, "fd server: wake-up write failed: %s", strerror(errno));
  pthread_join(g_srv.thread, NULL);
  close(g_srv.listen_fd);
  close(g_srv.wake_fd);
  g_srv.listen_fd = g_srv.wake_fd = -1;
  g_srv.running = 0;
}

/* A forked child inherits a copy of the state but not the thread: forget it (the fds it
 * inherited stay open in the child; fork after publishing is not supported beyond this). */
static void forget_if_forked(void) {
  if (g_srv.pid == getpid())
    return;
  g_srv.pid = getpid();
  g_srv.running = 0;
  g_srv.entries = NULL;
  g_srv.nentries = 0;
  g_srv.listen_fd = g_srv.wake_fd = -1;
}

static void close_chunks(const pcl_ipc_fd_chunk_t *chunks, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (chunks[i].fd >= 0)
      close(chunks[i].fd);
}

ncclResult_t pcl_ipc_fd_publish(const pcl_ipc_fd_chunk_t *chunks, uint32_t nchunks,
                                uint64_t *server_id, uint64_t *secret, pcl_ipc_fd_entry_t **out) {
  ncclResult_t res = ncclSuccess;
  pcl_ipc_fd_entry_t *e = NULL;
  pthread_mutex_lock(&g_srv.life);
  forget_if_forked();
  PCL_CALLOC(e, 1, "ipc fd entry");
  if (e == NULL)
    goto fail;
  e->chunks = pcl_calloc(nchunks, sizeof(*chunks), "ipc fd chunks");
  if (e->chunks == NULL)
    goto fail;
  memcpy(e->chunks, chunks, nchunks * sizeof(*chunks));
  e->nchunks = nchunks;
  e->secret = pcl_mem_random64();
  if (!g_srv.running && (res = server_start()) != ncclSuccess)
    goto fail_free;
  pthread_mutex_lock(&g_srv.table);
  e->next = g_srv.entries;
  g_srv.entries = e;
  g_srv.nentries++;
  pthread_mutex_unlock(&g_srv.table);
  *server_id = g_srv.id;
  *secret = e->secret;
  *out = e;
  pthread_mutex_unlock(&g_srv.life);
  return ncclSuccess;
fail:
  res = ncclSystemError;
fail_free:
  close_chunks(chunks, nchunks);
  if (e != NULL)
    pcl_free(e->chunks);
  pcl_free(e);
  pthread_mutex_unlock(&g_srv.life);
  return res;
}

void pcl_ipc_fd_withdraw(pcl_ipc_fd_entry_t *entry) {
  if (entry == NULL)
    return;
  pthread_mutex_lock(&g_srv.life);
  forget_if_forked();
  int found = 0;
  pthread_mutex_lock(&g_srv.table);
  for (pcl_ipc_fd_entry_t **pp = &g_srv.entries; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == entry) {
      *pp = entry->next;
      g_srv.nentries--;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&g_srv.table);
  if (!found)
    PCL_WARN(PCL_LOG_IPC, "fd server: withdrawing an unknown entry");
  close_chunks(entry->chunks, entry->nchunks);
  pcl_free(entry->chunks);
  pcl_free(entry);
  if (g_srv.running && g_srv.nentries == 0)
    server_stop();
  pthread_mutex_unlock(&g_srv.life);
}

int pcl_ipc_fd_server_entries(void) {
  pthread_mutex_lock(&g_srv.life);
  forget_if_forked();
  int n = g_srv.running ? g_srv.nentries : 0;
  pthread_mutex_unlock(&g_srv.life);
  return n;
}

ncclResult_t pcl_ipc_fd_fetch(uint64_t server_id, uint64_t secret, uint32_t index, int *fd,
                              uint64_t *off, uint64_t *bytes) {
  ncclResult_t res = ncclSystemError;
  struct sockaddr_un sa;
  socklen_t len = abstract_addr(server_id, &sa);
  fd_request_t req = {.magic = PCL_IPC_FD_MAGIC, .index = index, .secret = secret};
  fd_answer_t ans;
  int got_fd = -1;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    PCL_WARN(PCL_LOG_IPC, "fd fetch: socket failed: %s", strerror(errno));
    return ncclSystemError;
  }
  set_io_timeout(s, (int)pcl_param_bootstrap_timeout_s());
  if (connect(s, (struct sockaddr *)&sa, len) != 0) {
    PCL_WARN(PCL_LOG_IPC,
             "fd fetch: cannot reach planccl-mem-%016llx: %s (is the owner in another network "
             "namespace, or gone?)",
             (unsigned long long)server_id, strerror(errno));
    goto out;
  }
  ssize_t r;
  do {
    r = send(s, &req, sizeof(req), MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  if (r != (ssize_t)sizeof(req)) {
    PCL_WARN(PCL_LOG_IPC, "fd fetch: request not sent: %s", strerror(errno));
    goto out;
  }
  struct iovec iov = {.iov_base = &ans, .iov_len = sizeof(ans)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof(ctl));
  struct msghdr msg = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
  do {
    r = recvmsg(s, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (r < 0 && errno == EINTR);
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm))
    if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)))
      memcpy(&got_fd, CMSG_DATA(cm), sizeof(int));
  if (r != (ssize_t)sizeof(ans) || ans.magic != PCL_IPC_FD_MAGIC) {
    PCL_WARN(PCL_LOG_IPC, "fd fetch: bad answer from planccl-mem-%016llx (%zd bytes)",
             (unsigned long long)server_id, r);
    goto out;
  }
  if (ans.status != 0 || got_fd < 0) {
    PCL_WARN(PCL_LOG_IPC, "fd fetch: owner refused chunk %u: %s", index,
             ans.status ? strerror(ans.status) : "no descriptor attached");
    goto out;
  }
  *fd = got_fd;
  got_fd = -1;
  *off = ans.off;
  *bytes = ans.bytes;
  res = ncclSuccess;
out:
  if (got_fd >= 0)
    close(got_fd);
  close(s);
  return res;
}
