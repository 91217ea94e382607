# SPDX-License-Identifier: MIT
# planccl-refbench (bench/plan_vs_ref.cu): the shipped plans and the hand-written references
# must both compute the exact result (the timings are printed, not judged); exits 77 without a GPU.
# On a GPU machine: ctest --test-dir <build> -L gpu -R refbench --output-on-failure
if(TARGET planccl-refbench AND NOT PCL_SANITIZE)
  # Every collective's plans and reference (exact results; all but the one-phase allreduce in
  # and out of place), at 2 and 4 ranks sharing the GPU. The two-phase allreduce plans start
  # above 64 KiB (4 ranks) and 128 KiB (2 ranks): 8K runs the reference alone, the others both.
  # Simple allreduce: 4160 bytes splits into uneven block slices; the pipelined form's 2M runs
  # several 16 KiB units per block, and 1049088 ends each block's slice in a part of a unit.
  foreach(coll allreduce allgather reducescatter allreduce2 broadcast reduce allreduce_simple
          allreduce_simple_pipe)
    set(name refbench_${coll})
    set(sizes)
    if(coll STREQUAL allreduce)
      set(name refbench)
    elseif(coll STREQUAL allreduce2)
      set(sizes --sizes 8K,192K,1M)
    elseif(coll STREQUAL allreduce_simple)
      set(sizes --sizes 4160,64K,1M)
    elseif(coll STREQUAL allreduce_simple_pipe)
      set(sizes --sizes 4K,1049088,2M)
    endif()
    add_test(NAME ${name} COMMAND planccl-refbench --coll ${coll} --ranks 2,4 ${sizes} --iters 10
                                  --reps 5)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "gpu;nosan"
                         ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PCL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  endforeach()
  # Without a GPU too: a bad option is a usage error (2), never a crash or a skip.
  add_test(NAME refbench_usage
           COMMAND sh -c "\"$1\" --no-such-option; test $? -eq 2" sh
                   $<TARGET_FILE:planccl-refbench>)
  set_tests_properties(refbench_usage PROPERTIES LABELS "bench")
endif()
