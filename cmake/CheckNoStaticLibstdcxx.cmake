# cmake -DLIB=<library or program> -DNM=<nm> -P CheckNoStaticLibstdcxx.cmake: fails when LIB defines std::locale's
# members, i.e. holds a static copy of libstdc++ (SharedLibstdcxx.cmake says why that crashes the process). Both symbol
# tables are read: a shared library exports the copy's symbols, a program keeps them in its static table.
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
execute_process(COMMAND ${NM} --defined-only ${LIB} OUTPUT_VARIABLE static ERROR_QUIET)  # empty when stripped
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIB} failed (${rc})")
endif()
if("${dynamic}${static}" MATCHES " _ZNSt6locale")
  file(REMOVE ${LIB})  # so that a rebuild tries again instead of leaving a binary that crashes
  message(FATAL_ERROR "${LIB} defines std::locale, so it holds a static copy of libstdc++; link the shared one")
endif()
