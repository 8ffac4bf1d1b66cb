# sluice_scheduler's sources (absolute paths): the one list, used by scheduler/CMakeLists.txt and by the sanitizer
# projects (tests/sanitizers, tests/asan).
set(SLUICE_SCHEDULER_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/clock.cc
  ${CMAKE_CURRENT_LIST_DIR}/bucket_table.cc
  ${CMAKE_CURRENT_LIST_DIR}/bucket_queue.cc
  ${CMAKE_CURRENT_LIST_DIR}/batch_assembly.cc
  ${CMAKE_CURRENT_LIST_DIR}/enqueue_check.cc
  ${CMAKE_CURRENT_LIST_DIR}/return_tracker.cc
  ${CMAKE_CURRENT_LIST_DIR}/dynamic_batcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/generation_request.cc
  ${CMAKE_CURRENT_LIST_DIR}/generation_shapes.cc
  ${CMAKE_CURRENT_LIST_DIR}/delivery_lane.cc
  ${CMAKE_CURRENT_LIST_DIR}/prefix_block_table.cc
  ${CMAKE_CURRENT_LIST_DIR}/continuous_batcher.cc
)
