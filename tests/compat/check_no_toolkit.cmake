# Fails if any object of the probe, gpudiag-health or the fake drivers was compiled
# with a header from a CUDA toolkit: the build must work on a node without one. The
# compiler's dependency files (*.o.d) list every header each object included.
# Run as: cmake -DBUILD_DIR=<build> -P check_no_toolkit.cmake
file(GLOB_RECURSE depfiles
  "${BUILD_DIR}/probe/CMakeFiles/*.o.d"
  "${BUILD_DIR}/healthcheck/CMakeFiles/*.o.d"
  "${BUILD_DIR}/nodeinfo/CMakeFiles/*.o.d"
  "${BUILD_DIR}/util/CMakeFiles/*.o.d"
  "${BUILD_DIR}/config/CMakeFiles/*.o.d"
  "${BUILD_DIR}/tests/fakes/CMakeFiles/*.o.d")
list(LENGTH depfiles n)
if(n EQUAL 0)
  message(FATAL_ERROR "no dependency files under ${BUILD_DIR}: build first")
endif()
foreach(d IN LISTS depfiles)
  file(READ "${d}" text)
  if(text MATCHES "(/usr/local/cuda[^ \n]*|[^ \n]*/(cuda|nccl|nvml|cuda_runtime)\\.h)")
    message(FATAL_ERROR "${d} includes ${CMAKE_MATCH_1}: the build must not need a CUDA toolkit")
  endif()
endforeach()
message(STATUS "${n} objects, none includes a CUDA toolkit header")
