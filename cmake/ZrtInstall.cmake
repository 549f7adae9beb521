# The installed package: each library's public headers under
# include/zrt/LIBRARY/ (zrt_library()), the libraries, zrtConfig.cmake /
# zrtConfigVersion.cmake and the exported targets zrt::runtime,
# zrt::kernels, zrt::optim, zrt::model_zoo and zrt::zrt (all of them). The
# same names exist as aliases for add_subdirectory.
include(CMakePackageConfigHelpers)

add_library(zrt_all INTERFACE)
target_link_libraries(zrt_all INTERFACE zrt_runtime zrt_kernels zrt_optim zrt_model_zoo)
set_target_properties(zrt_all PROPERTIES EXPORT_NAME zrt)
add_library(zrt::zrt ALIAS zrt_all)

install(TARGETS zrt_runtime zrt_kernels zrt_optim zrt_model_zoo zrt_all
        EXPORT zrtTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(zrt_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/zrt)
install(EXPORT zrtTargets NAMESPACE zrt:: DESTINATION ${zrt_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/zrtConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/zrtConfig.cmake INSTALL_DESTINATION ${zrt_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zrtConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zrtConfig.cmake ${PROJECT_BINARY_DIR}/zrtConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindNCCL.cmake ${CMAKE_CURRENT_LIST_DIR}/FindxxHash.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindOpenBLASPthread.cmake
              ${CMAKE_CURRENT_LIST_DIR}/ZrtImportFound.cmake
        DESTINATION ${zrt_cmake_dir})
