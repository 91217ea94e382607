# SPDX-License-Identifier: MIT
# Warning and sanitizer flags for planccl's own targets (never for third-party code).
function(pcl_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Werror -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall -Werror=all-warnings>)
  target_compile_definitions(${target} PRIVATE _POSIX_C_SOURCE=200809L)
  if(PCL_ENABLE_TRACE)
    target_compile_definitions(${target} PRIVATE PCL_ENABLE_TRACE=1)
  endif()
  target_link_libraries(${target} PUBLIC pcl_sys)
endfunction()

if(PCL_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
if(PCL_TSAN)
  if(PCL_SANITIZE)
    message(FATAL_ERROR "PCL_TSAN and PCL_SANITIZE exclude each other: use two build directories")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=thread>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=thread)
endif()
