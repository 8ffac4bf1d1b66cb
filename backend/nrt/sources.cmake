# The libnrt backend's sources (absolute paths): the one list, included by backend/nrt/CMakeLists.txt and by every
# other project that builds sluice's backend (tests/torch2).
set(SLUICE_NRT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/nrt_library.cc
  ${CMAKE_CURRENT_LIST_DIR}/neff_manifest.cc
  ${CMAKE_CURRENT_LIST_DIR}/safetensors_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/neff_instance.cc
  ${CMAKE_CURRENT_LIST_DIR}/nrt_backend.cc
  ${CMAKE_CURRENT_LIST_DIR}/nrt_generation_backend.cc
)
