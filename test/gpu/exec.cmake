# SPDX-License-Identifier: MIT
# Executor + kernels GPU test: every 2-rank plan against the collective's definition (all dtypes
# and ops, in/out-of-place, several sizes), CUDA graphs, plan switching, two communicators and
# the LL allreduce latency; two threads, then two processes. Run on a 2-GPU machine:
#   ctest --test-dir <build> -L gpu -R exec_plans --output-on-failure
# or directly: PCL_SOURCE_DIR=<src> <build>/test/gpu/exec_plans [--only thread|proc] [--quick]
if(TARGET pcl_exec AND TARGET pcl_kernels AND NOT PCL_SANITIZE)
  add_executable(exec_plans ${CMAKE_CURRENT_LIST_DIR}/exec_plans.cu)
  pcl_target_defaults(exec_plans)
  target_link_libraries(exec_plans PRIVATE pcl_exec pcl_plan pcl_transport pcl_kernels pcl_common)
  add_test(NAME exec_plans COMMAND exec_plans)
  set_tests_properties(exec_plans PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS "gpu;nosan"
                       ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PCL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
# The port-channel plans again with their channels over TCP (staged through host memory).
if(TARGET exec_plans)
  add_test(NAME exec_plans_tcp COMMAND exec_plans --port-kind tcp --port-only)
  set_tests_properties(exec_plans_tcp PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "gpu;nosan"
                       ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PCL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
