# sluice_metrics' sources (absolute paths): the one list, used by server/metrics/CMakeLists.txt and by the sanitizer
# projects (tests/sanitizers, tests/asan).
set(SLUICE_METRICS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/server_metrics.cc      # Prometheus metrics (rendered at /metrics by the HTTP front end)
  ${CMAKE_CURRENT_LIST_DIR}/capacity_estimator.cc  # cost accounting: what the measured batches say the hardware can do
  ${CMAKE_CURRENT_LIST_DIR}/process_stats.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_stats.cc         # Triton-style per-model statistics
)
