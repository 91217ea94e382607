/* SPDX-License-Identifier: MIT
 * FIFO and proxy without a GPU: CPU threads play the GPU producers, a fake "loopback" transport
 * records what the proxy asks of it; 10^6 triggers, none lost or reordered, flush honoured. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "fifo.h"
#include "pcl_abort.h"
#include "param.h"
#include "pcl_test.h"
#include "proxy.h"

START_TEST(test_fifo_laps) {
  pcl_fifo_t *f = NULL;
  ck_assert_int_ne(pcl_fifo_create(6, PCL_FIFO_MEM_HOST, &f), ncclSuccess);
  ck_assert_int_eq(pcl_fifo_create(8, PCL_FIFO_MEM_HOST, &f), ncclSuccess);
  pcl_fifo_device_t d = pcl_fifo_device(f);
  ck_assert_uint_eq(d.size, 8);
  ck_assert_uint_eq(d.log2_size, 3);
  pcl_fifo_trigger_t t;
  ck_assert(!pcl_fifo_poll(f, &t)); /* zeroed slots are invalid for lap 0 */
  for (uint32_t i = 0; i < 100; i++) {
    uint64_t pos = pcl_fifo_host_push(d, pcl_fifo_w0(i, i * 3),
                                      pcl_fifo_w1(PCL_FIFO_TYPE_DATA, 5, 7, i * 2, 9), NULL);
    ck_assert_uint_eq(pos, i);
    ck_assert(pcl_fifo_poll(f, &t));
    ck_assert_uint_eq(pcl_fifo_trig_size(&t), i);
    ck_assert_uint_eq(pcl_fifo_trig_src_off(&t), i * 3);
    ck_assert_uint_eq(pcl_fifo_trig_dst_off(&t), i * 2);
    ck_assert_uint_eq(pcl_fifo_trig_src_mem(&t), 5);
    ck_assert_uint_eq(pcl_fifo_trig_dst_mem(&t), 7);
    ck_assert_uint_eq(pcl_fifo_trig_channel(&t), 9);
    ck_assert_uint_eq(pcl_fifo_trig_type(&t), PCL_FIFO_TYPE_DATA);
    pcl_fifo_pop(f);
    /* the slot just consumed holds last lap's parity for the next position: not valid */
    ck_assert(!pcl_fifo_poll(f, &t));
  }
  ck_assert_uint_eq(pcl_fifo_tail(f), 100);
  /* field limits */
  uint64_t w1 = pcl_fifo_w1(7, 511, 511, 0xffffffffu, 1023);
  pcl_fifo_trigger_t x = {pcl_fifo_w0(0xffffffffu, 0xffffffffu), w1};
  ck_assert_uint_eq(pcl_fifo_trig_src_mem(&x), 511);
  ck_assert_uint_eq(pcl_fifo_trig_dst_mem(&x), 511);
  ck_assert_uint_eq(pcl_fifo_trig_channel(&x), 1023);
  ck_assert_uint_eq(pcl_fifo_trig_type(&x), 7);
  ck_assert(!(w1 & PCL_FIFO_COMMIT_BIT));
  pcl_fifo_destroy(f);
  pcl_fifo_destroy(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* ---- fake transport: records puts/signals, completes them one flush poll later ---- */

#define NPROD 2
#define PER_PROD 500000
typedef struct {
  uint64_t next_seq[NPROD]; /* per producer: next expected sequence number */
  uint64_t puts, signals, completed, issued;
  uint64_t bad;
  uint64_t flush_polls;
  uint64_t sem_value[NPROD];
} fake_state_t;
static fake_state_t fk;

static ncclResult_t fake_connect(pcl_transport_ctx_t *ctx, int peer, void **conn) {
  *conn = &fk;
  return ncclSuccess;
}
static ncclResult_t fake_put(void *conn, const pcl_mem_local_t *src, uint64_t so,
                             const pcl_mem_remote_t *dst, uint64_t doff, uint64_t bytes) {
  /* src offset = sequence number, size = producer id + 1, dst offset = sequence * 2 */
  int prod = (int)bytes - 1;
  if (prod < 0 || prod >= NPROD || so != fk.next_seq[prod] || doff != so * 2 || src->id != 1 ||
      dst->mem_id != 2)
    fk.bad++;
  else
    fk.next_seq[prod]++;
  fk.puts++;
  fk.issued++;
  return ncclSuccess;
}
static ncclResult_t fake_signal(void *conn, const pcl_mem_remote_t *dst, uint64_t off,
                                uint64_t value) {
  int prod = (int)(off / 8);
  if (prod < 0 || prod >= NPROD || value != fk.sem_value[prod] + 1)
    fk.bad++;
  fk.sem_value[prod] = value;
  fk.signals++;
  fk.issued++;
  return ncclSuccess;
}
static ncclResult_t fake_flush(void *conn, int *done) {
  /* Completion lags one poll behind issue, so SYNC triggers must wait. */
  fk.flush_polls++;
  *done = fk.completed == fk.issued;
  fk.completed = fk.issued;
  return ncclSuccess;
}
static const struct pcl_transport_ops fake_ops = {
    .name = "fake",
    .connect = fake_connect,
    .put = fake_put,
    .signal = fake_signal,
    .flush = fake_flush,
};

typedef struct {
  pcl_fifo_device_t fifo;
  int id;
  int failures;
} producer_t;

static void *producer_main(void *arg) {
  producer_t *p = arg;
  for (uint32_t s = 0; s < PER_PROD; s++) {
    uint32_t type = PCL_FIFO_TYPE_DATA;
    if (s % 1000 == 999)
      type |= PCL_FIFO_TYPE_FLAG;
    if (s % 50000 == 49999)
      type |= PCL_FIFO_TYPE_SYNC;
    uint64_t pos = pcl_fifo_host_push(p->fifo, pcl_fifo_w0((uint32_t)p->id + 1, s),
                                      pcl_fifo_w1(type, 1, 2, s * 2, (uint32_t)p->id), NULL);
    if (type & PCL_FIFO_TYPE_SYNC) {
      pcl_fifo_host_wait(p->fifo, pos, NULL);
      /* Flushed: everything this producer issued before is complete. Reading fk from this
       * thread is racy in general, but next_seq only grows and the acquire on tail orders it. */
      if (__atomic_load_n(&fk.next_seq[p->id], __ATOMIC_RELAXED) < s + 1)
        p->failures++;
    }
  }
  return NULL;
}

START_TEST(test_proxy_million) {
  memset(&fk, 0, sizeof(fk));
  pcl_transport_register(PCL_TRANSPORT_LOOPBACK, &fake_ops);
  pcl_proxy_config_t cfg = {
      .rank = 0, .nranks = 2, .cuda_dev = -1, .fifo_mem = PCL_FIFO_MEM_HOST, .fifo_size = 512};
  pcl_proxy_t *px = NULL;
  ck_assert_int_eq(pcl_proxy_create(&cfg, &px), ncclSuccess);
  ck_assert_int_eq(pcl_proxy_connect(px, 1, PCL_TRANSPORT_LOOPBACK), ncclSuccess);
  pcl_mem_remote_t exp, rem;
  ck_assert_int_eq(pcl_proxy_mem_reg(px, 1, (void *)0x1000, 1ull << 40, 0, 0, &exp), ncclSuccess);
  ck_assert_int_eq(pcl_proxy_mem_reg(px, 2, (void *)0x2000, 1ull << 40, 0, 0, &exp), ncclSuccess);
  ck_assert_int_eq(pcl_proxy_mem_reg(px, 3, (void *)0x3000, 64, 0, 0, &exp), ncclSuccess);
  ck_assert_int_ne(pcl_proxy_mem_reg(px, 3, (void *)0x3000, 64, 0, 0, &exp), ncclSuccess);
  memset(&rem, 0, sizeof(rem));
  rem.size = 1ull << 40;
  rem.mem_id = 2;
  ck_assert_int_eq(pcl_proxy_mem_set_remote(px, 2, 1, &rem), ncclSuccess);
  rem.size = 64;
  rem.mem_id = 3;
  ck_assert_int_eq(pcl_proxy_mem_set_remote(px, 3, 1, &rem), ncclSuccess);
  for (uint32_t c = 0; c < NPROD; c++) {
    pcl_proxy_channel_t ch = {
        .peer = 1, .kind = PCL_TRANSPORT_LOOPBACK, .sem_mem_id = 3, .sem_off = c * 8};
    ck_assert_int_eq(pcl_proxy_channel_set(px, c, &ch), ncclSuccess);
  }
  pcl_proxy_channel_t bad = {.peer = 1, .kind = PCL_TRANSPORT_TCP};
  ck_assert_int_ne(pcl_proxy_channel_set(px, 9, &bad), ncclSuccess); /* not connected */
  ck_assert_int_eq(pcl_proxy_start(px), ncclSuccess);
  producer_t prod[NPROD];
  pthread_t th[NPROD];
  for (int i = 0; i < NPROD; i++) {
    prod[i] = (producer_t){pcl_proxy_fifo(px), i, 0};
    pthread_create(&th[i], NULL, producer_main, &prod[i]);
  }
  for (int i = 0; i < NPROD; i++)
    pthread_join(th[i], NULL);
  /* wait for the proxy to drain */
  pcl_fifo_device_t d = pcl_proxy_fifo(px);
  uint64_t total = (uint64_t)NPROD * PER_PROD;
  ck_assert_int_eq(pcl_fifo_host_wait(d, total - 1, NULL), 0);
  ck_assert_int_eq(pcl_proxy_error(px), ncclSuccess);
  ck_assert_uint_eq(pcl_proxy_consumed(px), total);
  pcl_proxy_destroy(px);
  pcl_transport_register(PCL_TRANSPORT_LOOPBACK, NULL);
  ck_assert_uint_eq(fk.bad, 0);
  ck_assert_uint_eq(fk.puts, total);
  ck_assert_uint_eq(fk.signals, total / 1000);
  for (int i = 0; i < NPROD; i++) {
    ck_assert_uint_eq(fk.next_seq[i], PER_PROD);
    ck_assert_int_eq(prod[i].failures, 0);
  }
  ck_assert(fk.flush_polls >= 2 * NPROD * (PER_PROD / 50000));
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* A trigger naming an unknown channel or out-of-range memory stops the proxy with an error. */
START_TEST(test_proxy_bad_trigger) {
  memset(&fk, 0, sizeof(fk));
  pcl_transport_register(PCL_TRANSPORT_LOOPBACK, &fake_ops);
  pcl_proxy_config_t cfg = {.rank = 0, .nranks = 2, .cuda_dev = -1, .fifo_mem = PCL_FIFO_MEM_HOST};
  pcl_proxy_t *px = NULL;
  ck_assert_int_eq(pcl_proxy_create(&cfg, &px), ncclSuccess);
  ck_assert_int_eq(pcl_proxy_connect(px, 1, PCL_TRANSPORT_LOOPBACK), ncclSuccess);
  pcl_mem_remote_t exp;
  ck_assert_int_eq(pcl_proxy_mem_reg(px, 1, (void *)0x1000, 4096, 0, 0, &exp), ncclSuccess);
  pcl_proxy_channel_t ch = {.peer = 1, .kind = PCL_TRANSPORT_LOOPBACK, .sem_mem_id = 1};
  ck_assert_int_eq(pcl_proxy_channel_set(px, 0, &ch), ncclSuccess);
  pcl_fifo_device_t d = pcl_proxy_fifo(px);
  /* no thread: drive the loop by hand */
  pcl_fifo_host_push(d, pcl_fifo_w0(16, 4090), pcl_fifo_w1(PCL_FIFO_TYPE_DATA, 1, 1, 0, 0), NULL);
  ck_assert_int_eq(pcl_proxy_poll_once(px), 0);
  ck_assert_int_eq(pcl_proxy_error(px), ncclInvalidUsage);
  pcl_proxy_destroy(px);
  pcl_transport_register(PCL_TRANSPORT_LOOPBACK, NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

/* An abort flag stops a running proxy; destroy returns promptly. */
START_TEST(test_proxy_abort) {
  volatile uint32_t abort_flag = 0;
  pcl_proxy_config_t cfg = {.rank = 0,
                            .nranks = 1,
                            .cuda_dev = -1,
                            .fifo_mem = PCL_FIFO_MEM_HOST,
                            .abort_flag = &abort_flag};
  pcl_proxy_t *px = NULL;
  ck_assert_int_eq(pcl_proxy_create(&cfg, &px), ncclSuccess);
  ck_assert_int_eq(pcl_proxy_start(px), ncclSuccess);
  pcl_abort_set(&abort_flag);
  pcl_proxy_destroy(px);
  pcl_proxy_destroy(NULL);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Polls cond(px) every millisecond for up to `limit` seconds. */
static int wait_for(int (*cond)(const pcl_proxy_t *), const pcl_proxy_t *px, double limit) {
  const double end = now_s() + limit;
  while (!cond(px) && now_s() < end)
    usleep(1000);
  return cond(px);
}

static uint64_t wakes_wanted;
static int woken(const pcl_proxy_t *px) {
  return pcl_proxy_wakes(px) >= wakes_wanted;
}

/* An idle proxy dozes (long naps that triggers cannot end); an announced launch ends the nap at
 * once, so the launch's first trigger is taken without waiting it out. The naps here are 5 s:
 * without the announcement's wake the thread would still sleep at the check. Then a trigger
 * posted after the announcement is consumed, and the thread dozes again once quiet. */
START_TEST(test_proxy_expect) {
  memset(&fk, 0, sizeof(fk));
  setenv("PLANCCL_PROXY_DOZE_US", "5000000", 1);
  pcl_param_reset();
  pcl_transport_register(PCL_TRANSPORT_LOOPBACK, &fake_ops);
  pcl_proxy_config_t cfg = {.rank = 0, .nranks = 2, .cuda_dev = -1, .fifo_mem = PCL_FIFO_MEM_HOST};
  pcl_proxy_t *px = NULL;
  ck_assert_int_eq(pcl_proxy_create(&cfg, &px), ncclSuccess);
  ck_assert_int_eq(pcl_proxy_connect(px, 1, PCL_TRANSPORT_LOOPBACK), ncclSuccess);
  pcl_mem_remote_t exp, rem;
  ck_assert_int_eq(pcl_proxy_mem_reg(px, 1, (void *)0x1000, 1 << 20, 0, 0, &exp), ncclSuccess);
  ck_assert_int_eq(pcl_proxy_mem_reg(px, 2, (void *)0x200000, 1 << 20, 0, 0, &exp), ncclSuccess);
  memset(&rem, 0, sizeof(rem));
  rem.size = 1 << 20;
  rem.mem_id = 2;
  ck_assert_int_eq(pcl_proxy_mem_set_remote(px, 2, 1, &rem), ncclSuccess);
  pcl_proxy_channel_t ch = {.peer = 1, .kind = PCL_TRANSPORT_LOOPBACK, .sem_mem_id = 1};
  ck_assert_int_eq(pcl_proxy_channel_set(px, 0, &ch), ncclSuccess);
  ck_assert_int_eq(pcl_proxy_start(px), ncclSuccess);
  pcl_proxy_expect(NULL);
  for (int round = 0; round < 2; round++) {
    const uint64_t before = pcl_proxy_wakes(px);
    ck_assert(wait_for(pcl_proxy_dozing, px, 60.0)); /* ~0.2 s of 2 us naps first */
    usleep(20000);                                   /* well inside the 5 s nap */
    const double t0 = now_s();
    wakes_wanted = before + 1;
    pcl_proxy_expect(px);
    ck_assert(wait_for(woken, px, 60.0));
    ck_assert_uint_eq(pcl_proxy_wakes(px), before + 1);
    ck_assert_msg(now_s() - t0 < 2.5, "the doze ended %.3f s after the announcement", now_s() - t0);
    /* The launch's trigger: producer 0's put of sequence 0 (fake_put's convention). */
    pcl_fifo_host_push(pcl_proxy_fifo(px), pcl_fifo_w0(1, (uint32_t)round),
                       pcl_fifo_w1(PCL_FIFO_TYPE_DATA, 1, 2, (uint32_t)round * 2, 0), NULL);
    const double end = now_s() + 60.0;
    while (pcl_proxy_consumed(px) < (uint64_t)round + 1 && now_s() < end)
      usleep(100);
    ck_assert_uint_eq(pcl_proxy_consumed(px), (uint64_t)round + 1);
    ck_assert_int_eq(pcl_proxy_error(px), ncclSuccess);
  }
  /* Destroyed while dozing: the drain and the stop wake it, rather than wait out the nap. */
  ck_assert(wait_for(pcl_proxy_dozing, px, 60.0));
  const double t0 = now_s();
  pcl_proxy_destroy(px);
  ck_assert_msg(now_s() - t0 < 2.5, "destroy took %.3f s", now_s() - t0);
  pcl_transport_register(PCL_TRANSPORT_LOOPBACK, NULL);
  ck_assert_uint_eq(fk.bad, 0);
  ck_assert_uint_eq(fk.puts, 2);
  unsetenv("PLANCCL_PROXY_DOZE_US");
  pcl_param_reset();
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

START_TEST(test_transport_stubs) {
  const struct pcl_transport_ops *o = pcl_transport_get(PCL_TRANSPORT_NONE);
  void *conn = NULL;
  int done = 0;
  ck_assert_int_eq(o->connect(NULL, 0, &conn), ncclInvalidUsage);
  ck_assert_int_eq(o->put(NULL, NULL, 0, NULL, 0, 0), ncclInvalidUsage);
  ck_assert_int_eq(o->signal(NULL, NULL, 0, 0), ncclInvalidUsage);
  ck_assert_int_eq(o->flush(NULL, &done), ncclSuccess);
  ck_assert_int_eq(done, 1);
  ck_assert_str_eq(pcl_transport_name(PCL_TRANSPORT_TCP), "tcp");
  ck_assert_ptr_nonnull(pcl_transport_get(PCL_TRANSPORT_IB)->put);
  ck_assert_ptr_nonnull(pcl_transport_get(PCL_TRANSPORT_COUNT)->put);
  PCL_ASSERT_NO_LEAKS();
}
END_TEST

int main(void) {
  Suite *s = suite_create("proxy");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_fifo_laps);
  tcase_add_test(tc, test_transport_stubs);
  tcase_add_test(tc, test_proxy_bad_trigger);
  tcase_add_test(tc, test_proxy_abort);
  tcase_add_test(tc, test_proxy_million);
  tcase_add_test(tc, test_proxy_expect);
  suite_add_tcase(s, tc);
  return pcl_test_run_suite(s);
}
