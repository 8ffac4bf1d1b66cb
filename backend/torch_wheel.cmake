# A libtorch other than Debian's: the one inside a PyPI `torch` wheel (issue 13), imported directly as the target
# sluice::torch_wheel from SLUICE_TORCH_DIR (<site-packages>/torch). Included by the main CMakeLists.txt when
# -DSLUICE_TORCH_DIR is given (the Neuron image: torch-neuronx's torch) and by tests/torch2/CMakeLists.txt.
#
# Why not find_package(Torch) on the wheel's share/cmake/Torch (both checked with torch 2.9.1): with Debian's
# libtorch-dev installed, -DTorch_DIR=<wheel> silently finds Debian's Caffe2Config.cmake and Debian's libtorch.so and
# libc10.so (its find_package/find_library PATHS come after the system prefix), mixed with the wheel's headers; with
# -DCaffe2_DIR=<wheel> too, it stops because the PyPI x86-64 wheels are CUDA builds and it wants a CUDA toolkit. So the
# two libraries the backend calls, libtorch_cpu.so and libc10.so, are imported directly: no CUDA toolkit to build,
# and nothing of Debian's libtorch in the link. (A `cuda` instance then reports that CUDA is not available; linking
# libtorch_cuda.so for GPUs is not done here.)
# At run time libtorch_cpu.so itself NEEDs libcudart.so.12 and libcupti.so.12 (Kineto's CUPTI profiler is linked in),
# which the wheel's RPATH finds in the pip packages nvidia-cuda-runtime-cu12 and nvidia-cuda-cupti-cu12 (1 + 10 MB)
# installed next to it.
#
# The C++ ABI: Debian's gRPC/protobuf/absl/yaml-cpp use the new libstdc++ ABI (_GLIBCXX_USE_CXX11_ABI=1), so only a
# libtorch built with it can share std::string/std::vector across sluice's calls. Configure fails unless the wheel's
# libc10.so is a new-ABI build (below). PyPI's Linux x86-64 torch 2.0.0-2.6.0 are old-ABI builds (manylinux1 wheels,
# TorchConfig.cmake: -D_GLIBCXX_USE_CXX11_ABI=0); 2.7.0 and later (manylinux_2_28) are new-ABI.
if(NOT EXISTS "${SLUICE_TORCH_DIR}/lib/libtorch_cpu.so" OR NOT EXISTS "${SLUICE_TORCH_DIR}/include/torch/script.h")
  message(FATAL_ERROR "SLUICE_TORCH_DIR='${SLUICE_TORCH_DIR}' is not a torch package with lib/libtorch_cpu.so and "
                      "include/torch/script.h (pass -DSLUICE_TORCH_DIR=<site-packages>/torch)")
endif()

# The wheel's C++ ABI, read from its libc10.so (no Python needed: the wheel's `import torch` needs the CUDA wheels).
# Counting std::__cxx11 symbols in the whole library is not enough: old-ABI wheels (2.6.0) export 213 of them too,
# from the libstdc++ parts linked statically into them. c10's own functions that take a std::string tell: e.g.
# c10::detail::torchCheckFail(const char*, const char*, unsigned, const std::string&), which every TORCH_CHECK in the
# headers calls, is ...jRKNSt7__cxx1112basic_string...E in a new-ABI build and ...jRKSs in an old-ABI one.
find_program(NM_PROGRAM nm REQUIRED)
execute_process(COMMAND ${NM_PROGRAM} -D --defined-only ${SLUICE_TORCH_DIR}/lib/libc10.so
                OUTPUT_VARIABLE C10_SYMBOLS RESULT_VARIABLE NM_RESULT)
string(REPLACE "\n" ";" C10_SYMBOLS "${C10_SYMBOLS}")
set(C10_NEW_ABI ${C10_SYMBOLS})
list(FILTER C10_NEW_ABI INCLUDE REGEX " _ZN3c10.*__cxx11")
set(C10_OLD_ABI ${C10_SYMBOLS})
list(FILTER C10_OLD_ABI INCLUDE REGEX " _ZN3c10.*RKSs")
list(LENGTH C10_NEW_ABI C10_NEW_ABI_COUNT)
list(LENGTH C10_OLD_ABI C10_OLD_ABI_COUNT)
if(NOT NM_RESULT EQUAL 0 OR C10_NEW_ABI_COUNT EQUAL 0 OR NOT C10_OLD_ABI_COUNT EQUAL 0)
  message(FATAL_ERROR "${SLUICE_TORCH_DIR}/lib/libc10.so: ${C10_NEW_ABI_COUNT} c10:: symbols with std::__cxx11 types, "
                      "${C10_OLD_ABI_COUNT} with the old std::string: this libtorch was built with the old C++ ABI "
                      "(_GLIBCXX_USE_CXX11_ABI=0) and cannot link with Debian's absl/yaml-cpp/gRPC. PyPI torch 2.7.0 "
                      "and later are new-ABI builds; 2.6.0 and earlier are old-ABI.")
endif()
message(STATUS "libtorch: ${SLUICE_TORCH_DIR} (new C++ ABI: ${C10_NEW_ABI_COUNT} c10:: symbols with std::__cxx11 "
               "types, none with the old std::string)")

add_library(sluice_torch_wheel_cpu SHARED IMPORTED)
set_target_properties(sluice_torch_wheel_cpu PROPERTIES IMPORTED_LOCATION ${SLUICE_TORCH_DIR}/lib/libtorch_cpu.so)
add_library(sluice_torch_wheel_c10 SHARED IMPORTED)
set_target_properties(sluice_torch_wheel_c10 PROPERTIES IMPORTED_LOCATION ${SLUICE_TORCH_DIR}/lib/libc10.so)
add_library(sluice_torch_wheel INTERFACE)
add_library(sluice::torch_wheel ALIAS sluice_torch_wheel)
target_include_directories(sluice_torch_wheel SYSTEM INTERFACE
  ${SLUICE_TORCH_DIR}/include ${SLUICE_TORCH_DIR}/include/torch/csrc/api/include)
target_compile_definitions(sluice_torch_wheel INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
target_link_libraries(sluice_torch_wheel INTERFACE sluice_torch_wheel_cpu sluice_torch_wheel_c10)

