# SPDX-License-Identifier: MIT
# Transport GPU tests: memory channels between two GPUs (processes and threads), bandwidth,
# latency (with the ping-pong variants that show what it is made of) and init/destroy cycles;
# port channels driven by a kernel through the proxy over the copy engine and TCP. Run on a
# 2-GPU machine:
#   ctest --test-dir <build> -L gpu -R transport_ --output-on-failure  (200 cycles; the
#   10,000-cycle run: transport_memchan --cycles 10000)
# or directly: <build>/test/gpu/transport_memchan [--cycles N] [--only proc|thread]
#              <build>/test/gpu/transport_port [--only ce|tcp] [--max-mib N] [--chunks N]
if(TARGET pcl_transport AND NOT PCL_SANITIZE)
  add_executable(transport_memchan ${CMAKE_CURRENT_LIST_DIR}/transport_memchan.cu)
  pcl_target_defaults(transport_memchan)
  pcl_use_private_headers(transport_memchan transport) # mem_int.h: the driver entry points
  target_link_libraries(transport_memchan PRIVATE pcl_transport pcl_common)
  add_test(NAME transport_memchan COMMAND transport_memchan --cycles 200)
  set_tests_properties(transport_memchan PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200
                       LABELS "gpu;nosan" ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo")

  add_executable(transport_port ${CMAKE_CURRENT_LIST_DIR}/transport_port.cu)
  pcl_target_defaults(transport_port)
  target_link_libraries(transport_port PRIVATE pcl_transport pcl_common)
  target_include_directories(transport_port PRIVATE ${PROJECT_SOURCE_DIR}/kernels)
  add_test(NAME transport_port COMMAND transport_port)
  set_tests_properties(transport_port PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200
                       LABELS "gpu;nosan"
                       ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PLANCCL_TIMEOUT_S=60")

  # Exports and mappings shared per span, between two processes on one GPU.
  add_executable(transport_mem_share ${CMAKE_CURRENT_LIST_DIR}/transport_mem_share.c)
  pcl_target_defaults(transport_mem_share)
  pcl_use_private_headers(transport_mem_share transport) # mem_int.h: the driver entry points
  target_include_directories(transport_mem_share PRIVATE ${PROJECT_SOURCE_DIR}/test/mp)
  target_link_libraries(transport_mem_share PRIVATE pcl_transport pcl_common ${PCL_CUDART_STATIC})
  add_test(NAME transport_mem_share COMMAND transport_mem_share)
  set_tests_properties(transport_mem_share PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                       LABELS "gpu;nosan")
endif()
