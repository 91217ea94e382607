# SPDX-License-Identifier: MIT
# Transport GPU tests: memory channels between two GPUs (processes and threads), bandwidth,
# latency and init/destroy cycles. Run on a 2-GPU machine:
#   ctest --test-dir <build> -L gpu -R transport_ --output-on-failure
# or directly: <build>/test/gpu/transport_memchan [--cycles N] [--only proc|thread]
if(TARGET pcl_transport AND NOT PCL_SANITIZE)
  add_executable(transport_memchan ${CMAKE_CURRENT_LIST_DIR}/transport_memchan.cu)
  pcl_target_defaults(transport_memchan)
  target_link_libraries(transport_memchan PRIVATE pcl_transport pcl_common)
  add_test(NAME transport_memchan COMMAND transport_memchan --cycles 10000)
  set_tests_properties(transport_memchan PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200
                       LABELS "gpu;nosan" ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo")
endif()
