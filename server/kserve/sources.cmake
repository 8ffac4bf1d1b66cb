# server/kserve/'s source lists (absolute paths), used by server/kserve/CMakeLists.txt and by the sibling projects:
#   SLUICE_KSERVE_CODEC_SOURCES  sluice_kserve_codec: KServe v2 infer requests/responses <-> InferCall, both wires
#   SLUICE_KSERVE_SOURCES        sluice_kserve: the gRPC and HTTP services over the hub, and what they answer with
set(SLUICE_KSERVE_CODEC_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/grpc_codec.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_codec.cc
)
set(SLUICE_KSERVE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/bearer_auth.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_descriptions.cc  # metadata / config / statistics as protobuf, for both transports
  ${CMAKE_CURRENT_LIST_DIR}/model_lookup.cc        # which model a KServe request names (every kind), for both transports
  ${CMAKE_CURRENT_LIST_DIR}/proto_json.cc          # ... rendered as KServe/Triton JSON for HTTP
  ${CMAKE_CURRENT_LIST_DIR}/grpc_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_service.cc
)
