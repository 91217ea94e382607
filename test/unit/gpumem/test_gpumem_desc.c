/* SPDX-License-Identifier: MIT
 * GPU-memory code without a GPU: the export descriptor's layout and validation, and the cuMem fd
 * server (SCM_RIGHTS over an abstract Unix socket) exercised with memfd files instead of GPU
 * allocations, within one process and across a fork. */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "mem.h"
#include "mem_int.h"
#include "param.h"
#include "pcl_test.h"

static pcl_mem_desc_t good_desc(int kind) {
  pcl_mem_desc_t d;
  memset(&d, 0, sizeof(d));
  d.magic = PCL_MEM_DESC_MAGIC;
  d.version = PCL_MEM_DESC_VERSION;
  d.kind = (uint16_t)kind;
  d.dev = 1;
  d.proc_token = 0x1234;
  d.base = 0x7f0000000000ull;
  d.span = 4u << 20;
  d.offset = 4096;
  d.bytes = 1u << 20;
  if (kind == PCL_MEM_KIND_CUMEM_FD) {
    d.flags = PCL_MEM_FLAG_VMM;
    d.nchunks = 2;
    d.fd_server = 77;
    d.fd_secret = 99;
  }
  if (kind == PCL_MEM_KIND_CUDA_IPC)
    d.ipc[5] = 1;
  if (kind != PCL_MEM_KIND_PROCESS)
    d.export_id = 0xabcd;
  return d;
}

