# The voice and generation services under ThreadSanitizer (issue 24), included at the end of CMakeLists.txt:
#   - sluice_tsan_services: an instrumented copy of the front ends the service tests drive, over sluice_tsan_llm (the
#     core, the server core and server/llm's library, above): the KServe gRPC/HTTP front ends with the OpenAI and
#     Triton-stream services (the main build's sluice_frontend, less the three files sluice_tsan_llm already has), the
#     event-driven HTTP server (sluice_http_server) and the voice API with the Riva service (server/voice/: the main
#     build's sluice_voice_audio, sluice_voice_text and sluice_voice).
#   - tsan_voice_inprocess_tests: tests/voice/riva_inprocess_test.cc (the Riva service's reactors, recognitions,
#     decode executor over loopback gRPC on sim speech models: overloads, deadlines, cancellations, a drain), with
#     oneTBB's real worker threads: the scheduler states its parallel_for row copies to TSan (batch_assembly.cc) and
#     the DecodeExecutor its task hand-off (decode_executor.cc), as PrepQueue does.
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

# Status (issue 24): both run in CI. The causes of the voice test's old flakiness were fixed, not hidden: a
# Recognize whose call was cancelled or passed its deadline while its decode waited kept its DecodeExecutor slot
# until a worker reached it (RecognizeWithShortRandomDeadlinesIsAnsweredEveryTime's last call was refused
# RESOURCE_EXHAUSTED); it now takes the decode back in OnCancel (DecodeExecutor::Withdraw). oneTBB runs with its
# real workers (as in scheduler_clang_tests): the scheduler's parallel_for body states its copies' and rows'
# hand-offs (batch_assembly.cc), and what oneTBB's own inline code does with its task objects and join nodes is
# suppressed by TBB frames (tsan_services.supp, as tsan_tbb.supp). The reactors state the orderings gRPC gives OnCancel -> OnDone and
# OnDone -> the service's destruction (riva_service.cc, riva_streaming.cc).
set(SERVICES_TSAN_TESTS tsan_generation_services_tests tsan_voice_inprocess_tests)
add_executable(tsan_generation_services_tests ${SLUICE_ROOT}/tests/llm/generation_services_inprocess_test.cc)
target_compile_definitions(tsan_generation_services_tests PRIVATE SLUICE_MODELS_DIR="${SLUICE_MODELS_DIR}")
add_executable(tsan_voice_inprocess_tests ${SLUICE_ROOT}/tests/voice/riva_inprocess_test.cc)
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
