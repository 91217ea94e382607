# SPDX-License-Identifier: MIT
# planccl-refbench (bench/plan_vs_ref.cu): the shipped plans and the hand-written references
# must both compute the exact result (the timings are printed, not judged); exits 77 without a GPU.
# On a GPU machine: ctest --test-dir <build> -L gpu -R refbench --output-on-failure
if(TARGET planccl-refbench AND NOT PCL_SANITIZE)
  # The allgather and reduce-scatter plans and references too (exact results, in and out of
  # place), at 2 and 4 ranks sharing the GPU.
  foreach(coll allreduce allgather reducescatter)
    set(name refbench_${coll})
    if(coll STREQUAL allreduce)
      set(name refbench)
    endif()
    add_test(NAME ${name} COMMAND planccl-refbench --coll ${coll} --ranks 2,4 --iters 10 --reps 5)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "gpu;nosan"
                         ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PCL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  endforeach()
  # Without a GPU too: a bad option is a usage error (2), never a crash or a skip.
  add_test(NAME refbench_usage
           COMMAND sh -c "\"$1\" --no-such-option; test $? -eq 2" sh
                   $<TARGET_FILE:planccl-refbench>)
  set_tests_properties(refbench_usage PROPERTIES LABELS "bench")
endif()
