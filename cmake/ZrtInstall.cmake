# The installed package: each library's public headers under
# include/zrt/LIBRARY/ (zrt_library()), the libraries, zrtConfig.cmake /
# zrtConfigVersion.cmake and the exported targets zrt::runtime,
# zrt::kernels, zrt::optim, zrt::model_zoo and zrt::zrt (all of them). The
# same names exist as aliases for add_subdirectory.
include(CMakePackageConfigHelpers)

# Note [Package of a CUDA build]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# zrt's libraries are shared by default, with CUDA's runtime, NCCL, MPI,
# xxHash and nlohmann_json linked PRIVATE (cuBLAS(Lt) and OpenBLAS not linked
# at all: Notes [cuBLAS loaded on first use], [OpenBLAS loaded on first use]) and the
# ZRT_WITH_* definitions private too (zrt_private_dependency): no installed
# header needs them (tools/check_layout.py checks that CUDA's headers sit in
# #ifdef ZRT_WITH_CUDA sections), so the package of a CUDA build asks a
# consumer for Threads alone, its link line names libzrt_*.so and nothing
# of CUDA's, and the loader finds CUDA, NCCL and MPI through the zrt
# libraries' own run path (where they were linked against them). A consumer
# that writes CUDA code against zrt's headers asks for the component:
# find_package(zrt COMPONENTS cuda) finds CUDAToolkit and defines zrt::cuda
# (ZRT_WITH_CUDA and CUDA::cudart); it fails for a build without CUDA.
# Shared rather than components alone: a static libzrt_kernels.a holds
# undefined CUDA runtime symbols whatever the consumer calls, so only a
# shared library can keep them off the consumer's link line. A static build
# (BUILD_SHARED_LIBS=OFF) still works, and its package finds every
# dependency again, as its consumers must link them. The build tree's tests
# and tools see the private dependencies through the libraries
# ($<BUILD_INTERFACE:...>), as before. tests/install/consumer_test.cmake
# checks the consumer in a view of the machine without CUDA, NCCL or MPI.

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
get_target_property(zrt_library_type zrt_runtime TYPE)
if(zrt_library_type STREQUAL "SHARED_LIBRARY")
  set(ZRT_SHARED_LIBRARIES ON)
else()
  set(ZRT_SHARED_LIBRARIES OFF)
endif()
install(EXPORT zrtTargets NAMESPACE zrt:: DESTINATION ${zrt_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/zrtConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/zrtConfig.cmake INSTALL_DESTINATION ${zrt_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/zrtConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/zrtConfig.cmake ${PROJECT_BINARY_DIR}/zrtConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindNCCL.cmake ${CMAKE_CURRENT_LIST_DIR}/FindxxHash.cmake
              ${CMAKE_CURRENT_LIST_DIR}/ZrtImportFound.cmake
        DESTINATION ${zrt_cmake_dir})
