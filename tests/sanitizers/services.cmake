# The voice and generation services under ThreadSanitizer (issue 24), included at the end of CMakeLists.txt:
#   - sluice_tsan_services: an instrumented copy of the front ends the service tests drive, over sluice_tsan_llm (the
#     core, the server core and server/llm's library, above): the KServe gRPC/HTTP front ends with the OpenAI and
#     Triton-stream services (the main build's sluice_frontend, less the three files sluice_tsan_llm already has), the
#     event-driven HTTP server (sluice_http_server) and the voice API with the Riva service (server/voice/: the main
#     build's sluice_voice_audio, sluice_voice_text and sluice_voice).
#   - tsan_voice_inprocess_tests: tests/voice/riva_inprocess_test.cc (the Riva service's reactors, recognitions,
#     decode executor over loopback gRPC on sim speech models: overloads, deadlines, cancellations, a drain); only
#     with -DSLUICE_TSAN_VOICE_SERVICE_TESTS=ON for now (not yet reliably green: see below).
#   - tsan_generation_services_tests: tests/llm/generation_services_inprocess_test.cc (OpenAI over HTTP and Triton's
#     ModelStreamInfer over gRPC on the sim generation device with llama_tiny's tokenizer).
# Debian's gRPC, absl and protobuf are not instrumented: their own synchronisation is invisible to TSan. Every
# reactor field of ours is guarded by a sluice::Mutex, which TSan sees; the hand-offs TSan cannot see in our
# code, and gRPC's ordering of a reactor's reactions after the StartRead/StartWrite/Finish that asked for them, are
# stated with SLUICE_TSAN_RELEASE/ACQUIRE (backend/base/tsan_handoff.h); tsan_services.supp names library code
# only. The SentencePiece module loads into a link-map namespace of its own under the sanitizers
# (sentencepiece_bridge.cc), so these binaries, which load libprotobuf, can tokenize.
set(SERVICES_TSAN_SOURCES  # what sluice_tsan_llm (the core, server/core, server/llm) does not already have
  ${SLUICE_HUB_SOURCES}
  ${SLUICE_KSERVE_CODEC_SOURCES}
  ${SLUICE_KSERVE_SOURCES}
  ${SLUICE_TLS_FILES_SOURCES}
  ${SLUICE_LLM_FRONTEND_SOURCES}
  ${SLUICE_HTTP_SERVER_SOURCES}
  ${SLUICE_VOICE_SOURCES}
)
add_library(sluice_tsan_services STATIC ${SERVICES_TSAN_SOURCES})
target_include_directories(sluice_tsan_services SYSTEM PUBLIC ${RAPIDJSON_INCLUDE_DIRS})
target_link_libraries(sluice_tsan_services PUBLIC sluice_tsan_llm sluice_inference_proto sluice_riva_proto
  PkgConfig::CHECKED_SAMPLERATE PkgConfig::CHECKED_SNDFILE PkgConfig::CHECKED_HTTPLIB Boost::headers OpenSSL::SSL
  OpenSSL::Crypto)

# The voice test is not yet reliably green under TSan (see the note below): built and run only with
# -DSLUICE_TSAN_VOICE_SERVICE_TESTS=ON until it is.
option(SLUICE_TSAN_VOICE_SERVICE_TESTS "Riva in-process tests under TSan (not yet reliably green)" OFF)
set(SERVICES_TSAN_TESTS tsan_generation_services_tests)
add_executable(tsan_generation_services_tests ${SLUICE_ROOT}/tests/llm/generation_services_inprocess_test.cc)
target_compile_definitions(tsan_generation_services_tests PRIVATE SLUICE_MODELS_DIR="${SLUICE_MODELS_DIR}")
if(SLUICE_TSAN_VOICE_SERVICE_TESTS)
  # Status (issue 24): with the hand-offs stated and tsan_services.supp, no report names a sluice frame; left are
  # (1) gRPC-internal reports (about 1 in 5 runs: gRPC's inline reactor code racing its own uninstrumented code)
  # and (2) RecognizeWithShortRandomDeadlinesIsAnsweredEveryTime's last Recognize refused RESOURCE_EXHAUSTED in
  # about half the runs ("too many audio decodes in progress (18: 2 running and 16 waiting ...)"): with oneTBB
  # serial (below) the DecodeExecutor gets one worker, and the decodes of calls whose deadline passed still hold
  # their slots until a worker reaches them. Without oneTBB serial the scheduler's parallel_for row copies
  # (AssembleBatch, ScatterOutputs) are reported instead: the scheduler should state that hand-off as PrepQueue does.
  add_executable(tsan_voice_inprocess_tests ${SLUICE_ROOT}/tests/voice/riva_inprocess_test.cc)
  # oneTBB with one thread, as for the scheduler tests: the batch rows parallel_for copies are then copied on the
  # calling thread, which TSan sees.
  target_sources(tsan_voice_inprocess_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/tbb_serial_under_tsan.cc)
  list(APPEND SERVICES_TSAN_TESTS tsan_voice_inprocess_tests)
endif()
foreach(target sluice_tsan_services ${SERVICES_TSAN_TESTS})
  if(SLUICE_TSAN)
    target_compile_options(${target} PRIVATE -fsanitize=thread)
    target_link_options(${target} PRIVATE -fsanitize=thread)
  endif()
endforeach()
set(SERVICES_TSAN_ENV "TSAN_OPTIONS=halt_on_error=1 second_deadlock_stack=1 suppressions=${CMAKE_CURRENT_LIST_DIR}/tsan_services.supp")
foreach(test ${SERVICES_TSAN_TESTS})
  # Named again after sluice_tsan_llm: served_model.cc (there) calls the parameter parser (in sluice_tsan_services).
  target_link_libraries(${test} PRIVATE sluice_tsan_services sluice_tsan_llm sluice_tsan_services GTest::gtest_main
    GTest::gmock)
  gtest_discover_tests(${test} DISCOVERY_TIMEOUT 120 TEST_PREFIX "clang." PROPERTIES ENVIRONMENT "${SERVICES_TSAN_ENV}"
    TIMEOUT 300)
endforeach()
