# Every external package zrt uses, found once, here. Sets ZRT_WITH_CUDA,
# ZRT_WITH_NCCL, ZRT_WITH_MPI and ZRT_WITH_OPENBLAS from the ZRT_* options.
# The installed package re-finds the same ones (zrtConfig.cmake.in) but Eigen,
# which only zrt_kernels' own sources include.
find_package(Threads REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(nlohmann_json 3 REQUIRED)
find_package(xxHash REQUIRED)

# --- CUDA and NCCL --------------------------------------------------------
set(ZRT_WITH_CUDA OFF)
set(ZRT_WITH_NCCL OFF)
if(NOT ZRT_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Only the architectures we ship for: 90 (Hopper) unless the user says otherwise.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 knows no C++20 flag for nvcc (12+ supports -std=c++20).
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(ZRT_WITH_CUDA ON)
    # A CUDA build without NCCL has no multi-GPU world: with ZRT_CUDA=ON (or
    # ZRT_NCCL=ON) a missing NCCL is an error, unless ZRT_NCCL=OFF says so.
    if(NOT ZRT_NCCL STREQUAL "OFF")
      find_package(NCCL)
      if(NCCL_FOUND)
        set(ZRT_WITH_NCCL ON)
      elseif(ZRT_NCCL STREQUAL "ON" OR ZRT_CUDA STREQUAL "ON")
        message(FATAL_ERROR "ZRT_CUDA=${ZRT_CUDA} ZRT_NCCL=${ZRT_NCCL} but NCCL was not found (nccl.h and "
                            "libnccl.so or libnccl.so.2 under NCCL_ROOT, the CUDA toolkit or a Python's "
                            "nvidia/nccl wheel, ZRT_NCCL_PYTHON): set NCCL_ROOT, or -DZRT_NCCL=OFF to build "
                            "CUDA without NCCL")
      endif()
    endif()
  elseif(ZRT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ZRT_CUDA=ON but no CUDA compiler was found")
  elseif(ZRT_NCCL STREQUAL "ON")
    message(FATAL_ERROR "ZRT_NCCL=ON but no CUDA compiler was found (NCCL needs CUDA)")
  endif()
endif()

# --- MPI ------------------------------------------------------------------
# zrt calls MPI's C API from C++: the C++ wrapper's flags with the MPI-2 C++
# bindings off, so no C language is needed here or in a consumer.
set(ZRT_WITH_MPI OFF)
if(NOT ZRT_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(ZRT_WITH_MPI ON)
    find_program(ZRT_MPIEXEC NAMES mpirun mpiexec)
  elseif(ZRT_MPI STREQUAL "ON")
    message(FATAL_ERROR "ZRT_MPI=ON but MPI was not found")
  endif()
endif()

# --- OpenBLAS (Note [CPU GEMM backends]) -----------------------------------
set(ZRT_WITH_OPENBLAS OFF)
if(ZRT_OPENBLAS STREQUAL "OFF")
  message(STATUS "zrt: CPU GEMM through Eigen (ZRT_OPENBLAS=OFF)")
else()
  find_package(OpenBLASPthread)
  if(OpenBLASPthread_FOUND)
    set(ZRT_WITH_OPENBLAS ON)
    message(STATUS "zrt: CPU GEMM through OpenBLAS's pthread build (${OPENBLAS_PTHREAD_LIBRARY})")
  elseif(ZRT_OPENBLAS STREQUAL "ON")
    message(FATAL_ERROR "ZRT_OPENBLAS=ON but OpenBLAS's pthread build was not found (libopenblas-pthread-dev)")
  else()
    message(STATUS "zrt: CPU GEMM through Eigen (no OpenBLAS pthread build found)")
  endif()
endif()

# --- the programs and the tests -------------------------------------------
if(ZRT_BUILD_TOOLS)
  find_package(CLI11 REQUIRED)
endif()
set(ZRT_WITH_TESTS OFF)
if(ZRT_BUILD_TESTS STREQUAL "AUTO")
  find_package(Boost 1.74 QUIET COMPONENTS unit_test_framework)
  set(ZRT_WITH_TESTS ${Boost_FOUND})
  if(NOT Boost_FOUND)
    message(STATUS "zrt: no tests (Boost.Test not found; tools/setup.sh test installs it)")
  endif()
elseif(ZRT_BUILD_TESTS)
  find_package(Boost 1.74 REQUIRED COMPONENTS unit_test_framework)
  set(ZRT_WITH_TESTS ON)
endif()
