# SPDX-License-Identifier: MIT
# Executor + kernels GPU test: every plan (2, 4, 8 ranks, multi-node with emulated hosts) against
# the CPU simulator's output bit for bit (all dtypes and ops, in/out-of-place, LL16/LL8, several
# sizes), CUDA graphs for every plan kind, plan switching, two communicators and the latency;
# ranks as threads sharing the GPUs (rank r on GPU r % ngpus), as processes with a GPU per rank.
# Runs on one GPU or more:
#   ctest --test-dir <build> -L gpu -R exec_plans --output-on-failure
# or directly: PCL_SOURCE_DIR=<src> <build>/test/gpu/exec_plans [--only thread|proc] [--quick]
#   [--ranks 2,4,8] [--filter a,b] [--port-kind ce|tcp] [--port-only] [--no-graph] [--no-faults]
#   [--no-latency]
# The 2-rank group ends with the kernel faults (exec_faults.cu): a rank that never launches or
# stops between calls, an abort while a kernel spins; each must end with the error and a hang
# report, and a fresh context must work after them. --soak N runs, instead of all that, N mixed
# planned allreduce calls per group, each checked on the GPU (exec_soak.cu).
if(TARGET pcl_exec AND TARGET pcl_kernels AND NOT PCL_SANITIZE)
  add_executable(exec_plans ${CMAKE_CURRENT_LIST_DIR}/exec_plans.cu
                 ${CMAKE_CURRENT_LIST_DIR}/exec_rank.cu ${CMAKE_CURRENT_LIST_DIR}/exec_sweep.cu
                 ${CMAKE_CURRENT_LIST_DIR}/exec_faults.cu ${CMAKE_CURRENT_LIST_DIR}/exec_soak.cu
                 ${CMAKE_CURRENT_LIST_DIR}/exec_rankmain.cu)
  pcl_target_defaults(exec_plans)
  pcl_use_private_headers(exec_plans executor) # sim_int.h: the simulator's dtype facts
  target_link_libraries(exec_plans PRIVATE pcl_exec pcl_plan pcl_transport pcl_kernels pcl_common)
  add_test(NAME exec_plans COMMAND exec_plans)
  set_tests_properties(exec_plans PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "gpu;nosan"
                       ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PCL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
# The port-channel plans again with their channels over TCP (staged through host memory); the
# quick set (3 dtypes, 2 sizes): the full one took over 4 minutes on one H200.
if(TARGET exec_plans)
  add_test(NAME exec_plans_tcp COMMAND exec_plans --port-kind tcp --port-only --quick)
  set_tests_properties(exec_plans_tcp PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "gpu;nosan"
                       ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PCL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
# Across the 32-bit wrap of the packets' flag: the communicators start as if 2^32 - 1 calls had
# run, so every group's first call is the one whose flag's low half is 0, over zeroed scratch
# (before pcl_kflag32, its readers took the zeroes for the call's packets).
if(TARGET exec_plans)
  add_test(NAME exec_plans_wrap
           COMMAND exec_plans --only thread --quick --no-faults --no-latency --first-flag 0xffffffff)
  set_tests_properties(exec_plans_wrap PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "gpu;nosan"
                       ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PCL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
