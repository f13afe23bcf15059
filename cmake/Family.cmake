# kk_family(<name> [CORE file...] [CUDA file...] [SM90A file...] [TESTING file...] [TESTING_CUDA file...])
#
# Declares an op family's sources, in its own folder's sources.cmake (src/ops/<family>/sources.cmake), by kind:
#   CORE          host C++ of every build (entry points and checks, planner rules, the CPU reference)
#   CUDA          host launchers and kernels built for every architecture of KERNELKIT_CUDA_ARCHS
#   SM90A         kernels built for sm_90a alone (wgmma / TMA), when the architecture list targets Hopper
#   TESTING       the family's test / verify / bench cases (the kernelkit_testing library)
#   TESTING_CUDA  CUDA sources of those cases
# Paths are relative to the fragment's folder. The top-level CMakeLists.txt builds the targets from the collected
# lists, and build.toml is generated from the same lists (cmake/BuildToml.cmake).
function(kk_family name)
  cmake_parse_arguments(F "" "" "CORE;CUDA;SM90A;TESTING;TESTING_CUDA" ${ARGN})
  file(RELATIVE_PATH dir ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_LIST_DIR})
  foreach(kind CORE CUDA SM90A TESTING TESTING_CUDA)
    set(files)
    foreach(f IN LISTS F_${kind})
      list(APPEND files ${dir}/${f})
    endforeach()
    set_property(GLOBAL APPEND PROPERTY KK_${kind}_SOURCES ${files})
  endforeach()
  set_property(GLOBAL APPEND PROPERTY KK_FAMILIES ${name})
endfunction()

# The sources of one kind collected so far (relative to the source root) into `var`.
function(kk_sources kind var)
  get_property(files GLOBAL PROPERTY KK_${kind}_SOURCES)
  set(${var} ${files} PARENT_SCOPE)
endfunction()

# kk_tests([CPU file...] [CPU_CUDA file...] [GPU file...]) in tests/<family>/tests.cmake: the family's GoogleTest
# sources for the CPU test binary (CPU_CUDA: those that need nvcc for the host, e.g. a kernel header's addressing run on
# the CPU) and the GPU test binary. Paths relative to the fragment's folder.
function(kk_tests)
  cmake_parse_arguments(T "" "" "CPU;CPU_CUDA;GPU" ${ARGN})
  foreach(kind CPU CPU_CUDA GPU)
    set(files)
    foreach(f IN LISTS T_${kind})
      list(APPEND files ${CMAKE_CURRENT_LIST_DIR}/${f})
    endforeach()
    set_property(GLOBAL APPEND PROPERTY KK_TESTS_${kind} ${files})
  endforeach()
endfunction()

# A target's C++ sources in unity batches, its .cu sources one by one: CMake 3.31 and later batch CUDA sources too, and
# a batch of kernel files is one long nvcc run where separate files build in parallel (and a batch sees its files'
# names side by side, which the host-only builds of older CMake never check).
function(kk_unity_build target)
  get_target_property(srcs ${target} SOURCES)
  list(FILTER srcs INCLUDE REGEX "\\.cu$")
  if(srcs)
    set_source_files_properties(${srcs} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
endfunction()
