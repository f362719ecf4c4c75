# Debian's libcaf-dev 0.17.6 ships headers and shared libraries but no CMake
# package, so this module builds the imported targets that CAF >= 0.18 exports
# itself (CAF::core, CAF::io, CAF::openssl). Link lines stay valid after an
# upgrade to a CAF that ships CAFConfig.cmake.
#
# -DCAF_ROOT=PREFIX takes headers and libraries from PREFIX only (e.g. the
# TSan-instrumented CAF of scripts/build-caf-tsan.sh): a header from one CAF
# and a library from another would break at run time in ways no sanitizer
# names.
find_package(Threads REQUIRED)

# Results cached for another root (or for none) must not survive a change.
if(NOT "${CAF_ROOT}" STREQUAL "${_CAF_ROOT_USED}")
  unset(CAF_INCLUDE_DIR CACHE)
  unset(CAF_LIBRARY_CORE CACHE)
  unset(CAF_LIBRARY_IO CACHE)
  unset(CAF_LIBRARY_OPENSSL CACHE)
  set(_CAF_ROOT_USED "${CAF_ROOT}" CACHE INTERNAL "CAF_ROOT of the cached CAF paths")
endif()
if(CAF_ROOT)
  set(_caf_search HINTS "${CAF_ROOT}" NO_DEFAULT_PATH)
else()
  set(_caf_search)
endif()

find_path(CAF_INCLUDE_DIR NAMES caf/all.hpp caf/detail/build_config.hpp
  PATH_SUFFIXES include ${_caf_search})

if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" _caf_v "${_caf_version_line}")
  math(EXPR CAF_VERSION_MAJOR "${_caf_v} / 10000")
  math(EXPR CAF_VERSION_MINOR "(${_caf_v} / 100) % 100")
  math(EXPR CAF_VERSION_PATCH "${_caf_v} % 100")
  set(CAF_VERSION "${CAF_VERSION_MAJOR}.${CAF_VERSION_MINOR}.${CAF_VERSION_PATCH}")
endif()

foreach(_c IN LISTS CAF_FIND_COMPONENTS)
  string(TOUPPER "${_c}" _C)
  find_library(CAF_LIBRARY_${_C} NAMES caf_${_c} PATH_SUFFIXES lib ${_caf_search})
  if(CAF_LIBRARY_${_C})
    set(CAF_${_c}_FOUND TRUE)
  endif()
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR
  VERSION_VAR CAF_VERSION
  HANDLE_COMPONENTS)

if(CAF_FOUND AND CAF_LIBRARY_CORE AND NOT TARGET CAF::core)
  add_library(CAF::core UNKNOWN IMPORTED)
  set_target_properties(CAF::core PROPERTIES
    IMPORTED_LOCATION "${CAF_LIBRARY_CORE}"
    INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
if(CAF_FOUND AND CAF_LIBRARY_IO AND NOT TARGET CAF::io)
  add_library(CAF::io UNKNOWN IMPORTED)
  set_target_properties(CAF::io PROPERTIES
    IMPORTED_LOCATION "${CAF_LIBRARY_IO}"
    INTERFACE_LINK_LIBRARIES CAF::core)
endif()
if(CAF_FOUND AND CAF_LIBRARY_OPENSSL AND NOT TARGET CAF::openssl)
  add_library(CAF::openssl UNKNOWN IMPORTED)
  set_target_properties(CAF::openssl PROPERTIES
    IMPORTED_LOCATION "${CAF_LIBRARY_OPENSSL}"
    INTERFACE_LINK_LIBRARIES CAF::io)
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_LIBRARY_CORE CAF_LIBRARY_IO CAF_LIBRARY_OPENSSL)
