# Dawn as ExecuTorch's WebGPU backend finds it (find_package(Dawn) and the
# target dawn::webgpu_dawn), made from a prebuilt Dawn shared library that
# exports the webgpu.h C API (wgpu* symbols) and its matching header.
#
#   -DDAWN_LIBRARY=/path/to/libwebgpu_wrapper.so
#   -DDAWN_INCLUDE_DIR=/path/to/include      (the folder holding webgpu/webgpu.h)

set(DAWN_LIBRARY "" CACHE FILEPATH "Dawn shared library exporting the webgpu.h API")
set(DAWN_INCLUDE_DIR "" CACHE PATH "Folder holding webgpu/webgpu.h")

if(NOT EXISTS "${DAWN_LIBRARY}")
  message(FATAL_ERROR "Dawn: DAWN_LIBRARY '${DAWN_LIBRARY}' does not exist")
endif()
if(NOT EXISTS "${DAWN_INCLUDE_DIR}/webgpu/webgpu.h")
  message(FATAL_ERROR "Dawn: no webgpu/webgpu.h under DAWN_INCLUDE_DIR '${DAWN_INCLUDE_DIR}'")
endif()

if(NOT TARGET dawn::webgpu_dawn)
  add_library(dawn::webgpu_dawn SHARED IMPORTED GLOBAL)
  set_target_properties(
    dawn::webgpu_dawn
    PROPERTIES IMPORTED_LOCATION "${DAWN_LIBRARY}"
               INTERFACE_INCLUDE_DIRECTORIES "${DAWN_INCLUDE_DIR}"
  )
  # A library built without a SONAME would otherwise be recorded in the
  # executable by its full build-machine path; link it as -l<name> instead so
  # the loader finds it by file name (LD_LIBRARY_PATH or the RUNPATH).
  execute_process(COMMAND objdump -p "${DAWN_LIBRARY}" OUTPUT_VARIABLE _dawn_dyn ERROR_QUIET)
  if(NOT _dawn_dyn MATCHES "SONAME")
    set_target_properties(dawn::webgpu_dawn PROPERTIES IMPORTED_NO_SONAME TRUE)
  endif()
endif()
set(Dawn_FOUND TRUE)
