// StreamingRecognize's gRPC side: one bidi reactor per stream, feeding a StreamingSession (streaming_session.h)
// and running its windows through the speech model's scheduler, where they batch with every other stream's.
//
// Flow control: the reactor reads the next audio message only while the stream's unprocessed audio is under
// kMaxBacklogWindows largest buckets, so a client that sends faster than the model keeps up is held back by
// gRPC's own flow control, with bounded memory. Results are written one at a time, in order.
// A window that fails (refused: queue full, deadline passed; or an error) ends the stream with its status.
// Draining: a stream configured before the drain began is admitted (ServingState::Admit): its windows are not
// refused for draining and the drain waits for the stream's end, within its grace.
// Lifetime: created by the handler; deletes itself once gRPC's OnDone has run and no hold is left, whichever
// comes last. gRPC's server reactors have no AddHold/RemoveHold, so the reactor counts its own holds: each window
// in flight takes two, one for its completion (released as the last step of OnWindow) and one for the RunWindow
// call that submitted it (released after the handle is stored), because either may run after the other has
// finished the stream (a window refused inside Run completes, and may Finish, before Run returns). gRPC calls
// OnDone only after Finish and after every reaction has returned, so no code runs on a deleted reactor.
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
