# Builds BPF C into one linked object and a bpftool skeleton header.
#
#   cordon_bpf_skeleton(NAME <name> SOURCES a.bpf.c b.bpf.c ... INCLUDES dirs...)
#
# Produces an INTERFACE target <name>_skel whose include directory holds
# <name>.skel.h. vmlinux.h is generated once from the build host's BTF
# (/sys/kernel/btf/vmlinux); CO-RE relocations make the object portable.

find_program(BPF_CLANG NAMES clang clang-14 clang-16 clang-19 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

set(CORDON_BTF_SOURCE "/sys/kernel/btf/vmlinux" CACHE FILEPATH "BTF used to generate vmlinux.h")
set(CORDON_BPF_GEN_DIR "${CMAKE_BINARY_DIR}/bpf")
file(MAKE_DIRECTORY "${CORDON_BPF_GEN_DIR}")

add_custom_command(
  OUTPUT "${CORDON_BPF_GEN_DIR}/vmlinux.h"
  COMMAND ${BPFTOOL} btf dump file ${CORDON_BTF_SOURCE} format c > "${CORDON_BPF_GEN_DIR}/vmlinux.h.tmp"
  COMMAND ${CMAKE_COMMAND} -E rename "${CORDON_BPF_GEN_DIR}/vmlinux.h.tmp" "${CORDON_BPF_GEN_DIR}/vmlinux.h"
  COMMENT "Generating vmlinux.h from ${CORDON_BTF_SOURCE}"
  VERBATIM)

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|amd64")
  set(BPF_TARGET_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(BPF_TARGET_ARCH arm64)
else()
  set(BPF_TARGET_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()

function(cordon_bpf_skeleton)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;INCLUDES;DEPENDS" ${ARGN})
  set(objs)
  set(incflags -I${CORDON_BPF_GEN_DIR})
  foreach(inc ${ARG_INCLUDES})
    list(APPEND incflags -I${inc})
  endforeach()
  file(GLOB_RECURSE bpf_headers CONFIGURE_DEPENDS
    "${CMAKE_SOURCE_DIR}/bpf/*.h")
  foreach(src ${ARG_SOURCES})
    get_filename_component(base ${src} NAME_WE)
    set(obj "${CORDON_BPF_GEN_DIR}/${ARG_NAME}.${base}.bpf.o")
    add_custom_command(
      OUTPUT ${obj}
      COMMAND ${BPF_CLANG} -target bpf -g -O2 -Wall -Werror -D__TARGET_ARCH_${BPF_TARGET_ARCH}
              ${incflags} -c ${src} -o ${obj}
      DEPENDS ${src} ${bpf_headers} "${CORDON_BPF_GEN_DIR}/vmlinux.h" ${ARG_DEPENDS}
      COMMENT "BPF ${src}"
      VERBATIM)
    list(APPEND objs ${obj})
  endforeach()
  set(linked "${CORDON_BPF_GEN_DIR}/${ARG_NAME}.bpf.o")
  set(skel "${CORDON_BPF_GEN_DIR}/${ARG_NAME}.skel.h")
  add_custom_command(
    OUTPUT ${linked}
    COMMAND ${BPFTOOL} gen object ${linked} ${objs}
    DEPENDS ${objs}
    COMMENT "Linking BPF object ${ARG_NAME}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${BPFTOOL} gen skeleton ${linked} name ${ARG_NAME} > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${linked}
    COMMENT "Generating skeleton ${ARG_NAME}.skel.h"
    VERBATIM)
  add_custom_target(${ARG_NAME}_skel_gen DEPENDS ${skel})
  add_library(${ARG_NAME}_skel INTERFACE)
  add_dependencies(${ARG_NAME}_skel ${ARG_NAME}_skel_gen)
  target_include_directories(${ARG_NAME}_skel INTERFACE ${CORDON_BPF_GEN_DIR})
endfunction()
