# Helpers every CMakeLists in the tree uses, so that a kernel source (.cu) builds the same way on
# both backends: nvcc in the cuda backend, g++ as C++ against the host SIMT emulator otherwise.

set(GPM_LIBRARY_TARGETS "" CACHE INTERNAL "gpmkit libraries to install")

# Warnings and backend flags for one target.
function(gpm_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr --extended-lambda -Xcompiler=-Wall>)
endfunction()

# Marks .cu files of a target: CUDA sources in the cuda backend, C++ sources in the host backend.
function(gpm_kernel_sources)
  if(GPM_BACKEND STREQUAL "host")
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CXX)
  endif()
endfunction()

# gpm_add_library(<name> SOURCES ... [DEPS ...]): a gpmkit layer or module library,
# exported as gpmkit::<name>.
function(gpm_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  set(target gpmkit_${name})
  gpm_kernel_sources(${ARG_SOURCES})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(gpmkit::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME gpmkit_${name})
  target_link_libraries(${target} PUBLIC ${ARG_DEPS})
  gpm_target_defaults(${target})
  set(GPM_LIBRARY_TARGETS ${GPM_LIBRARY_TARGETS} ${target} CACHE INTERNAL "")
endfunction()

# The label every test of this build carries, into <var>: `gpu` with the cuda backend (the tests
# to run on a GPU machine; without a GPU they exit 77, skipped), `host` otherwise.
function(gpm_backend_label var)
  if(GPM_BACKEND STREQUAL "cuda")
    set(${var} gpu PARENT_SCOPE)
  else()
    set(${var} host PARENT_SCOPE)
  endif()
endfunction()

# gpm_add_executable(<name> SOURCES ... [DEPS ...])
function(gpm_add_executable name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  gpm_kernel_sources(${ARG_SOURCES})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  gpm_target_defaults(${name})
endfunction()
