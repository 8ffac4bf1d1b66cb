# sluice_http_server's sources (absolute paths): the one list, used by server/http/CMakeLists.txt and by the
# sibling projects. Two lists, because the fuzz build takes only the first:
#   SLUICE_HTTP_WIRE_SOURCES    the request parser's configuration, the response wire format and multipart/form-data
#                               bodies (no sockets)
#   SLUICE_HTTP_SERVER_SOURCES  all of sluice_http_server: the above and the event-driven server itself
set(SLUICE_HTTP_WIRE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/http_wire.cc
  ${CMAKE_CURRENT_LIST_DIR}/multipart_form.cc
)
set(SLUICE_HTTP_SERVER_SOURCES
  ${SLUICE_HTTP_WIRE_SOURCES}
  ${CMAKE_CURRENT_LIST_DIR}/http_server.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_connection.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_connection_write.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_exchange.cc
)
