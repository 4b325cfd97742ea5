# cmake -DPAGES=<build>/docs/man1 -DOUT=<build>/packaging/man1 -P gzip_man_pages.cmake
# writes OUT/<page>.1.gz for every PAGES/<page>.1, compressed as Debian policy
# 12.1 asks (gzip -9, and -n: no name or date inside, so the same page gives the
# same bytes). OUT holds nothing else: pages no longer made go.
file(GLOB pages "${PAGES}/*.1")
file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
foreach(page ${pages})
  get_filename_component(name "${page}" NAME)
  execute_process(COMMAND gzip -9nc "${page}" OUTPUT_FILE "${OUT}/${name}.gz" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${page} failed")
  endif()
endforeach()
