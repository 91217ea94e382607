/* SPDX-License-Identifier: MIT
 * Stands in for libtorch_cuda.so in the discovery tests: planccl looks for a loaded libtorch and
 * searches the nvidia/nccl package next to it. */
__attribute__((visibility("default"))) int pcl_stub_torch_marker(void) {
  return 42;
}
