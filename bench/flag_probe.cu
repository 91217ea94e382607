/* SPDX-License-Identifier: MIT
 * planccl-flagprobe: what the per-call flag protocol costs a CUDA-graph kernel node, the floor
 * under a one-nop plan's cost (docs/performance.md). Variants of one kernel, each timed as a
 * graph of many back-to-back nodes: empty; the flag slots (a load at entry, every slot stored at
 * the end: the executor's protocol, kernel_abi.h); one 64-bit atomic at entry and nothing at the
 * end; a load alone (no protocol: the floor under any); a parameter read alone; a load from a
 * module variable (no parameter); two dependent loads (a pointer, then the flag through it, as a
 * descriptor is read before what it names); each also with a payload of stores. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <cuda_runtime_api.h>

#define SLOTS 128
#define ARRIVE_BITS 16

typedef struct {
  unsigned long long flag[SLOTS]; /* the slots protocol: block b reads flag[b] */
  unsigned long long word;        /* the atomic protocol: flag << 16 | blocks arrived */
  unsigned long long sink;
} probe_state_t;

enum { V_EMPTY, V_SLOTS, V_ATOMIC, V_LOAD, V_PARAM, V_SYMLOAD, V_CHAIN, V_COUNT };
static const char *const vname[V_COUNT] = {"empty",      "flag slots",  "entry atomic", "load only",
                                           "param only", "symbol load", "2 loads"};

/* V_SYMLOAD's flag: a module variable, so no kernel parameter is read for its address. */
__device__ unsigned long long probe_sym_flag[SLOTS];

/* The flag of this call for every thread of the block. */
template <int V> static __device__ __forceinline__ unsigned long long take_flag(probe_state_t *s) {
  __shared__ unsigned long long f;
  if (threadIdx.x == 0) {
    if (V == V_ATOMIC) {
      unsigned long long old;
      if (gridDim.x == 1) {
        old = atomicAdd(&s->word, 1ull << ARRIVE_BITS);
      } else {
        old = atomicAdd(&s->word, 1ull);
        /* The last block to arrive: every block of this call has its flag, so it advances the
         * flag and clears the count for the next call (stream order keeps that call out). */
        if ((old & ((1ull << ARRIVE_BITS) - 1)) == gridDim.x - 1)
          atomicAdd(&s->word, (1ull << ARRIVE_BITS) - gridDim.x);
      }
      f = (old >> ARRIVE_BITS) + 1;
    } else if (V == V_PARAM) {
      f = (unsigned long long)(uintptr_t)s + 1;
    } else if (V == V_SYMLOAD) {
      f = *(volatile unsigned long long *)&probe_sym_flag[blockIdx.x] + 1;
    } else if (V == V_CHAIN) {
      /* sink holds the address of flag[] (set up by main): pointer, then the flag. */
      const unsigned long long *q =
          (const unsigned long long *)(uintptr_t)(*(volatile unsigned long long *)&s->sink);
      f = *(volatile const unsigned long long *)&q[blockIdx.x] + 1;
    } else {
      f = *(volatile unsigned long long *)&s->flag[blockIdx.x] + 1;
    }
  }
  __syncthreads();
  return f;
}

template <int V>
__global__ void probe_kernel(probe_state_t *s, unsigned long long *out, int words) {
  if (V == V_EMPTY)
    return;
  unsigned long long f = take_flag<V>(s);
  /* The payload: `words` 8-byte stores spread over the grid, carrying the flag. */
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
    out[i] = f ^ (unsigned long long)i;
  if (V == V_SLOTS) {
    /* Block b stores the slots j == b (mod grid): read by no other block of this call. */
    for (unsigned j = blockIdx.x + threadIdx.x * gridDim.x; j < SLOTS; j += gridDim.x * blockDim.x)
      s->flag[j] = f;
  } else if (f == 0) {
    s->flag[0] = f; /* never: keeps the flag live */
  }
}

typedef void (*kfn_t)(probe_state_t *, unsigned long long *, int);
static const kfn_t kfn[V_COUNT] = {
    probe_kernel<V_EMPTY>, probe_kernel<V_SLOTS>,   probe_kernel<V_ATOMIC>, probe_kernel<V_LOAD>,
    probe_kernel<V_PARAM>, probe_kernel<V_SYMLOAD>, probe_kernel<V_CHAIN>};

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                                     \
      return -1.0;                                                                                 \
    }                                                                                              \
  } while (0)

