# cmake -DBUILD=... -DDEPS=... -DSTAGE=... -P stage.cmake: lays libwgnn, Dawn
# and lavapipe out beside wgnn.node (node/CMakeLists.txt shows the layout),
# as cmake/install.cmake does for an install's lib/.
file(MAKE_DIRECTORY "${STAGE}")

# libwgnn.so under its SONAME, its RUNPATH (the build's Dawn folder) made
# $ORIGIN: Dawn is loaded from beside it.
file(REAL_PATH "${BUILD}/libwgnn.so" lib)
execute_process(COMMAND objdump -p "${lib}" OUTPUT_VARIABLE dyn)
if(NOT dyn MATCHES "SONAME +([^\n ]+)")
  message(FATAL_ERROR "${lib} has no SONAME")
endif()
set(soname "${CMAKE_MATCH_1}")
set(old_rpath "")
if(dyn MATCHES "RUNPATH +([^\n ]+)")
  set(old_rpath "${CMAKE_MATCH_1}")
endif()
if(NOT EXISTS "${STAGE}/${soname}" OR "${lib}" IS_NEWER_THAN "${STAGE}/${soname}")
  file(COPY_FILE "${lib}" "${STAGE}/${soname}.tmp")
  if(old_rpath)
    file(RPATH_CHANGE FILE "${STAGE}/${soname}.tmp" OLD_RPATH "${old_rpath}" NEW_RPATH "$ORIGIN")
  endif()
  file(RENAME "${STAGE}/${soname}.tmp" "${STAGE}/${soname}")
endif()

# Dawn: the build's library, and what the dawn-node shim loads from beside
# itself (dawn.node; the N-API stubs, which inside Node.js are not loaded).
get_filename_component(dawn_dir "${DAWN_LIBRARY}" DIRECTORY)
file(GLOB old_dawn "${STAGE}/libwebgpu_*.so" "${STAGE}/dawn.node" "${STAGE}/libwgnn_napi_stub.so")
foreach(f ${old_dawn})
  get_filename_component(n "${f}" NAME)
  if(NOT EXISTS "${dawn_dir}/${n}")
    file(REMOVE "${f}")
  endif()
endforeach()
file(COPY "${DAWN_LIBRARY}" DESTINATION "${STAGE}")
foreach(extra dawn.node libwgnn_napi_stub.so)
  if(EXISTS "${dawn_dir}/${extra}" AND DAWN_LIBRARY MATCHES "libwebgpu_dawn_node")
    file(COPY "${dawn_dir}/${extra}" DESTINATION "${STAGE}")
  endif()
endforeach()

# lavapipe (where set-up fetched it): the driver, the libdrm it needs, a
# manifest whose library path is relative to it, and the Debian copyright
# files.
set(lvp "${DEPS}/lavapipe")
set(lvp_lib "root/usr/lib/x86_64-linux-gnu")
if(EXISTS "${lvp}/lvp_icd.json")
  set(dest "${STAGE}/wgnn/lavapipe")
  file(MAKE_DIRECTORY "${dest}/${lvp_lib}")
  foreach(so libvulkan_lvp.so libdrm.so.2 libdrm_amdgpu.so.1)
    if(EXISTS "${lvp}/${lvp_lib}/${so}")
      file(REAL_PATH "${lvp}/${lvp_lib}/${so}" real)
      if(NOT EXISTS "${dest}/${lvp_lib}/${so}" OR "${real}" IS_NEWER_THAN "${dest}/${lvp_lib}/${so}")
        file(COPY_FILE "${real}" "${dest}/${lvp_lib}/${so}")
      endif()
    endif()
  endforeach()
  file(READ "${lvp}/lvp_icd.json" icd)
  string(REGEX REPLACE "\"library_path\": *\"[^\"]*\"" "\"library_path\": \"./${lvp_lib}/libvulkan_lvp.so\"" icd "${icd}")
  file(WRITE "${dest}/lvp_icd.json" "${icd}")
  if(EXISTS "${lvp}/root/usr/share/doc")
    file(COPY "${lvp}/root/usr/share/doc/" DESTINATION "${dest}/doc")
  endif()
else()
  file(REMOVE_RECURSE "${STAGE}/wgnn/lavapipe")
endif()
