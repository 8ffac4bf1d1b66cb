# sluice_base's sources (absolute paths): the one list, used by backend/base/CMakeLists.txt and by every sibling
# project that compiles sluice's code again (tests/sanitizers, tests/asan, tests/fuzz, tests/torch2).
set(SLUICE_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/yaml_node.cc
  ${CMAKE_CURRENT_LIST_DIR}/core_range.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/server_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/cost.cc
  ${CMAKE_CURRENT_LIST_DIR}/speech_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/stream_step_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedding_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/generation_config.cc
  ${CMAKE_CURRENT_LIST_DIR}/status_mapping.cc
  ${CMAKE_CURRENT_LIST_DIR}/blas_kernels.cc
)
