# SPDX-License-Identifier: MIT
# PCL_KERNELS_FROM=<another build directory of this tree>: pcl_kernels archives the kernel objects
# compiled there instead of compiling its .cu files again (nvcc spends minutes on them). For
# builds that link the kernels but never launch them, such as ./test.sh's AddressSanitizer build:
# the CUDA code gets no sanitizer flags anyway, so the objects are the same but for the build
# type's host flags. The other build must be built first, with the same kernel options.
set(PCL_KERNELS_FROM "" CACHE PATH
    "Build directory whose kernel objects pcl_kernels takes instead of compiling its own")

function(pcl_kernels_from)
  if(NOT PCL_KERNELS_FROM OR NOT TARGET pcl_kernels)
    return()
  endif()
  get_filename_component(from "${PCL_KERNELS_FROM}" ABSOLUTE)
  if(NOT EXISTS "${from}/CMakeCache.txt")
    message(FATAL_ERROR "PCL_KERNELS_FROM=${from}: not a configured build directory")
  endif()
  # Whatever changes the kernels' code must match.
  load_cache("${from}" READ_WITH_PREFIX from_ PCL_PDL PCL_KPROF PCL_ENABLE_TRACE
             CMAKE_CUDA_ARCHITECTURES CMAKE_CUDA_COMPILER)
  foreach(v PCL_PDL PCL_KPROF PCL_ENABLE_TRACE CMAKE_CUDA_ARCHITECTURES CMAKE_CUDA_COMPILER)
    set(mine "$CACHE{${v}}") # the cache's, as load_cache reads theirs
    set(theirs "${from_${v}}")
    if(v MATCHES "^PCL_")
      # Options: compare as booleans (unset = OFF).
      if(mine)
        set(mine ON)
      else()
        set(mine OFF)
      endif()
      if(theirs)
        set(theirs ON)
      else()
        set(theirs OFF)
      endif()
    endif()
    if(NOT "${mine}" STREQUAL "${theirs}")
      message(FATAL_ERROR "PCL_KERNELS_FROM=${from}: ${v} is '${theirs}' there, '${mine}' here")
    endif()
  endforeach()
  get_target_property(srcs pcl_kernels SOURCES)
  get_target_property(dir pcl_kernels SOURCE_DIR)
  file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${dir}")
  set(objs)
  foreach(s ${srcs})
    if(NOT s MATCHES "\\.cu$")
      message(FATAL_ERROR "PCL_KERNELS_FROM: pcl_kernels has a source that is not CUDA: ${s}")
    endif()
    if(NOT IS_ABSOLUTE "${s}")
      set(s "${dir}/${s}")
    endif()
    file(RELATIVE_PATH s "${dir}" "${s}") # relative to kernels/, as the object's path is
    set(o "${from}/${rel}/CMakeFiles/pcl_kernels.dir/${s}.o")
    if(NOT EXISTS "${o}")
      message(FATAL_ERROR "PCL_KERNELS_FROM: ${o} missing (build pcl_kernels in ${from} first)")
    endif()
    list(APPEND objs "${o}")
  endforeach()
  # One empty CUDA file stays, so the targets linking the kernels still link as CUDA code does
  # (the static cudart, the C++ runtime), exactly as with the compiled kernels.
  set(stub "${CMAKE_CURRENT_BINARY_DIR}/pcl_kernels_from.cu")
  file(CONFIGURE OUTPUT "${stub}" # rewritten only when it changes
       CONTENT "// pcl_kernels: the objects of ${from} (PCL_KERNELS_FROM)\n")
  set_property(TARGET pcl_kernels PROPERTY SOURCES "${stub}" ${objs})
  message(STATUS "pcl_kernels: the kernel objects of ${from}")
endfunction()
