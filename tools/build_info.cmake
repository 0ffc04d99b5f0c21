# tools/build_info.cmake: run at every build (cmake -P) to write
# sf_build_info.h with the commit the binary is built from, so
# `spanfence --version` names it. The file is rewritten only when the
# commit changes, so an unchanged tree does not relink.
#   -DSRC=<source dir> -DOUT=<header>
execute_process(COMMAND git -C ${SRC} describe --always --dirty --abbrev=12
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "/* written by tools/build_info.cmake */\n#define SF_COMMIT \"${commit}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
