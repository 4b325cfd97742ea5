# cmake -DDOCS=<build>/docs -P gzip_man_pages.cmake: DOCS/man1.gz/<page>.1.gz
# for every DOCS/man1/<page>.1, compressed as Debian policy 12.1 asks (gzip -9,
# and -n: no name or date inside, so the same page gives the same bytes).
# Pages no longer made are removed from man1.gz/.
file(GLOB pages "${DOCS}/man1/*.1")
file(REMOVE_RECURSE "${DOCS}/man1.gz")
file(MAKE_DIRECTORY "${DOCS}/man1.gz")
foreach(page ${pages})
  get_filename_component(name "${page}" NAME)
  execute_process(COMMAND gzip -9nc "${page}" OUTPUT_FILE "${DOCS}/man1.gz/${name}.gz" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${page} failed")
  endif()
endforeach()
