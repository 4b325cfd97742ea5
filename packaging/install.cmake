# What `cmake --install` puts where, and the Debian package made from the same
# rules: cordon_<version>_amd64.deb (`cmake --build build --target deb` builds
# what it holds and makes it; `cpack -G DEB` in a built build directory makes
# it). Included by the top CMakeLists.txt
# after the cordon and cordon_docs targets; tests/package/install_test.sh
# installs the package into a fresh Debian 12 root and runs it there.
#
# Layout for the prefix /usr (the package):
#   /usr/bin/cordon                              the binary: the BPF programs are inside it
#                                                (skeletons); no file is read from the package
#                                                at run time. bin, not sbin: `policy check`,
#                                                `explain` and --help work unprivileged, and
#                                                the pages are in section 1.
#   /lib/systemd/system/cordon-agent.service     ExecStart= is the installed binary's path;
#                                                Debian 12 keeps units in /lib (other
#                                                prefixes: <prefix>/lib/systemd/system)
#   /usr/share/man/man1/cordon*.1.gz             one page per command (gzip -9n)
#   /usr/share/bash-completion/completions/cordon, /usr/share/zsh/vendor-completions/_cordon
#   /usr/share/doc/cordon/examples/agent.yaml    the agent's configuration, every default
#                                                written out: an example, not a conffile
#                                                (without /etc/cordon/agent.yaml the agent
#                                                uses exactly these values)
#   /usr/share/doc/cordon/examples/policies/     policy/examples
#   /usr/share/doc/cordon/copyright, changelog.gz
#   /usr/share/lintian/overrides/cordon           the statically linked libraries (deliberate)
include(GNUInstallDirs)
set(CORDON_PACKAGE_MAINTAINER "cordon maintainers <maintainers@users.noreply.a-seed-d59400c1.example>"
    CACHE STRING "Maintainer: of the Debian package")

install(TARGETS cordon RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_BINARY_DIR}/packaging/man1/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${CORDON_DOCS}/bash/cordon DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${CORDON_DOCS}/zsh/_cordon DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/agent.yaml.example RENAME agent.yaml
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/policy/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/policies)
install(FILES ${CMAKE_SOURCE_DIR}/packaging/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(CORDON_STATIC)
  install(FILES ${CMAKE_SOURCE_DIR}/packaging/lintian-overrides RENAME cordon
          DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides)
endif()
# The unit and the changelog are written at install time: only then is the
# prefix known (cpack installs with /usr whatever the build was configured with).
install(CODE "set(CORDON_SOURCE_DIR \"${CMAKE_SOURCE_DIR}\")
set(CORDON_STAGING_DIR \"${CMAKE_BINARY_DIR}/packaging\")
set(CORDON_BINDIR \"${CMAKE_INSTALL_BINDIR}\")
set(CORDON_DOCDIR \"${CMAKE_INSTALL_DOCDIR}\")
set(CORDON_VERSION \"${PROJECT_VERSION}\")
set(CORDON_MAINTAINER \"${CORDON_PACKAGE_MAINTAINER}\")")
install(SCRIPT ${CMAKE_SOURCE_DIR}/packaging/install_generated.cmake)

# ---- the Debian package --------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cordon)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${CORDON_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "confine untrusted code with eBPF: default-deny network, files, exec")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "cordon runs a command in a sandbox (cordon run) or confines an existing
cgroup v2 (cordon attach) under a declarative default-deny policy enforced
by BPF programs in the kernel: network egress and socket kinds, files,
exec, devices, sysctl and tampering, with audit events for every denial.
Enforcement is pinned in bpffs and does not depend on a running process.
.
Where the kernel refuses BPF LSM programs, cordon run falls back to
Landlock and seccomp and cordon attach to detection; cordon doctor says
what this kernel enforces.
.
This package contains the cordon command, its manual pages and shell
completion, and a systemd unit for the optional event agent
(cordon-agent.service: audit sinks, cordon tail, Prometheus metrics). The
unit is neither enabled nor started on installation.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # cordon_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends: from dpkg-shlibdeps (dpkg-dev). With the default static
# third-party libraries that is libc6 alone.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The debug information stays in build/cordon; the packaged binary is stripped.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
# Absolute destinations (/lib/systemd/system) go below the staging directory.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/packaging/debian/postinst
    ${CMAKE_SOURCE_DIR}/packaging/debian/prerm
    ${CMAKE_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
# cpack installs through the preinstall target, which would first build every
# target (the tests, the benchmarks, the fuzzers' sub-build): the package needs
# two. So `cmake --build build --target install` no longer builds everything
# first either (`cmake --install` never did). `cmake --build build --target deb`
# builds those two and makes the package in the build directory.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
add_custom_target(deb COMMAND ${CMAKE_CPACK_COMMAND} -G DEB --config ${CMAKE_BINARY_DIR}/CPackConfig.cmake
                  WORKING_DIRECTORY ${CMAKE_BINARY_DIR} VERBATIM)
add_dependencies(deb cordon cordon_docs)
