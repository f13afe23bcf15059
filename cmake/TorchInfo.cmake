# The torch of the Python environment, for the op library (torch-ext): include and library paths, whether it has CUDA,
# and its libstdc++ string ABI. The ABI is applied to the whole build, the core included: the op library links the
# static core, and Status carries a std::string across that boundary, so a core compiled with the other ABI would turn
# every error the core reports into a crash (torch wheels since 2.7 use the C++11 ABI, which is also g++'s default).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import sysconfig, torch, torch.utils.cpp_extension as c; print(','.join(c.include_paths())); print(c.library_paths()[0]); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(int(torch.version.cuda is not None)); print(sysconfig.get_paths()['include'])"
  OUTPUT_VARIABLE KK_TORCH_INFO OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE KK_TORCH_RC ERROR_QUIET)
if(NOT KK_TORCH_RC EQUAL 0)
  message(FATAL_ERROR "KERNELKIT_BUILD_TORCH: `import torch` failed with ${Python3_EXECUTABLE}; install torch first")
endif()
string(REPLACE "\n" ";" KK_TORCH_INFO "${KK_TORCH_INFO}")
list(GET KK_TORCH_INFO 0 KK_TORCH_INCLUDES)
list(GET KK_TORCH_INFO 1 KK_TORCH_LIBDIR)
list(GET KK_TORCH_INFO 2 KK_TORCH_CXX11_ABI)
list(GET KK_TORCH_INFO 3 KK_TORCH_HAS_CUDA)
list(GET KK_TORCH_INFO 4 KK_PYTHON_INCLUDE)  # Python.h's folder, for the op library's eager fast path
string(REPLACE "," ";" KK_TORCH_INCLUDES "${KK_TORCH_INCLUDES}")
if(NOT KK_TORCH_CXX11_ABI)
  # Only when it differs from libstdc++'s default: unchanged command lines keep the ccache hits shared with the other
  # build trees of a checkout (CI compiles the core once).
  add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=0)
endif()
message(STATUS "kernelkit: torch at ${KK_TORCH_LIBDIR}, _GLIBCXX_USE_CXX11_ABI=${KK_TORCH_CXX11_ABI} (every target)")
