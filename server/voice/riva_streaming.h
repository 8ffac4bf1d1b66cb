// StreamingRecognize's gRPC side: one bidi reactor per stream, feeding a StreamingSession (streaming_session.h)
// and running its windows through the speech model's scheduler, where they batch with every other stream's.
//
// Flow control: the reactor reads the next audio message only while the stream's unprocessed audio is under
// kMaxBacklogWindows largest buckets, so a client that sends faster than the model keeps up is held back by
// gRPC's own flow control, with bounded memory. Results are written one at a time, in order.
// Lifetime: created by the handler, deleted at gRPC's OnDone or, if a window is still running then, by that
// window's completion.
// Thread-safety: gRPC callbacks and window completions (scheduler threads) serialise on the reactor's mutex. The
// model is never called under it (a refused window completes inside the call); gRPC's StartRead, StartWrite and
// Finish are, since they only queue the operation.
#pragma once

#include "riva/proto/riva_asr.grpc.pb.h"
#include "server/model_hub.h"
#include "server/voice/voice_metrics.h"
#include "server/voice/voice_models.h"

namespace sluice::voice {

grpc::ServerBidiReactor<nvidia::riva::asr::StreamingRecognizeRequest, nvidia::riva::asr::StreamingRecognizeResponse>*
StartStreamingRecognize(grpc::CallbackServerContext* context, ModelHub* hub, VoiceModels* models,
                        VoiceMetrics* metrics);

// A stream answered with `status` before anything is read (e.g. UNAUTHENTICATED).
grpc::ServerBidiReactor<nvidia::riva::asr::StreamingRecognizeRequest, nvidia::riva::asr::StreamingRecognizeResponse>*
RefuseStream(const grpc::Status& status);

}  // namespace sluice::voice