/* Microseconds per node of a graph of `nodes` launches of variant v, replayed `reps` times. */
static double per_node(int v, int blocks, int threads, int words, probe_state_t *s,
                       unsigned long long *out, int nodes, int reps, cudaStream_t st) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaEvent_t e0, e1;
  float ms = 0;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < nodes; i++)
    kfn[v]<<<blocks, threads, 0, st>>>(s, out, words);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaStreamSynchronize(st));
  CK(cudaEventRecord(e0, st));
  for (int r = 0; r < reps; r++)
    CK(cudaGraphLaunch(ge, st));
  CK(cudaEventRecord(e1, st));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return 1000.0 * ms / ((double)nodes * reps);
}

/* The flag protocols must hand every block of every call the same, advancing flag. */
static int check_protocols(probe_state_t *s, unsigned long long *out, cudaStream_t st) {
  const int grids[] = {1, 3, 16, 1, 32, 7};
  unsigned long long *h = (unsigned long long *)malloc(32 * 512 * sizeof(*h));
  int ok = h != NULL;
  for (int v = V_SLOTS; ok && v <= V_ATOMIC; v++) {
    ok = cudaMemset(s, 0, sizeof(*s)) == cudaSuccess;
    for (int call = 0; ok && call < 6; call++) {
      int b = grids[call], words = b * 512;
      ok = cudaMemsetAsync(out, 0, words * sizeof(*out), st) == cudaSuccess;
      kfn[v]<<<b, 512, 0, st>>>(s, out, words);
      ok = ok &&
           cudaMemcpyAsync(h, out, words * sizeof(*h), cudaMemcpyDeviceToHost, st) == cudaSuccess &&
           cudaStreamSynchronize(st) == cudaSuccess;
      for (int i = 0; ok && i < words; i++)
        ok = (h[i] ^ (unsigned long long)i) == (unsigned long long)(call + 1);
      if (!ok)
        printf("flagprobe: %s: call %d (%d blocks) handed out a wrong flag\n", vname[v], call, b);
    }
  }
  free(h);
  return ok;
}

int main(int argc, char **argv) {
  int nodes = 200, reps = 20;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc)
      nodes = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc)
      reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: planccl-flagprobe [-n nodes per graph] [-r replays]\n");
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("flagprobe: no GPU\n");
    return 77;
  }
  probe_state_t *s = NULL;
  unsigned long long *out = NULL;
  cudaStream_t st;
  if (cudaMalloc((void **)&s, sizeof(*s)) != cudaSuccess ||
      cudaMalloc((void **)&out, 32 * 512 * sizeof(*out)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess ||
      cudaMemset(s, 0, sizeof(*s)) != cudaSuccess) {
    printf("flagprobe: setup failed\n");
    return 1;
  }
  if (!check_protocols(s, out, st))
    return 1;
  unsigned long long flag_addr = (unsigned long long)(uintptr_t)s->flag;
  if (cudaMemset(s, 0, sizeof(*s)) != cudaSuccess ||
      cudaMemcpy(&s->sink, &flag_addr, sizeof(flag_addr), cudaMemcpyHostToDevice) != cudaSuccess) {
    printf("flagprobe: setup failed\n");
    return 1;
  }
  printf("flagprobe: both protocols hand out one advancing flag per call (6 calls, 1-32 blocks)\n");
  printf("# us per graph node, %d nodes x %d replays; payload = 8-byte stores over the grid\n",
         nodes, reps);
  printf("%-8s %-8s %-8s", "blocks", "threads", "payload");
  for (int v = 0; v < V_COUNT; v++)
    printf(" %12s", vname[v]);
  printf("\n");
  const int shapes[][3] = {{1, 256, 0},     {1, 256, 128}, {16, 512, 0},
                           {16, 512, 2048}, {32, 512, 0},  {32, 512, 8192}};
  for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
    printf("%-8d %-8d %-8d", shapes[k][0], shapes[k][1], shapes[k][2] * 8);
    for (int v = 0; v < V_COUNT; v++) {
      double best = 1e30;
      for (int t = 0; t < 3; t++) { /* best of 3: the floor drifts between graphs */
        double us = per_node(v, shapes[k][0], shapes[k][1], shapes[k][2], s, out, nodes, reps, st);
        if (us < 0)
          return 1;
        best = us < best ? us : best;
      }
      printf(" %12.3f", best);
    }
    printf("\n");
  }
  return 0;
}
