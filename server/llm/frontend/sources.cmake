# sluice_llm_frontend's sources (absolute paths), used by server/llm/frontend/CMakeLists.txt and by the sibling
# projects. Two lists, because the fuzz build and the TSan codec tests take only the first:
#   SLUICE_LLM_CODEC_SOURCES     the OpenAI and Triton text-generation wire formats <-> GenerationCall
#   SLUICE_LLM_FRONTEND_SOURCES  all of sluice_llm_frontend: the codecs and the services over GenerationModel
set(SLUICE_LLM_CODEC_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/openai_codec.cc         # OpenAI JSON <-> GenerationCall, SSE chunks
  ${CMAKE_CURRENT_LIST_DIR}/triton_stream_codec.cc  # Triton's decoupled text-generation protocol <-> GenerationCall
)
set(SLUICE_LLM_FRONTEND_SOURCES
  ${SLUICE_LLM_CODEC_SOURCES}
  ${CMAKE_CURRENT_LIST_DIR}/openai_service.cc       # /v1/completions, /v1/chat/completions, /v1/models over GenerationModel::Generate
  ${CMAKE_CURRENT_LIST_DIR}/triton_stream.cc        # ModelStreamInfer: the bidi reactor over GenerationModel::Generate
)
