# install(EXPORT), a package config and a version file, plus a build-tree export so that a
# consumer can find_package() this build directory without installing.
include(CMakePackageConfigHelpers)

set(packswap_config_dir "${CMAKE_INSTALL_DATADIR}/packswap/cmake")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/packswap"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        FILES_MATCHING PATTERN "*.hpp")
# The license travels with the headers (share/doc/packswap/LICENSE); the package config names it.
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DOCDIR}")

set(packswap_export_targets packswap)
if(TARGET packswap_nccl)
  list(APPEND packswap_export_targets packswap_nccl)
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake" DESTINATION "${packswap_config_dir}")
  # The build-tree package config looks for it next to itself, too.
  configure_file("${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake" "${PROJECT_BINARY_DIR}/FindNCCL.cmake"
                 COPYONLY)
endif()
install(TARGETS ${packswap_export_targets} EXPORT packswap-targets)
install(EXPORT packswap-targets NAMESPACE packswap:: DESTINATION "${packswap_config_dir}")

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/packswap-config.cmake.in"
  "${PROJECT_BINARY_DIR}/packswap-config.cmake"
  INSTALL_DESTINATION "${packswap_config_dir}")
# Header-only: any architecture may use it. Only versions with the same major are compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/packswap-config-version.cmake"
  COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES "${PROJECT_BINARY_DIR}/packswap-config.cmake"
              "${PROJECT_BINARY_DIR}/packswap-config-version.cmake"
        DESTINATION "${packswap_config_dir}")

export(EXPORT packswap-targets NAMESPACE packswap::
       FILE "${PROJECT_BINARY_DIR}/packswap-targets.cmake")
