# `cmake --install BUILD --prefix P` lays out a relocatable prefix:
#
#   bin/wgnn                          the CLI (RUNPATH $ORIGIN/../lib)
#   lib/libwgnn.so, lib/libwgnn.a     wgnn::wgnn (shared) and wgnn::wgnn_static
#   lib/<Dawn's library>              beside libwgnn.so (RUNPATH $ORIGIN)
#   lib/wgnn/lavapipe/                the bundled lavapipe, where set-up fetched
#                                     it (no GPU driver on this machine)
#   lib/cmake/wgnn/                   wgnnConfig.cmake, its version file, targets
#   lib/pkgconfig/wgnn.pc
#   include/wgnn/                     the public headers (wgnn.h: the C API)
#   share/wgnn/models/                ISNet for remove-bg, where set-up fetched it
#
# Components: Runtime (the CLI, the shared library, Dawn, lavapipe),
# Development (headers, the static library, CMake and pkg-config files) and
# Models (ISNet, about 90 MB).
include(CMakePackageConfigHelpers)
set(WGNN_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/wgnn")

install(TARGETS wgnn_cli RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}" COMPONENT Runtime)
install(TARGETS wgnn_shared EXPORT wgnnSharedTargets
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT Runtime NAMELINK_COMPONENT Development)
install(TARGETS wgnn EXPORT wgnnStaticTargets ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT Development)
install(EXPORT wgnnSharedTargets NAMESPACE wgnn:: DESTINATION "${WGNN_CMAKE_DIR}" COMPONENT Development)
install(EXPORT wgnnStaticTargets NAMESPACE wgnn:: DESTINATION "${WGNN_CMAKE_DIR}" COMPONENT Development)

# Dawn: the file the linker resolved (the npm build has no SONAME and is
# linked by file name; a source build is installed under its SONAME).
get_filename_component(WGNN_DAWN_REAL "${WGNN_DAWN_LIBRARY}" REALPATH)
get_filename_component(WGNN_DAWN_NAME "${WGNN_DAWN_LIBRARY}" NAME)
if(NOT WGNN_DAWN_NPM)
  execute_process(COMMAND objdump -p "${WGNN_DAWN_REAL}" OUTPUT_VARIABLE WGNN_DAWN_DYN ERROR_QUIET)
  if(WGNN_DAWN_DYN MATCHES "SONAME +([^\n ]+)")
    set(WGNN_DAWN_NAME "${CMAKE_MATCH_1}")
  endif()
endif()
install(FILES "${WGNN_DAWN_REAL}" DESTINATION "${CMAKE_INSTALL_LIBDIR}" RENAME "${WGNN_DAWN_NAME}" COMPONENT Runtime)
set(WGNN_INSTALLED_DAWN_NAME "${WGNN_DAWN_NAME}")
# The dawn-node shim loads dawn.node (and, outside Node.js, the N-API stubs)
# from its own folder.
if(WGNN_DAWN STREQUAL "dawn-node")
  install(FILES "${WGNN_DAWN_DIR}/dawn.node" "${WGNN_DAWN_DIR}/libwgnn_napi_stub.so"
          DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT Runtime)
endif()

# lavapipe, where scripts/setup fetched it: the driver and the libdrm it
# needs, with a manifest whose library path is relative to the manifest
# (the Vulkan loader reads it so), found by gpu/driver.cpp relative to the
# library or the binary.
if(EXISTS "${WGNN_DEPS_DIR}/lavapipe/lvp_icd.json")
  set(WGNN_LVP_LIB "root/usr/lib/x86_64-linux-gnu")
  set(WGNN_LVP_DEST "${CMAKE_INSTALL_LIBDIR}/wgnn/lavapipe")
  file(GLOB WGNN_LVP_FILES "${WGNN_DEPS_DIR}/lavapipe/${WGNN_LVP_LIB}/libvulkan_lvp.so"
                           "${WGNN_DEPS_DIR}/lavapipe/${WGNN_LVP_LIB}/libdrm*.so*")
  install(FILES ${WGNN_LVP_FILES} DESTINATION "${WGNN_LVP_DEST}/${WGNN_LVP_LIB}" COMPONENT Runtime)
  file(READ "${WGNN_DEPS_DIR}/lavapipe/lvp_icd.json" WGNN_LVP_ICD)
  string(REGEX REPLACE "\"library_path\": *\"[^\"]*\"" "\"library_path\": \"./${WGNN_LVP_LIB}/libvulkan_lvp.so\""
                       WGNN_LVP_ICD "${WGNN_LVP_ICD}")
  file(WRITE "${PROJECT_BINARY_DIR}/install/lvp_icd.json" "${WGNN_LVP_ICD}")
  install(FILES "${PROJECT_BINARY_DIR}/install/lvp_icd.json" DESTINATION "${WGNN_LVP_DEST}" COMPONENT Runtime)
  install(DIRECTORY "${WGNN_DEPS_DIR}/lavapipe/root/usr/share/doc/" DESTINATION "${WGNN_LVP_DEST}/doc"
          COMPONENT Runtime)
endif()

# ISNet (AGPL-3.0, as README "Models" says), where scripts/setup fetched it.
if(EXISTS "${WGNN_DEPS_DIR}/models/isnet_any_size.onnx")
  install(FILES "${WGNN_DEPS_DIR}/models/isnet_any_size.onnx" DESTINATION "${CMAKE_INSTALL_DATADIR}/wgnn/models"
          COMPONENT Models)
endif()

# Headers: the public tree, the generated version header, and the project
# headers the public ones forward to (under wgnn/detail/).
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/wgnn" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        COMPONENT Development)
install(FILES "${WGNN_GENERATED_INCLUDE}/wgnn/version.h" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/wgnn"
        COMPONENT Development)
set(WGNN_DETAIL_HEADERS gpu/adapters.h gpu/context.h gpu/error.h gpu/dispatch.h gpu/recorder.h graph/constant_store.h graph/graph.h graph/tensor.h
                        graph/plan_cache.h graph/host_tensor.h graph/device_tensor.h ir/graph.h ir/program.h onnx/session.h ops/registry.h
                        passes/passes.h generate/generate.h util/host_memory.h util/settings.h)
foreach(h IN LISTS WGNN_DETAIL_HEADERS)
  get_filename_component(d "${h}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/${h}" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/wgnn/detail/${d}"
          COMPONENT Development)
endforeach()

# find_package(wgnn) and pkg-config.
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/wgnnConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/install/wgnnConfig.cmake" INSTALL_DESTINATION "${WGNN_CMAKE_DIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/install/wgnnConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/install/wgnnConfig.cmake" "${PROJECT_BINARY_DIR}/install/wgnnConfigVersion.cmake"
        DESTINATION "${WGNN_CMAKE_DIR}" COMPONENT Development)
file(RELATIVE_PATH WGNN_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file("${PROJECT_SOURCE_DIR}/cmake/wgnn.pc.in" "${PROJECT_BINARY_DIR}/install/wgnn.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/install/wgnn.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
        COMPONENT Development)
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/wgnn" COMPONENT Runtime)
