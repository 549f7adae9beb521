# The installed package: headers under include/zrt/, the static libraries,
# zrtConfig.cmake / zrtConfigVersion.cmake and the exported targets
# zrt::runtime, zrt::flat_param, zrt::kernels, zrt::optim, zrt::module,
# zrt::model_zoo and
# zrt::zrt (all of them). The same names exist as aliases for add_subdirectory.
include(CMakePackageConfigHelpers)

set(zrt_libraries runtime flat_param kernels optim module model_zoo)
add_library(zrt_all INTERFACE)
foreach(lib ${zrt_libraries})
  set_target_properties(zrt_${lib} PROPERTIES EXPORT_NAME ${lib})
  add_library(zrt::${lib} ALIAS zrt_${lib})
  target_link_libraries(zrt_all INTERFACE zrt_${lib})
endforeach()
set_target_properties(zrt_all PROPERTIES EXPORT_NAME zrt)
add_library(zrt::zrt ALIAS zrt_all)

install(TARGETS zrt_runtime zrt_flat_param zrt_kernels zrt_optim zrt_module zrt_model_zoo zrt_all
        EXPORT zrtTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/zrt/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/zrt
        FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")

set(zrt_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/zrt)
install(EXPORT zrtTargets NAMESPACE zrt:: DESTINATION ${zrt_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/zrtConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/zrtConfig.cmake INSTALL_DESTINATION ${zrt_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zrtConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zrtConfig.cmake ${PROJECT_BINARY_DIR}/zrtConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindNCCL.cmake ${CMAKE_CURRENT_LIST_DIR}/FindxxHash.cmake
        DESTINATION ${zrt_cmake_dir})
