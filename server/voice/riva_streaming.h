// StreamingRecognize's gRPC side: one bidi reactor per stream, feeding a StreamSession (stream_session.h). A model
// with a stream engine (speech.stream_step: stream_engines.h) runs a ChunkedSession: the stream holds one of the
// engine's slots from its config to its end (OnDone; every slot taken: RESOURCE_EXHAUSTED at once, the stream is not
// queued) and its chunks step with every other stream's. Other models run a StreamingSession: windows through the
// speech model's scheduler, where they batch with every other stream's; with speech.streaming.shared_tick the
// stream registers with its model's WindowTicker (window_ticker.h) and starts each window at a tick (at once after
// its audio ended or when two steps behind), unregistering first thing in OnDone. An encoder-decoder model (Whisper)
// runs a WhisperStreamSession: each run is a whole recognition of the segment so far through the model's Recognizer
// (cancelled through its handle by OnCancel). Below, "window" means any of these runs.
//
// Flow control: the reactor reads the next audio message only while the stream's unprocessed audio is under
// kMaxBacklogWindows largest buckets, so a client that sends faster than the model keeps up is held back by
// gRPC's own flow control, with bounded memory. Results are written one at a time, in order.
// Limits: a chunk that would take the stream past the model's max_audio_seconds is refused (INVALID_ARGUMENT)
// from its byte count before it is decoded; a chunk whose decode holds more than kStreamInlineDecodeBytes goes to
// the DecodeExecutor (no read is outstanding meanwhile), and one the executor refuses ends the stream with
// RESOURCE_EXHAUSTED; a stream cancelled (or past its deadline) while its chunk waits there takes the decode
// back (DecodeExecutor::Withdraw) and ends CANCELLED at once, freeing the slot. A stream from which no message arrives for `idle_timeout` while the server waits for one
// ends with DEADLINE_EXCEEDED (not while flow control holds it back). Each chunk's bytes are freed once decoded.
// Refused windows: a window the model refuses (its queue is full: RESOURCE_EXHAUSTED, a deadline passed, or any
// other error) ends the whole stream with that code. A stream's windows cannot be skipped without a gap in its
// transcript, nor retried without its backlog growing under the very overload that refused it; the message says
// how much audio was processed, and the client reconnects (resending the audio after its last final result).
// Draining: a stream configured before the drain began is admitted (ServingState::Admit): its windows are not
// refused for draining and the drain waits for the stream's end (until OnDone), within its grace.
// Lifetime: created by the handler; deletes itself once gRPC's OnDone has run and no hold is left, whichever comes
// last. gRPC 1.51's server reactors have no AddHold/RemoveHold, so the reactor counts its own holds for all work
// that uses it outside gRPC's reactions: each running window takes two (its completion's, released as OnWindow's
// last step, and its submitter's, released after RunWindow stores the handle, since either may run after the other
// has finished the stream: a window refused inside Run completes, and may Finish, before Run returns), an
// offloaded decode one (released as OnChunkDecoded's last step, or by OnCancel once it took the decode back) and a pending idle alarm one (released as
// OnIdleAlarm's last step). gRPC calls OnDone only after Finish and after every reaction has returned.
// Thread-safety: gRPC callbacks, window completions (scheduler threads; a recognition's: the decoder's delivery
// thread), decode completions (DecodeExecutor threads) and the idle alarm (a gRPC executor thread) serialise on
// the reactor's mutex. The model (its Recognizer too), the decoder
// of an offloaded chunk and grpc::Alarm::Set/Cancel are never called under it (a refused window completes inside
// the call); gRPC's StartRead, StartWrite and Finish and DecodeExecutor::Submit and Withdraw are, since they only
// queue (or unqueue) the operation. The stream engine's AcquireSlot, and ReleaseSlot while none of the stream's
// chunks is queued, are called under it (the engine's lock is a leaf); Submit, and ReleaseSlot otherwise (it may
// complete the queued chunk, whose completion takes mu_), never are.
#pragma once

#include "absl/time/time.h"
#include "riva/proto/riva_asr.grpc.pb.h"
#include "server/hub/model_hub.h"
#include "server/voice/decode_executor.h"
#include "server/voice/stream_engines.h"
#include "server/voice/voice_metrics.h"
#include "server/voice/voice_models.h"
#include "server/voice/window_ticker.h"

namespace sluice::voice {

// What every stream shares; all of it outlives the streams.
struct StreamingDeps {
  ModelHub* hub = nullptr;
  VoiceModels* models = nullptr;
  VoiceMetrics* metrics = nullptr;
  DecodeExecutor* decodes = nullptr;
  const StreamEngines* engines = nullptr;  // may be null: every model streams windowed
  WindowTickers* tickers = nullptr;        // may be null: windowed streams start windows on their own audio
  absl::Duration idle_timeout = absl::Seconds(60);
};

// Chunks whose decode holds more than this go to the DecodeExecutor (RivaAsrService::kInlineDecodeBytes).
inline constexpr int64_t kStreamInlineDecodeBytes = int64_t{1} << 20;

grpc::ServerBidiReactor<nvidia::riva::asr::StreamingRecognizeRequest, nvidia::riva::asr::StreamingRecognizeResponse>*
StartStreamingRecognize(grpc::CallbackServerContext* context, const StreamingDeps& deps);

// A stream answered with `status` before anything is read (e.g. UNAUTHENTICATED).
grpc::ServerBidiReactor<nvidia::riva::asr::StreamingRecognizeRequest, nvidia::riva::asr::StreamingRecognizeResponse>*
RefuseStream(const grpc::Status& status);

}  // namespace sluice::voice
