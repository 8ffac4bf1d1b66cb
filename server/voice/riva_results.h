// Transcripts -> Riva result messages, and RecognitionConfig -> what the audio decoder is told. Shared by
// Recognize and StreamingRecognize.
// Thread-safety: pure functions.
#pragma once

#include "riva/proto/riva_asr.pb.h"
#include "server/voice/audio_decode.h"
#include "server/voice/ctc_decoder.h"

namespace sluice::voice {

// The declared encoding, rate and channel count (0 channels: 1). Container bytes override them in the decoder.
DeclaredAudio DeclaredFrom(const nvidia::riva::asr::RecognitionConfig& config);

// One alternative: the transcript, its confidence, and the words with times when `word_times` is set.
void FillAlternative(const Transcript& transcript, bool word_times,
                     nvidia::riva::asr::SpeechRecognitionAlternative& alternative);

}  // namespace sluice::voice
