# SPDX-License-Identifier: MIT
# Locates the dependencies without requiring pkg-config (GPU hosts often lack it): yajl and Check
# as static archives (so libplanccl.so needs nothing at run time beyond libc and the driver),
# ibverbs headers (the library itself is dlopen'ed), and the CUDA toolkit (nccl.h included)
# through CUDA_HOME. CMAKE_PREFIX_PATH may point at an unpacked package tree.
find_package(Threads REQUIRED)

find_path(PCL_YAJL_INCLUDE_DIR yajl/yajl_tree.h)
find_library(PCL_YAJL_LIBRARY NAMES libyajl_s.a yajl_s yajl)
if(NOT PCL_YAJL_INCLUDE_DIR OR NOT PCL_YAJL_LIBRARY)
  message(FATAL_ERROR "yajl not found (apt-get install libyajl-dev)")
endif()
add_library(PkgConfig::YAJL INTERFACE IMPORTED)
target_include_directories(PkgConfig::YAJL SYSTEM INTERFACE ${PCL_YAJL_INCLUDE_DIR})
target_link_libraries(PkgConfig::YAJL INTERFACE ${PCL_YAJL_LIBRARY})

if(PCL_BUILD_TESTS)
  find_path(PCL_CHECK_INCLUDE_DIR check.h)
  find_library(PCL_CHECK_LIBRARY NAMES libcheck_pic.a libcheck.a check)
  find_library(PCL_SUBUNIT_LIBRARY NAMES libsubunit.a subunit)
  if(NOT PCL_CHECK_INCLUDE_DIR OR NOT PCL_CHECK_LIBRARY)
    message(FATAL_ERROR "Check not found (apt-get install check libsubunit-dev)")
  endif()
  add_library(PkgConfig::CHECK INTERFACE IMPORTED)
  target_include_directories(PkgConfig::CHECK SYSTEM INTERFACE ${PCL_CHECK_INCLUDE_DIR})
  target_link_libraries(PkgConfig::CHECK INTERFACE ${PCL_CHECK_LIBRARY} Threads::Threads rt m)
  if(PCL_SUBUNIT_LIBRARY)
    target_link_libraries(PkgConfig::CHECK INTERFACE ${PCL_SUBUNIT_LIBRARY})
  endif()
endif()

find_path(PCL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDA_HOME}/include REQUIRED)
find_path(PCL_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${CUDA_HOME}/include
          ${CUDA_HOME}/targets/x86_64-linux/include REQUIRED)
find_library(PCL_CUDART_STATIC cudart_static HINTS ${CUDA_HOME}/lib64
             ${CUDA_HOME}/targets/x86_64-linux/lib REQUIRED)

find_path(PCL_IBVERBS_INCLUDE_DIR infiniband/verbs.h)
find_library(PCL_IBVERBS_LIBRARY ibverbs)
if(NOT PCL_IBVERBS_INCLUDE_DIR)
  message(FATAL_ERROR "ibverbs headers not found (apt-get install libibverbs-dev)")
endif()

# One interface target that every module links: NCCL and CUDA headers, threads, dl.
add_library(pcl_sys INTERFACE)
target_include_directories(pcl_sys SYSTEM INTERFACE ${PCL_NCCL_INCLUDE_DIR} ${PCL_CUDA_INCLUDE_DIR})
target_link_libraries(pcl_sys INTERFACE Threads::Threads ${CMAKE_DL_LIBS})
