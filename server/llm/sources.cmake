# sluice_llm's sources (absolute paths): the one list, used by server/llm/CMakeLists.txt and by the sanitizer
# projects (tests/sanitizers, tests/asan), with the SentencePiece module the tokenizer bridge dlopen()s.
# The OpenAI and Triton front ends are server/llm/frontend/ (their own library and list).
set(SLUICE_SENTENCEPIECE_BRIDGE_SOURCE ${CMAKE_CURRENT_LIST_DIR}/sentencepiece_bridge.cc)
set(SLUICE_LLM_SOURCES
  ${SLUICE_SENTENCEPIECE_BRIDGE_SOURCE}  # loads libsluice_sentencepiece.so (sentencepiece_module.cc), the one user of SentencePiece
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/stop_matcher.cc
  ${CMAKE_CURRENT_LIST_DIR}/generation_metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/generation_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/prep_queue.cc           # the oneTBB arena that tokenizes off the I/O threads
  ${CMAKE_CURRENT_LIST_DIR}/embedding_model.cc      # text -> vectors for kind: text models with an embedding: section
)
set(SLUICE_SENTENCEPIECE_MODULE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/sentencepiece_module.cc)

# sluice_sentencepiece_module(<sentencepiece link target>): the MODULE libsluice_sentencepiece.so, the only binary
# that links libsentencepiece (its bundled protobuf-lite clashes with gRPC's libprotobuf), and the bridge's
# SLUICE_SENTENCEPIECE_MODULE naming it (a source property, so it holds for every target in the calling directory
# that compiles the bridge).
function(sluice_sentencepiece_module sentencepiece_target)
  add_library(sluice_sentencepiece MODULE ${SLUICE_SENTENCEPIECE_MODULE_SOURCES})
  target_link_libraries(sluice_sentencepiece PRIVATE ${sentencepiece_target})
  set_target_properties(sluice_sentencepiece PROPERTIES CXX_VISIBILITY_PRESET hidden)
  set_source_files_properties(${SLUICE_SENTENCEPIECE_BRIDGE_SOURCE} PROPERTIES
    COMPILE_DEFINITIONS "SLUICE_SENTENCEPIECE_MODULE=\"$<TARGET_FILE:sluice_sentencepiece>\"")
endfunction()
