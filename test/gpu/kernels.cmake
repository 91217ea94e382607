# SPDX-License-Identifier: MIT
# Kernel-level GPU tests of device primitives on their own, one GPU, one process:
#   ctest --test-dir <build> -L gpu -R kernel_ --output-on-failure
if(TARGET pcl_transport AND NOT PCL_SANITIZE)
  add_executable(kernel_fifo_watch ${CMAKE_CURRENT_LIST_DIR}/kernel_fifo_watch.cu)
  pcl_target_defaults(kernel_fifo_watch)
  target_link_libraries(kernel_fifo_watch PRIVATE pcl_transport pcl_common)
  target_include_directories(kernel_fifo_watch PRIVATE ${PROJECT_SOURCE_DIR}/kernels)
  add_test(NAME kernel_fifo_watch COMMAND kernel_fifo_watch)
  set_tests_properties(kernel_fifo_watch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60
                       LABELS "gpu;nosan")
endif()
