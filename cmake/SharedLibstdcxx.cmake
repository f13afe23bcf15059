# kk_link_shared_libstdcxx(target): a shared library of ours that is loaded into someone else's process (the op library
# into torch's, libkernelkit_c.so into Python's) must use the process's libstdc++.so, never a static copy of it.
#
# Seen on the H200 machine (g++ 13.3): the op library came out holding libstdc++'s own code (ostream, locale,
# codecvt), and the first message the core formatted with an ostream crashed Python: that copy looked up locale facets
# by ids which the already loaded libstdc++.so had assigned, and called the wrong virtual function. So every error the
# core reported was a segfault there (under cuda-gdb: TensorView::shape_string's ostream << long landing in
# std::codecvt<char16_t>::do_unshift, both resolved inside the op library), while the same code raised cleanly here.
# g++ falls back to libstdc++.a when its libstdc++.so development link is absent.
#
# Naming the runtime library itself on the link line resolves every std:: symbol to it before any archive can, whatever
# the toolchain's defaults (it is the same library -lstdc++ finds where the link exists); the check after the link fails
# the build, rather than the process, if a static copy still got in.
function(kk_link_shared_libstdcxx target)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU" OR APPLE)
    return()
  endif()
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6 OUTPUT_VARIABLE runtime
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT IS_ABSOLUTE "${runtime}")
    message(FATAL_ERROR "kernelkit: ${target} must link the shared libstdc++, and ${CMAKE_CXX_COMPILER} does not find "
                        "libstdc++.so.6")
  endif()
  target_link_libraries(${target} PRIVATE "${runtime}")
  if(NOT CMAKE_NM)
    return()  # no nm to check with (the link above is the fix; the check only guards it)
  endif()
  add_custom_command(TARGET ${target} POST_BUILD VERBATIM
    COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:${target}> -DNM=${CMAKE_NM}
            -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/CheckNoStaticLibstdcxx.cmake)
endfunction()
