# sluice_server's sources (absolute paths), used by server/app/CMakeLists.txt and by the sanitizer projects:
#   SLUICE_TLS_FILES_SOURCES  reading and checking the PEM files both transports serve TLS with
#   SLUICE_APP_SOURCES        all of sluice_server: the above and the Server class (the process wiring)
set(SLUICE_TLS_FILES_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/tls_files.cc
)
set(SLUICE_APP_SOURCES
  ${SLUICE_TLS_FILES_SOURCES}
  ${CMAKE_CURRENT_LIST_DIR}/server.cc
)
