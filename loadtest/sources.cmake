# sluice_loadtest's sources: all of sluice-loadtest but reading reference sets (verify.cc) and the top level
# (app.cc, loadtest_main.cc), so no libtorch. Included by loadtest/CMakeLists.txt and by the clang build in
# tests/sanitizers/, which compiles the same list with -Wthread-safety.
set(SLUICE_LOADTEST_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/length_profile.cc     # input-length profiles (fixed, uniform, lognormal/speech, file)
  ${CMAKE_CURRENT_LIST_DIR}/audio_folder.cc       # recordings from a folder (libsndfile)
  ${CMAKE_CURRENT_LIST_DIR}/arrival_process.cc    # open-loop arrivals (Poisson, Gamma with burstiness, constant)
  ${CMAKE_CURRENT_LIST_DIR}/model_info.cc         # what the server says about a model; model mixes
  ${CMAKE_CURRENT_LIST_DIR}/workload.cc           # request i = f(seed, i): model, length, input data
  ${CMAKE_CURRENT_LIST_DIR}/infer_client.cc       # the client seam: async calls + metadata/config/statistics
  ${CMAKE_CURRENT_LIST_DIR}/grpc_infer_client.cc  # ... over gRPC (callback API)
  ${CMAKE_CURRENT_LIST_DIR}/http_infer_client.cc  # ... over HTTP (cpp-httplib, a connection and thread per call)
  ${CMAKE_CURRENT_LIST_DIR}/kserve_http.cc        # KServe v2 REST binary-data request/response codec
  ${CMAKE_CURRENT_LIST_DIR}/progress_bar.cc
  ${CMAKE_CURRENT_LIST_DIR}/runner.cc             # closed/open loop, warm-up, caps
  ${CMAKE_CURRENT_LIST_DIR}/summary.cc            # counts, throughput, percentiles, goodput
  ${CMAKE_CURRENT_LIST_DIR}/slo.cc                # SLO YAML, verdicts, per-request objectives
  ${CMAKE_CURRENT_LIST_DIR}/pricing.cc            # pricing presets, cost per success
  ${CMAKE_CURRENT_LIST_DIR}/prometheus_text.cc    # /metrics text format parser + HTTP GET
  ${CMAKE_CURRENT_LIST_DIR}/server_monitor.cc     # ModelStatistics + /metrics before/during/after
  ${CMAKE_CURRENT_LIST_DIR}/output_compare.cc     # --verify's arithmetic
  ${CMAKE_CURRENT_LIST_DIR}/report.cc             # timeline, histogram
  ${CMAKE_CURRENT_LIST_DIR}/report_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/report_table.cc
  ${CMAKE_CURRENT_LIST_DIR}/compare.cc            # --compare a.json b.json
  ${CMAKE_CURRENT_LIST_DIR}/plot_svg.cc
  ${CMAKE_CURRENT_LIST_DIR}/sweep.cc
  ${CMAKE_CURRENT_LIST_DIR}/padding_plan.cc       # --dry-run: bucket shares and padding efficiency of a traffic profile
  ${CMAKE_CURRENT_LIST_DIR}/wer.cc                # word error rate (word-level Levenshtein with S/I/D)
  ${CMAKE_CURRENT_LIST_DIR}/speech_audio.cc       # 16-bit PCM / WAV bytes (libsndfile), chunk arithmetic
  ${CMAKE_CURRENT_LIST_DIR}/riva_offline_client.cc  # the client seam over Riva Recognize (--api riva-offline)
  ${CMAKE_CURRENT_LIST_DIR}/stream_call.cc        # one Riva StreamingRecognize call (callback bidi reactor)
  ${CMAKE_CURRENT_LIST_DIR}/stream_runner.cc      # --api riva-streaming: N stream slots, real-time pacing
  ${CMAKE_CURRENT_LIST_DIR}/speech_summary.cc     # RTFx, chunk/final latency, WER of a speech run
  ${CMAKE_CURRENT_LIST_DIR}/speech_load.cc        # the Riva APIs' runs for app.cc
  ${CMAKE_CURRENT_LIST_DIR}/generation_call.cc    # a generation request and its streamed outcome, any API
  ${CMAKE_CURRENT_LIST_DIR}/openai_stream.cc      # OpenAI streaming wire format: body, SSE, chunks, usage check
  ${CMAKE_CURRENT_LIST_DIR}/openai_client.cc      # --api openai: streamed completions on the HTTP worker pool
  ${CMAKE_CURRENT_LIST_DIR}/triton_stream.cc      # Triton ModelStreamInfer generation wire format, verdict
  ${CMAKE_CURRENT_LIST_DIR}/triton_stream_client.cc  # --api triton-stream: a callback bidi stream per request
  ${CMAKE_CURRENT_LIST_DIR}/generation_plan.cc    # request i's prompt (real text ids / synthetic / file), max_tokens
  ${CMAKE_CURRENT_LIST_DIR}/generation_summary.cc # TTFT, ITL, TPOT, e2e, tokens/s, goodput of a generation run
  ${CMAKE_CURRENT_LIST_DIR}/generation_load.cc    # the generation API's runs for app.cc
)
# sluice-loadtest's YAML readers alone (SLO and pricing files): what tests/fuzz's parsers fuzz, without the rest.
set(SLUICE_LOADTEST_CONFIG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/slo.cc
  ${CMAKE_CURRENT_LIST_DIR}/pricing.cc
)
