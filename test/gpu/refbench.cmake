# SPDX-License-Identifier: MIT
# planccl-refbench (bench/plan_vs_ref.cu): the shipped 2-rank plans and the hand-written reference
# must both compute the exact sum (the timings are printed, not judged); exits 77 without a GPU.
# On a GPU machine: ctest --test-dir <build> -L gpu -R refbench --output-on-failure
if(TARGET planccl-refbench AND NOT PCL_SANITIZE)
  add_test(NAME refbench COMMAND planccl-refbench --ranks 2 --iters 10 --reps 5)
  set_tests_properties(refbench PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "gpu;nosan"
                       ENVIRONMENT "PLANCCL_SOCKET_IFNAME=lo;PCL_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  # Without a GPU too: a bad option is a usage error (2), never a crash or a skip.
  add_test(NAME refbench_usage
           COMMAND sh -c "\"$1\" --no-such-option; test $? -eq 2" sh
                   $<TARGET_FILE:planccl-refbench>)
  set_tests_properties(refbench_usage PROPERTIES LABELS "bench")
endif()
