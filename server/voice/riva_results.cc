#include "server/voice/riva_results.h"

#include <limits>

namespace sluice::voice {

DeclaredAudio DeclaredFrom(const nvidia::riva::asr::RecognitionConfig& config) {
  DeclaredAudio declared;
  declared.encoding = static_cast<AudioEncoding>(config.encoding());  // same numbering (audio_decode.h)
  declared.sample_rate_hz = config.sample_rate_hertz();
  declared.channels = config.audio_channel_count() == 0 ? 1 : config.audio_channel_count();
  return declared;
}

void FillAlternative(const Transcript& transcript, bool word_times,
                     nvidia::riva::asr::SpeechRecognitionAlternative& alternative) {
  alternative.set_transcript(transcript.text);
  alternative.set_confidence(transcript.confidence);
  if (!word_times) return;
  constexpr int64_t kMaxMs = std::numeric_limits<int32_t>::max();  // the wire's int32 milliseconds: ~24 days
  for (const WordTiming& timing : transcript.words) {
    nvidia::riva::asr::WordInfo* word = alternative.add_words();
    word->set_word(timing.word);
    word->set_start_time(static_cast<int32_t>(std::min(timing.start_ms, kMaxMs)));
    word->set_end_time(static_cast<int32_t>(std::min(timing.end_ms, kMaxMs)));
    word->set_confidence(timing.confidence);
  }
}

}  // namespace sluice::voice
