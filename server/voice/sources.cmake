# server/voice/'s source lists (absolute paths), used by server/voice/CMakeLists.txt and by the sibling projects:
#   SLUICE_VOICE_AUDIO_SOURCES    sluice_voice_audio: audio bytes -> mono float samples (libsndfile, libsamplerate)
#   SLUICE_VOICE_TEXT_SOURCES     sluice_voice_text: CTC decoding and the long-audio window plan (pure functions)
#   SLUICE_VOICE_OPENAI_CODEC_SOURCES  sluice_voice_openai_codec: OpenAI /v1/audio/transcriptions' form fields and
#                                 answers (pure functions)
#   SLUICE_VOICE_SERVICE_SOURCES  sluice_voice: speech models over the one request path, the Riva service and the
#                                 OpenAI transcription service
#   SLUICE_VOICE_SOURCES          all four
set(SLUICE_VOICE_AUDIO_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/audio_decode.cc
  ${CMAKE_CURRENT_LIST_DIR}/audio_resampler.cc
  ${CMAKE_CURRENT_LIST_DIR}/streaming_audio_decoder.cc
)
set(SLUICE_VOICE_TEXT_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/ctc_decoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/audio_windows.cc
)
set(SLUICE_VOICE_OPENAI_CODEC_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/transcription_form.cc
  ${CMAKE_CURRENT_LIST_DIR}/transcription_format.cc
)
set(SLUICE_VOICE_SERVICE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/speech_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/voice_models.cc
  ${CMAKE_CURRENT_LIST_DIR}/offline_recognition.cc
  ${CMAKE_CURRENT_LIST_DIR}/ctc_recognizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/stream_audio.cc
  ${CMAKE_CURRENT_LIST_DIR}/streaming_session.cc
  ${CMAKE_CURRENT_LIST_DIR}/whisper_stream_session.cc
  ${CMAKE_CURRENT_LIST_DIR}/chunked_session.cc
  ${CMAKE_CURRENT_LIST_DIR}/stream_engine.cc
  ${CMAKE_CURRENT_LIST_DIR}/window_ticker.cc
  ${CMAKE_CURRENT_LIST_DIR}/riva_results.cc
  ${CMAKE_CURRENT_LIST_DIR}/voice_metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/riva_service.cc
  ${CMAKE_CURRENT_LIST_DIR}/riva_streaming.cc
  ${CMAKE_CURRENT_LIST_DIR}/openai_transcriptions.cc
  ${CMAKE_CURRENT_LIST_DIR}/decode_executor.cc
  ${CMAKE_CURRENT_LIST_DIR}/whisper_recognizer.cc
)
set(SLUICE_VOICE_SOURCES ${SLUICE_VOICE_AUDIO_SOURCES} ${SLUICE_VOICE_TEXT_SOURCES}
  ${SLUICE_VOICE_OPENAI_CODEC_SOURCES} ${SLUICE_VOICE_SERVICE_SOURCES})
