# SPDX-License-Identifier: MIT
# Planned collectives through libplanccl.so against the real NCCL on the same inputs: every
# collective, dtype, op and in/out-of-place over 1 B .. 256 MB, one process driving both GPUs
# (ncclCommInitAll + groups) and one process per GPU; PLANCCL_STATS shows the calls that ran on
# plans. Run on a machine with 2 GPUs:
#   ctest --test-dir <build> -R coll_vs_nccl --output-on-failure
# (PLANCCL_NCCL_LIB=<real libnccl.so.2> overrides scripts/find_real_nccl.sh.)
if(TARGET planccl AND NOT PCL_SANITIZE)
  add_executable(coll_vs_nccl ${CMAKE_CURRENT_LIST_DIR}/coll_vs_nccl.cu)
  pcl_target_defaults(coll_vs_nccl)
  target_link_libraries(coll_vs_nccl PRIVATE planccl ${PCL_CUDART_STATIC} dl rt)
  add_test(NAME coll_vs_nccl
           COMMAND sh -c "PLANCCL_NCCL_LIB=\${PLANCCL_NCCL_LIB:-$(\"$1\")} exec \"$2\"" sh
                   ${PROJECT_SOURCE_DIR}/scripts/find_real_nccl.sh $<TARGET_FILE:coll_vs_nccl>)
  set_tests_properties(coll_vs_nccl PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       LABELS "gpu;nosan"
                       ENVIRONMENT "NCCL_NVLS_ENABLE=0;PLANCCL_SOCKET_IFNAME=lo;PLANCCL_STATS=1")
endif()
