# SPDX-License-Identifier: MIT
# Locates the dependencies: yajl and Check through pkg-config, ibverbs and the CUDA toolkit's
# headers (nccl.h included) and runtime through CUDA_HOME.
find_package(PkgConfig REQUIRED)
pkg_check_modules(YAJL REQUIRED IMPORTED_TARGET yajl)
if(PCL_BUILD_TESTS)
  pkg_check_modules(CHECK REQUIRED IMPORTED_TARGET check)
endif()
find_package(Threads REQUIRED)

find_path(PCL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDA_HOME}/include REQUIRED)
find_path(PCL_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${CUDA_HOME}/include
          ${CUDA_HOME}/targets/x86_64-linux/include REQUIRED)
find_library(PCL_CUDART_STATIC cudart_static HINTS ${CUDA_HOME}/lib64
             ${CUDA_HOME}/targets/x86_64-linux/lib REQUIRED)

find_path(PCL_IBVERBS_INCLUDE_DIR infiniband/verbs.h)
find_library(PCL_IBVERBS_LIBRARY ibverbs)
if(NOT PCL_IBVERBS_INCLUDE_DIR OR NOT PCL_IBVERBS_LIBRARY)
  message(FATAL_ERROR "libibverbs-dev is required (apt-get install libibverbs-dev)")
endif()

# One interface target that every module links: NCCL and CUDA headers, threads, dl.
add_library(pcl_sys INTERFACE)
target_include_directories(pcl_sys SYSTEM INTERFACE ${PCL_NCCL_INCLUDE_DIR} ${PCL_CUDA_INCLUDE_DIR})
target_link_libraries(pcl_sys INTERFACE Threads::Threads ${CMAKE_DL_LIBS})
