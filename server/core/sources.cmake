# sluice_core's sources (absolute paths): the one list, used by server/core/CMakeLists.txt and by the sibling
# projects (tests/sanitizers, tests/asan, tests/fuzz). Two lists, because the fuzz build takes only the first:
#   SLUICE_CORE_CALL_SOURCES  a decoded call's parameters and input checks (no scheduler, no metrics)
#   SLUICE_CORE_SOURCES       all of sluice_core: the above, the serving state and the one request path
set(SLUICE_CORE_CALL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/infer_parameters.cc   # the one parameter parser (priority, timeout, binary_data_output)
  ${CMAKE_CURRENT_LIST_DIR}/input_validation.cc   # inputs checked once, at the edge
)
set(SLUICE_CORE_SOURCES
  ${SLUICE_CORE_CALL_SOURCES}
  ${CMAKE_CURRENT_LIST_DIR}/serving_state.cc      # loading / ready / draining, and the long calls admitted before a drain
  ${CMAKE_CURRENT_LIST_DIR}/pending_inference.cc  # rows in flight, exactly-once completion
  ${CMAKE_CURRENT_LIST_DIR}/served_model.cc       # ServedModel::Infer: the one request path
)
