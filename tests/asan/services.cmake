# The generation services under ASan + UBSan (issue 24), included at the end of CMakeLists.txt (the voice service's
# in-process test, asan_voice_inprocess_tests, is above):
#   - asan_generation_services_tests: tests/llm/generation_services_inprocess_test.cc (OpenAI over HTTP and Triton's
#     ModelStreamInfer over gRPC, in-process on the sim generation device with llama_tiny's tokenizer), over
#     sluice_asan (the front ends, the HTTP server) and sluice_asan_core (the engine, GenerationModel).
# Its binary loads libprotobuf and tokenizes: under the sanitizers the SentencePiece module is loaded into a
# link-map namespace of its own (sentencepiece_bridge.cc), where no sanitizer runtime exists, so the module (Debian's
# libsentencepiece's C wrapper, no code of ours that matters) is built without the sanitizer flags.
set_property(TARGET sluice_sentencepiece PROPERTY COMPILE_OPTIONS -g -O1)
set_property(TARGET sluice_sentencepiece PROPERTY LINK_OPTIONS "")

sluice_asan_test(asan_generation_services_tests ${SLUICE_ROOT}/tests/llm/generation_services_inprocess_test.cc)
# Named again after sluice_asan_core: served_model.cc (in the core) calls sluice_asan's parameter parsing.
target_link_libraries(asan_generation_services_tests PRIVATE sluice_asan_core sluice_asan)
target_compile_definitions(asan_generation_services_tests PRIVATE SLUICE_MODELS_DIR="${SLUICE_MODELS_DIR}")
