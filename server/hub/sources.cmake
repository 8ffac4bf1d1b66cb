# sluice_hub's sources (absolute paths): the one list, used by server/hub/CMakeLists.txt and by the sanitizer
# projects (tests/sanitizers, tests/asan).
set(SLUICE_HUB_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/model_hub.cc  # the hosted models (batched and generation), the one lookup by name, readiness
)
