# sluice_loadtest's sources: all of sluice-loadtest but reading reference sets (kserve/verify.cc), the real-text
# generation plan (generation/generation_app.cc), the API drivers (*_driver.cc, which --verify) and the top level
# (app.cc, loadtest_main.cc), so no libtorch.
# Included by loadtest/CMakeLists.txt and by the clang build in tests/sanitizers/ (which compiles the same list
# with -Wthread-safety) and by tests/asan/. One folder per role; see the comment at the top of each header.
set(SLUICE_LOADTEST_SOURCES
  # core/: the run loop and what it is measured against (API-neutral), and the seam to each API
  ${CMAKE_CURRENT_LIST_DIR}/core/api.cc                # enum class Api, parsed once from --api
  ${CMAKE_CURRENT_LIST_DIR}/core/api_driver.cc         # ApiDriver: one API's part of a run (app.cc picks one)
  ${CMAKE_CURRENT_LIST_DIR}/core/load_client.cc       # LoadClient: the runner's seam (Call in, Outcome out)
  ${CMAKE_CURRENT_LIST_DIR}/core/model_info.cc        # what a model takes (ModelInfo, any API); model mixes
  ${CMAKE_CURRENT_LIST_DIR}/core/length_profile.cc     # input-length profiles (fixed, uniform, lognormal/speech, file)
  ${CMAKE_CURRENT_LIST_DIR}/core/audio_folder.cc       # --audio-dir: recordings from a folder (libsndfile)
  ${CMAKE_CURRENT_LIST_DIR}/core/arrival_process.cc    # open-loop arrivals (Poisson, Gamma with burstiness, constant)
  ${CMAKE_CURRENT_LIST_DIR}/core/workload.cc           # request i = f(seed, i): model, length, input data
  ${CMAKE_CURRENT_LIST_DIR}/core/progress_bar.cc
  ${CMAKE_CURRENT_LIST_DIR}/core/runner.cc             # closed/open loop, warm-up, caps
  ${CMAKE_CURRENT_LIST_DIR}/core/summary.cc            # counts, throughput, percentiles, goodput
  ${CMAKE_CURRENT_LIST_DIR}/core/slo.cc                # SLO YAML, verdicts, per-request objectives
  ${CMAKE_CURRENT_LIST_DIR}/core/sweep.cc              # --sweep: concurrency/rate steps, knee
  ${CMAKE_CURRENT_LIST_DIR}/core/padding_plan.cc       # --dry-run: bucket shares and padding efficiency of a traffic profile
  ${CMAKE_CURRENT_LIST_DIR}/core/json_writer.cc        # JSON writer and per-bucket rows (reports, advisor)
  ${CMAKE_CURRENT_LIST_DIR}/core/text_file.cc          # a report written to its file
  # http/: the HTTP clients' shared transport (cpp-httplib), owned by kserve/'s REST client and generation/'s OpenAI one
  ${CMAKE_CURRENT_LIST_DIR}/http/http_worker_pool.cc   # blocking calls on workers: a connection, thread per call
  # kserve/: KServe v2 over gRPC and HTTP (--api kserve)
  ${CMAKE_CURRENT_LIST_DIR}/kserve/fetch_model_info.cc # what the server says about a model (ModelMetadata, ModelConfig)
  ${CMAKE_CURRENT_LIST_DIR}/kserve/infer_client.cc     # KServe v2 client: a LoadClient + metadata/config/statistics
  ${CMAKE_CURRENT_LIST_DIR}/kserve/call_proto.cc       # Call/Outcome <-> ModelInferRequest/Response
  ${CMAKE_CURRENT_LIST_DIR}/kserve/grpc_infer_client.cc  # ... over gRPC (callback API)
  ${CMAKE_CURRENT_LIST_DIR}/kserve/http_infer_client.cc  # ... over HTTP (on http/'s worker pool)
  ${CMAKE_CURRENT_LIST_DIR}/kserve/kserve_http.cc      # KServe v2 REST binary-data request/response codec
  ${CMAKE_CURRENT_LIST_DIR}/kserve/output_compare.cc   # --verify's arithmetic
  # speech/: Riva ASR (--api riva-offline, riva-streaming) and OpenAI transcriptions (--api openai-audio)
  ${CMAKE_CURRENT_LIST_DIR}/speech/wer.cc              # word error rate (word-level Levenshtein with S/I/D)
  ${CMAKE_CURRENT_LIST_DIR}/speech/speech_audio.cc     # 16-bit PCM / WAV bytes (libsndfile), chunk arithmetic
  ${CMAKE_CURRENT_LIST_DIR}/speech/riva_offline_client.cc  # a LoadClient over Riva Recognize (--api riva-offline)
  ${CMAKE_CURRENT_LIST_DIR}/speech/openai_audio_client.cc  # ... over OpenAI /v1/audio/transcriptions (--api openai-audio)
  ${CMAKE_CURRENT_LIST_DIR}/speech/stream_call.cc      # one Riva StreamingRecognize call (callback bidi reactor)
  ${CMAKE_CURRENT_LIST_DIR}/speech/stream_runner.cc    # --api riva-streaming: N stream slots, real-time pacing
  ${CMAKE_CURRENT_LIST_DIR}/speech/speech_summary.cc   # RTFx, chunk/final latency, WER of a speech run
  ${CMAKE_CURRENT_LIST_DIR}/speech/speech_load.cc      # the Riva APIs' runs for app.cc
  # generation/: streamed text generation (--api openai, triton-stream)
  ${CMAKE_CURRENT_LIST_DIR}/generation/generation_call.cc    # a generation request and its streamed outcome, any API
  ${CMAKE_CURRENT_LIST_DIR}/generation/openai_stream.cc      # OpenAI streaming wire format: body, SSE, chunks, usage check
  ${CMAKE_CURRENT_LIST_DIR}/generation/openai_client.cc      # --api openai: streamed completions on http/'s worker pool
  ${CMAKE_CURRENT_LIST_DIR}/generation/triton_stream.cc      # Triton ModelStreamInfer generation wire format, verdict
  ${CMAKE_CURRENT_LIST_DIR}/generation/triton_stream_client.cc  # --api triton-stream: a callback bidi stream per request
  ${CMAKE_CURRENT_LIST_DIR}/generation/generation_plan.cc    # request i's prompt (real text ids / synthetic / file), max_tokens
  ${CMAKE_CURRENT_LIST_DIR}/generation/generation_summary.cc # TTFT, ITL, TPOT, e2e, tokens/s, goodput of a generation run
  ${CMAKE_CURRENT_LIST_DIR}/generation/generation_load.cc    # the generation API's runs for app.cc
  # monitor/: what the server reports during a run
  ${CMAKE_CURRENT_LIST_DIR}/monitor/prometheus_text.cc # /metrics text format parser + HTTP GET
  ${CMAKE_CURRENT_LIST_DIR}/monitor/server_monitor.cc  # ModelStatistics + /metrics before/during/after
  # report/: what a run prints and writes
  ${CMAKE_CURRENT_LIST_DIR}/report/pricing.cc          # pricing presets, cost per success
  ${CMAKE_CURRENT_LIST_DIR}/report/report.cc           # timeline, histogram
  ${CMAKE_CURRENT_LIST_DIR}/report/report_json.cc      # --json-report
  ${CMAKE_CURRENT_LIST_DIR}/report/report_table.cc     # the console table
  ${CMAKE_CURRENT_LIST_DIR}/report/compare.cc          # --compare a.json b.json
  ${CMAKE_CURRENT_LIST_DIR}/report/plot_svg.cc         # SVG plots of a run or sweep
)

