# CUDA backend (-DTCQ_CUDA=ON): every src/**/*.cu joins the library objects, TCQ_HAVE_CUDA is
# defined for every file of the library (the stubs in cuda_stub.c step aside), and the CUDA test
# binary under tests/cuda is added.  sm_90a (tensor-core kernels are tuned for Hopper), sm_90 and
# PTX for newer GPUs.
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90a-real 90-real 90-virtual)
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)

file(GLOB_RECURSE TCQ_CUDA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/*.cu)
target_sources(tcq_obj PRIVATE ${TCQ_CUDA_SOURCES})
# tcq_obj exists before CUDA is enabled, so it did not pick up the architectures variable.
set_target_properties(tcq_obj PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
target_compile_definitions(tcq_obj PUBLIC TCQ_HAVE_CUDA=1)
# The library's C flags (-Wextra, -ffp-contract=off, ...) mean nothing to nvcc: keep them for C.
get_target_property(tcq_obj_opts tcq_obj COMPILE_OPTIONS)
set(tcq_obj_c_opts "")
foreach(o ${tcq_obj_opts})
  list(APPEND tcq_obj_c_opts $<$<COMPILE_LANGUAGE:C>:${o}>)
endforeach()
set_target_properties(tcq_obj PROPERTIES COMPILE_OPTIONS "${tcq_obj_c_opts}")
# --fmad=false: the encoder's arithmetic contract (tcq.h) spells out every fused multiply-add.
foreach(o --fmad=false -Werror=all-warnings -lineinfo)
  target_compile_options(tcq_obj PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${o}>)
endforeach()
# Static cudart: a binary built here runs on a machine with only the driver and cuBLAS.
set(TCQ_CUDA_LIBS CUDA::cudart_static CUDA::cublas CUDA::cublasLt)
target_link_libraries(tcq_obj PUBLIC ${TCQ_CUDA_LIBS})

# tests/cuda/test_*.c: built only with TCQ_CUDA; they need a GPU, so ctest labels them "cuda"
# (CI builds them but runs only -L unit/cli; tests/cuda/run-on-device.sh runs them there).
function(tcq_cuda_tests)
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/cuda/test_*.c)
  foreach(t ${tests})
    get_filename_component(name ${t} NAME_WE)
    add_executable(${name} ${t})
    target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit ${CMAKE_SOURCE_DIR}/src)
    target_compile_options(${name} PRIVATE ${TCQ_C_FLAGS})
    # test.h's data helpers, as the unit tests get them
    target_compile_definitions(${name} PRIVATE TCQ_SHARED_DATA="${TCQ_SHARED_DATA}"
                               TCQ_TEST_DATA_DEFAULT="${TCQ_SHARED_DATA}" TCQ_REPO_DATA="${TCQ_REPO_DATA}"
                               TCQ_SOURCE_DIR="${CMAKE_SOURCE_DIR}" TCQ_BINARY_DIR="${CMAKE_BINARY_DIR}")
    target_link_libraries(${name} PRIVATE tcq_static)
    add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
    set_tests_properties(${name} PROPERTIES TIMEOUT 600 LABELS cuda)
  endforeach()
endfunction()
cmake_language(DEFER CALL tcq_cuda_tests)

# bench/micro/*.cu: standalone GPU micro-benchmarks (sm_90a only, run by hand on the device;
# docs/PERFORMANCE.md says what each measured), built here so that they keep compiling.
file(GLOB TCQ_CUDA_MICRO CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/bench/micro/*.cu)
foreach(m ${TCQ_CUDA_MICRO})
  get_filename_component(name ${m} NAME_WE)
  add_executable(${name} ${m})
  set_target_properties(${name} PROPERTIES CUDA_ARCHITECTURES 90a-real)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/src/kernels/cuda ${CMAKE_SOURCE_DIR}/src
                             ${CMAKE_SOURCE_DIR}/include)
  target_link_libraries(${name} PRIVATE CUDA::cudart_static)
endforeach()