START_TEST(test_desc_layout) {
  ck_assert_uint_eq(sizeof(pcl_mem_desc_t), PCL_MEM_DESC_BYTES);
  /* Plain bytes: a byte copy (as the bootstrap does) is the descriptor itself. */
  pcl_mem_desc_t d = good_desc(PCL_MEM_KIND_CUMEM_FD), e;
  unsigned char wire[PCL_MEM_DESC_BYTES];
  memcpy(wire, &d, sizeof(wire));
  memcpy(&e, wire, sizeof(e));
  ck_assert_int_eq(memcmp(&d, &e, sizeof(d)), 0);
  ck_assert_int_eq(pcl_mem_desc_check(&e), ncclSuccess);
  ck_assert_str_eq(pcl_mem_kind_name(PCL_MEM_KIND_PROCESS), "process");
  ck_assert_str_eq(pcl_mem_kind_name(PCL_MEM_KIND_CUDA_IPC), "cuda-ipc");
  ck_assert_str_eq(pcl_mem_kind_name(PCL_MEM_KIND_CUMEM_FD), "cumem-fd");
  ck_assert_str_eq(pcl_mem_kind_name(42), "?");
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_desc_valid_kinds) {
  for (int k = PCL_MEM_KIND_PROCESS; k <= PCL_MEM_KIND_CUMEM_FD; k++) {
    pcl_mem_desc_t d = good_desc(k);
    ck_assert_int_eq(pcl_mem_desc_check(&d), ncclSuccess);
  }
  pcl_mem_desc_t d = good_desc(PCL_MEM_KIND_PROCESS);
  d.offset = d.span - d.bytes; /* ends exactly at the span's end */
  ck_assert_int_eq(pcl_mem_desc_check(&d), ncclSuccess);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Each mutation must be refused, never crash. */
START_TEST(test_desc_invalid) {
  ck_assert_int_eq(pcl_mem_desc_check(NULL), ncclInvalidArgument);
  for (int m = 0; m < 21; m++) {
    pcl_mem_desc_t d = good_desc(m < 14 ? PCL_MEM_KIND_CUMEM_FD : PCL_MEM_KIND_CUDA_IPC);
    switch (m) {
    case 0:
      d.magic ^= 1;
      break;
    case 1:
      d.version = 2;
      break;
    case 2:
      d.kind = 0;
      break;
    case 3:
      d.kind = 9;
      break;
    case 4:
      d.dev = -1;
      break;
    case 5:
      d.flags |= 0x80;
      break;
    case 6:
      d.proc_token = 0;
      break;
    case 7:
      d.span = 0;
      break;
    case 8:
      d.bytes = 0;
      break;
    case 9:
      d.offset = d.span - d.bytes + 1;
      break;
    case 10:
      d.base = UINT64_MAX - 10;
      break;
    case 11:
      d.nchunks = 0;
      break;
    case 12:
      d.nchunks = PCL_MEM_MAX_CHUNKS + 1;
      break;
    case 13:
      d.fd_secret = 0;
      break;
    case 14:
      memset(d.ipc, 0, sizeof(d.ipc));
      break;
    case 15:
      d.nchunks = 1;
      break;
    case 16:
      d.reserved[39] = 1;
      break;
    case 17:
      d.reserved0 = 3;
      break;
    case 18:
      d.offset = UINT64_MAX;
      break;
    case 19:
      d.bytes = UINT64_MAX;
      break;
    case 20:
      d.export_id = 0; /* importers key their mappings by it */
      break;
    }
    ck_assert_msg(pcl_mem_desc_check(&d) == ncclInvalidArgument, "mutation %d accepted", m);
  }
  pcl_mem_desc_t d = good_desc(PCL_MEM_KIND_CUMEM_FD);
  d.flags = 0; /* cumem-fd memory is always VMM */
  ck_assert_int_eq(pcl_mem_desc_check(&d), ncclInvalidArgument);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_proc_token) {
  uint64_t t = pcl_mem_proc_token();
  ck_assert(t != 0);
  ck_assert(pcl_mem_proc_token() == t);
  int pfd[2];
  ck_assert_int_eq(pipe(pfd), 0);
  pid_t pid = fork();
  if (pid == 0) {
    uint64_t c = pcl_mem_proc_token();
    _exit(write(pfd[1], &c, sizeof(c)) == (ssize_t)sizeof(c) ? 0 : 1);
  }
  uint64_t child = 0;
  ck_assert_int_eq(read(pfd[0], &child, sizeof(child)), (ssize_t)sizeof(child));
  int st;
  waitpid(pid, &st, 0);
  ck_assert(child != 0 && child != t); /* a child is another address space */
  close(pfd[0]);
  close(pfd[1]);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

static int make_memfd(const char *text) {
  int fd = memfd_create("pcl-test", MFD_CLOEXEC);
  if (fd < 0)
    return -1;
  if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
    close(fd);
    return -1;
  }
  return fd;
}

static int fetch_and_compare(uint64_t id, uint64_t secret, uint32_t index, const char *text,
                             uint64_t want_off) {
  int fd = -1;
  uint64_t off = 0, bytes = 0;
  char buf[64] = {0};
  if (pcl_ipc_fd_fetch(id, secret, index, &fd, &off, &bytes) != ncclSuccess)
    return 1;
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  close(fd);
  if (n != (ssize_t)strlen(text) || strcmp(buf, text) != 0)
    return 2;
  if (off != want_off || bytes != 4096)
    return 3;
  return 0;
}

START_TEST(test_fd_server) {
  pcl_ipc_fd_chunk_t ch[2] = {{0, 4096, make_memfd("chunk zero")}, {4096, 4096, make_memfd("one")}};
  ck_assert(ch[0].fd >= 0 && ch[1].fd >= 0);
  uint64_t id = 0, secret = 0;
  pcl_ipc_fd_entry_t *e = NULL;
  ck_assert_int_eq(pcl_ipc_fd_server_entries(), 0);
  ck_assert_int_eq(pcl_ipc_fd_publish(ch, 2, &id, &secret, &e), ncclSuccess);
  ck_assert_int_eq(pcl_ipc_fd_server_entries(), 1);
  ck_assert(id != 0 && secret != 0);

  /* This process and another one get working descriptors of the same files. */
  ck_assert_int_eq(fetch_and_compare(id, secret, 0, "chunk zero", 0), 0);
  ck_assert_int_eq(fetch_and_compare(id, secret, 1, "one", 4096), 0);
  pid_t pid = fork();
  if (pid == 0)
    _exit(fetch_and_compare(id, secret, 1, "one", 4096));
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);

  /* Wrong secret or index: a clean refusal. */
  int fd = -1;
  uint64_t off, bytes;
  ck_assert_int_eq(pcl_ipc_fd_fetch(id, secret + 1, 0, &fd, &off, &bytes), ncclSystemError);
  ck_assert_int_eq(pcl_ipc_fd_fetch(id, secret, 2, &fd, &off, &bytes), ncclSystemError);
  ck_assert_int_eq(fd, -1);

  /* The last withdraw stops the server: nobody answers any more. */
  pcl_ipc_fd_withdraw(e);
  ck_assert_int_eq(pcl_ipc_fd_server_entries(), 0);
  ck_assert_int_eq(pcl_ipc_fd_fetch(id, secret, 0, &fd, &off, &bytes), ncclSystemError);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* Many publish/withdraw cycles (server start/stop each time) leak no fds and no memory. */
START_TEST(test_fd_server_cycles) {
  int before = make_memfd("probe");
  close(before);
  for (int i = 0; i < 200; i++) {
    pcl_ipc_fd_chunk_t ch[1] = {{0, 4096, make_memfd("x")}};
    pcl_ipc_fd_chunk_t ch2[1] = {{0, 4096, make_memfd("y")}};
    uint64_t id, s1, id2, s2;
    pcl_ipc_fd_entry_t *e1, *e2;
    ck_assert_int_eq(pcl_ipc_fd_publish(ch, 1, &id, &s1, &e1), ncclSuccess);
    ck_assert_int_eq(pcl_ipc_fd_publish(ch2, 1, &id2, &s2, &e2), ncclSuccess);
    ck_assert(id == id2 && s1 != s2); /* one server per process */
    ck_assert_int_eq(pcl_ipc_fd_server_entries(), 2);
    pcl_ipc_fd_withdraw(e1);
    ck_assert_int_eq(fetch_and_compare(id, s2, 0, "y", 0), 0);
    pcl_ipc_fd_withdraw(e2);
  }
  int after = make_memfd("probe");
  close(after);
  ck_assert_int_eq(after, before); /* lowest free fd unchanged: nothing left open */
  pcl_ipc_fd_withdraw(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("gpumem_desc");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_desc_layout);
  tcase_add_test(tc, test_desc_valid_kinds);
  tcase_add_test(tc, test_desc_invalid);
  tcase_add_test(tc, test_proc_token);
  tcase_add_test(tc, test_fd_server);
  tcase_add_test(tc, test_fd_server_cycles);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