# sluice_loadtest_app's sources: what needs libtorch (reference sets) or the model's tokenizer (server/llm): the
# API drivers (their --verify) and the wiring (app.cc) that chooses one driver per run.
set(SLUICE_LOADTEST_APP_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/kserve/verify.cc           # --verify: reference.pt through sluice_backend
  ${CMAKE_CURRENT_LIST_DIR}/kserve/kserve_driver.cc    # ApiDriver of --api kserve (describe and verify over KServe v2)
  ${CMAKE_CURRENT_LIST_DIR}/generation/generation_app.cc  # real-text prompt ids and generation --verify (tokenizer)
  ${CMAKE_CURRENT_LIST_DIR}/speech/speech_driver.cc    # ApiDriver of riva-offline and riva-streaming (verify: KServe)
  ${CMAKE_CURRENT_LIST_DIR}/generation/generation_driver.cc  # ApiDriver of openai and triton-stream
  ${CMAKE_CURRENT_LIST_DIR}/app.cc
)
# sluice-loadtest's YAML readers alone (SLO and pricing files): what tests/fuzz's parsers fuzz, without the rest.
set(SLUICE_LOADTEST_CONFIG_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/core/slo.cc
  ${CMAKE_CURRENT_LIST_DIR}/report/pricing.cc
)
