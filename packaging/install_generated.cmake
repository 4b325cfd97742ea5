# Runs at install time (install(SCRIPT) in packaging/install.cmake), when the
# prefix is known: writes the agent's unit with the installed binary's path and
# the package's changelog, and installs both. Set before it by install(CODE):
# CORDON_SOURCE_DIR, CORDON_STAGING_DIR, CORDON_BINDIR, CORDON_DOCDIR,
# CORDON_VERSION, CORDON_MAINTAINER.
if(IS_ABSOLUTE "${CORDON_BINDIR}")
  set(binary "${CORDON_BINDIR}/cordon")
else()
  set(binary "${CMAKE_INSTALL_PREFIX}/${CORDON_BINDIR}/cordon")
endif()
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(unit_dir /lib/systemd/system)  # Debian 12 (bookworm): units are not moved to /usr/lib
else()
  set(unit_dir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()
if(IS_ABSOLUTE "${CORDON_DOCDIR}")
  set(doc_dir "${CORDON_DOCDIR}")
else()
  set(doc_dir "${CMAKE_INSTALL_PREFIX}/${CORDON_DOCDIR}")
endif()

file(MAKE_DIRECTORY "${CORDON_STAGING_DIR}")
file(READ "${CORDON_SOURCE_DIR}/packaging/cordon-agent.service.in" unit)
string(REPLACE "@CORDON_INSTALLED_BINARY@" "${binary}" unit "${unit}")
if(unit MATCHES "@CORDON_[A-Z_]+@")
  message(FATAL_ERROR "cordon-agent.service.in: ${CMAKE_MATCH_0} is not substituted")
endif()
file(WRITE "${CORDON_STAGING_DIR}/cordon-agent.service" "${unit}")
file(INSTALL "${CORDON_STAGING_DIR}/cordon-agent.service" DESTINATION "${unit_dir}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

# A native package's changelog (Debian policy 12.7), one entry for this
# version; its date honours SOURCE_DATE_EPOCH (reproducible builds).
string(TIMESTAMP date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE "${CORDON_STAGING_DIR}/changelog"
"cordon (${CORDON_VERSION}) unstable; urgency=medium

  * Release ${CORDON_VERSION}, built from the source tree with CMake
    (packaging/install.cmake); see README.md for what changed.

 -- ${CORDON_MAINTAINER}  ${date}
")
execute_process(COMMAND gzip -9nf "${CORDON_STAGING_DIR}/changelog" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip of the changelog failed")
endif()
file(INSTALL "${CORDON_STAGING_DIR}/changelog.gz" DESTINATION "${doc_dir}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
