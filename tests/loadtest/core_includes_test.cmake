# loadtest_core_includes_test: loadtest/core/ (the run loop, workload, summary, SLO, sweep and the ApiDriver and
# LoadClient seams) is API-neutral, so no file in it includes a header of loadtest/ outside core/: not an API family
# folder's (kserve/, speech/, generation/), not the app's at loadtest/'s top level (app.h, app_options.h: they name
# every API's options), nor report/, monitor/, http/ (which build on core). What core/ needs of them it declares.
#   cmake -DLOADTEST_DIR=<repository>/loadtest -DWORK_DIR=<scratch folder> -P core_includes_test.cmake
# The scan first runs over a folder it writes itself, with one allowed and three forbidden includes, and must find
# exactly the forbidden ones, so a scan that matches nothing cannot pass.
cmake_minimum_required(VERSION 3.25)

# The lines of the files under DIR/core that include a loadtest/ header outside loadtest/core/, as "file: line".
function(forbidden_includes dir out)
  file(GLOB_RECURSE files "${dir}/core/*")
  if(NOT files)
    message(FATAL_ERROR "no files under ${dir}/core")
  endif()
  set(found "")
  foreach(f IN LISTS files)
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]loadtest/")
    foreach(line IN LISTS lines)
      if(NOT line MATCHES "[\"<]loadtest/core/")
        file(RELATIVE_PATH rel "${dir}" "${f}")
        list(APPEND found "${rel}: ${line}")
      endif()
    endforeach()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(NOT LOADTEST_DIR OR NOT WORK_DIR)
  message(FATAL_ERROR "usage: cmake -DLOADTEST_DIR=... -DWORK_DIR=... -P core_includes_test.cmake")
endif()

set(probe "${WORK_DIR}/core_includes_probe")
file(REMOVE_RECURSE "${probe}")
file(WRITE "${probe}/core/seam.h" "#pragma once\n#include \"loadtest/core/call.h\"\n#include \"loadtest/kserve/infer_client.h\"\n")
file(WRITE "${probe}/core/seam.cc" "  #  include <loadtest/speech/wer.h>\n#include \"loadtest/app_options.h\"\n")
forbidden_includes("${probe}" probe_found)
list(LENGTH probe_found probe_count)
if(NOT probe_count EQUAL 3)
  message(FATAL_ERROR "the scan is broken: it found ${probe_count} forbidden includes of 3 in its probe: ${probe_found}")
endif()
file(REMOVE_RECURSE "${probe}")

forbidden_includes("${LOADTEST_DIR}" found)
if(found)
  list(JOIN found "\n  " listing)
  message(FATAL_ERROR "loadtest/core/ must include no header of loadtest/ outside core/ (declare what it needs, "
                      "or move the API-neutral part into core/):\n  ${listing}")
endif()
message(STATUS "loadtest/core/ includes only loadtest/core/ headers")
