# Dependencies, all from Debian 12 packages (scripts/install-deps.sh) plus the optional
# CUDA toolkit at /usr/local/cuda. See ../shared/STACK.md for why each is found this way.
find_package(Threads REQUIRED)

# CAF 0.17.6 ships no CMake config: imported targets by hand.
find_path(CAF_INCLUDE_DIR caf/all.hpp)
find_library(CAF_CORE_LIBRARY caf_core)
find_library(CAF_IO_LIBRARY caf_io)
if(NOT CAF_INCLUDE_DIR OR NOT CAF_CORE_LIBRARY OR NOT CAF_IO_LIBRARY)
  message(FATAL_ERROR "CAF 0.17 not found: run scripts/install-deps.sh (apt-get install libcaf-dev)")
endif()
add_library(CAF::core UNKNOWN IMPORTED)
set_target_properties(CAF::core PROPERTIES IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES Threads::Threads)
add_library(CAF::io UNKNOWN IMPORTED)
set_target_properties(CAF::io PROPERTIES IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
  INTERFACE_LINK_LIBRARIES CAF::core)

# UCX 1.13 (libucx-dev): the UCX data plane. Found by hand like CAF (its pkg-config file
# pulls flags we do not want).
find_path(UCX_INCLUDE_DIR ucp/api/ucp.h)
find_library(UCX_UCP_LIBRARY ucp)
find_library(UCX_UCS_LIBRARY ucs)
if(NOT UCX_INCLUDE_DIR OR NOT UCX_UCP_LIBRARY OR NOT UCX_UCS_LIBRARY)
  message(FATAL_ERROR "UCX not found: run scripts/install-deps.sh (apt-get install libucx-dev)")
endif()
add_library(UCX::ucp UNKNOWN IMPORTED)
set_target_properties(UCX::ucp PROPERTIES IMPORTED_LOCATION "${UCX_UCP_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${UCX_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES "${UCX_UCS_LIBRARY}")

find_package(fmt 9 CONFIG REQUIRED)          # fmt::fmt
find_package(doctest CONFIG REQUIRED)        # doctest::doctest
include(doctest)                             # doctest_discover_tests()

# OpenBLAS: the config file only sets variables.
find_package(OpenBLAS CONFIG REQUIRED)
add_library(openblas_iface INTERFACE)
target_include_directories(openblas_iface INTERFACE ${OpenBLAS_INCLUDE_DIRS})
target_link_libraries(openblas_iface INTERFACE ${OpenBLAS_LIBRARIES})

# Optional CUDA + NCCL: compiled whenever the toolkit is present, cleanly off otherwise
# (-DWITH_CUDA=OFF, or -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON).
option(WITH_CUDA "build the CUDA/NCCL parts when the toolkit is available" ON)
set(HAVE_CUDA OFF)
set(HAVE_NCCL OFF)
if(WITH_CUDA)
  # Debian's stock FindCUDAToolkit (CMake 3.25.1) sets a property on CUDA::nvToolsExt whenever
  # the project requires CMake >= 3.25, even where CUDA 12+ ships no such library, and fails.
  # Hide our minimum version from that one check.
  set(cohort_min_version ${CMAKE_MINIMUM_REQUIRED_VERSION})
  set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
  find_package(CUDAToolkit QUIET)
  set(CMAKE_MINIMUM_REQUIRED_VERSION ${cohort_min_version})
  if(CUDAToolkit_FOUND)
    # nvcc need not be on PATH: use the toolkit's own.
    if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
      set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES 90)     # H100/H200; "native" fails without a GPU
      endif()
      enable_language(CUDA)
      # CMake 3.25 knows no nvcc flag for C++20 (3.26 adds it for nvcc 12+) and fails at
      # generate time on CUDA_STANDARD 20, or on CXX_STANDARD 20, which CUDA falls back to.
      if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
        set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
        set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
      endif()
      set(CMAKE_CUDA_STANDARD 20)
      set(HAVE_CUDA ON)
      find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
      find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
      if(NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
        add_library(NCCL::nccl UNKNOWN IMPORTED)
        set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
          INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
        set(HAVE_NCCL ON)
      endif()
    endif()
  endif()
endif()
message(STATUS "cohort: HAVE_CUDA=${HAVE_CUDA} ${CUDAToolkit_VERSION} HAVE_NCCL=${HAVE_NCCL}")
