# FindNCCL
# --------
# Finds NCCL and provides the imported target NCCL::NCCL (which also links CUDA::cudart).
#
# Searched, in order: NCCL_ROOT (CMake or environment variable), the CUDA toolkit
# (CUDAToolkit_ROOT / CUDA_HOME / /usr/local/cuda), the NVIDIA Python wheel (`nvidia.nccl`, found
# through python3 when it is installed), and the system paths.
#
# Result variables: NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION.
# No GPU is needed (or probed): this only finds headers and libraries.

include(FindPackageHandleStandardArgs)

if(NOT TARGET CUDA::cudart)
  find_package(CUDAToolkit QUIET)
endif()

set(_nccl_hints "")
foreach(_root IN ITEMS "${NCCL_ROOT}" "$ENV{NCCL_ROOT}" "${CUDAToolkit_LIBRARY_ROOT}"
                       "$ENV{CUDA_HOME}" "/usr/local/cuda")
  if(_root)
    list(APPEND _nccl_hints "${_root}")
  endif()
endforeach()

# pip's nvidia-nccl-cu* wheel ships nccl.h and libnccl.so.2 (no unversioned link).
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  find_program(_nccl_python3 NAMES python3)
  if(_nccl_python3)
    execute_process(
      COMMAND "${_nccl_python3}" -c "import nvidia.nccl; print(nvidia.nccl.__path__[0])"
      OUTPUT_VARIABLE _nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _nccl_wheel_rc ERROR_QUIET)
    if(_nccl_wheel_rc EQUAL 0 AND IS_DIRECTORY "${_nccl_wheel}")
      list(APPEND _nccl_hints "${_nccl_wheel}")
    endif()
  endif()
  unset(_nccl_python3 CACHE)
endif()

find_path(NCCL_INCLUDE_DIR NAMES nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints}
             PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu targets/x86_64-linux/lib)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part} +([0-9]+)" _ "${_nccl_version_lines}")
    set(_nccl_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT "${_nccl_MAJOR}" STREQUAL "")
    set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
  endif()
endif()

find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR CUDAToolkit_FOUND
  VERSION_VAR NCCL_VERSION
  REASON_FAILURE_MESSAGE "set NCCL_ROOT to the NCCL install (and have the CUDA toolkit installed)")

if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES CUDA::cudart)
endif()

mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
