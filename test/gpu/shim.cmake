# SPDX-License-Identifier: MIT
# planccl pass-through on GPUs: every collective, four process models, through libplanccl.so
# linked like libnccl. Run on a machine with 2 GPUs (the real NCCL is discovered next to the torch
# wheel or on the system paths; PLANCCL_NCCL_LIB overrides):
#   ctest --test-dir <build> -R shim_passthrough --output-on-failure
# (PCL_TORCH_PYTHON=<python with torch> picks the interpreter whose wheel provides the NCCL.)
if(TARGET planccl AND NOT PCL_SANITIZE)
  add_executable(shim_passthrough ${CMAKE_CURRENT_LIST_DIR}/shim_passthrough.c)
  pcl_target_defaults(shim_passthrough)
  target_link_libraries(shim_passthrough PRIVATE planccl ${PCL_CUDART_STATIC} rt)
  add_test(NAME shim_passthrough
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/shim_passthrough.sh $<TARGET_FILE:shim_passthrough>)
  set_tests_properties(shim_passthrough PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
                       LABELS "gpu;nosan"
                       ENVIRONMENT "NCCL_NVLS_ENABLE=0;TORCH_SYMM_MEM_DISABLE_MULTICAST=1;NVSHMEM_DISABLE_NVLS=1")
endif()
# NCCL-API tests on one GPU or more: two processes, libplanccl over the recording fake NCCL,
# which computes nothing (so a right result ran on planccl's kernels, an untouched one was
# forwarded). shim_faults: a peer that never calls, ncclCommGetAsyncError, refusal, ncclCommAbort
# within 1 s, a new communicator after it. shim_windows: symmetric windows (zero-copy plans) and
# broadcast/reduce from root 1. shim_segments: eight ranks' reduce that runs only in segments.
# shim_tune: the identity the library writes, a tuning file that sends sizes to NCCL, a stale one.
# shim_config: ncclAllReduceConfig planned with config NULL, forwarded with one; suspend/resume.
# shim_real_api: NCCL 2.29+ functions through planccl against the real library called directly.
if(TARGET planccl AND TARGET fakenccl AND NOT PCL_SANITIZE)
  foreach(t shim_faults shim_windows shim_autoreg shim_programs shim_multinode shim_segments
            shim_tune shim_config shim_real_api)
    add_executable(${t} ${CMAKE_CURRENT_LIST_DIR}/${t}.c)
    pcl_target_defaults(${t})
    target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/test/mp)
    target_compile_definitions(${t} PRIVATE PCL_TEST_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    target_link_libraries(${t} PRIVATE planccl ${PCL_CUDART_STATIC} rt)
    add_test(NAME ${t} COMMAND ${t})
    set_tests_properties(${t} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "gpu;nosan"
                         ENVIRONMENT "PLANCCL_NCCL_LIB=$<TARGET_FILE:fakenccl>;PLANCCL_SOCKET_IFNAME=lo;NCCL_NVLS_ENABLE=0;TORCH_SYMM_MEM_DISABLE_MULTICAST=1;NVSHMEM_DISABLE_NVLS=1")
  endforeach()
  pcl_use_private_headers(shim_config shim) # nccl_compat_int.h: ncclAllReduceConfig
  # Six shapes, up to eight processes time-slicing one GPU.
  set_tests_properties(shim_multinode PROPERTIES TIMEOUT 900)
  # shim_autoreg runs at level 2 (cudaMalloc memory registered too); once more at level 1.
  add_test(NAME shim_autoreg_cumem COMMAND shim_autoreg 1)
  set_tests_properties(shim_autoreg_cumem PROPERTIES SKIP_RETURN_CODE 77
                       TIMEOUT 300 LABELS "gpu;nosan"
                       ENVIRONMENT "PLANCCL_NCCL_LIB=$<TARGET_FILE:fakenccl>;PLANCCL_SOCKET_IFNAME=lo;NCCL_NVLS_ENABLE=0;TORCH_SYMM_MEM_DISABLE_MULTICAST=1;NVSHMEM_DISABLE_NVLS=1")
endif()
