// --api riva-streaming's own options (--streams, --chunk-ms, --no-realtime), apart from the stream runner
// (stream_runner.h) so that the command line's options (app_options.h) need none of its gRPC types.
// Thread-safety: a plain struct.
#pragma once

namespace sluice::loadtest {

struct StreamingOptions {
  int streams = 0;         // concurrent streams
  double chunk_ms = 100;   // audio per message
  bool realtime = true;    // pace chunks at real time; false: as fast as flow control lets them go
};

}  // namespace sluice::loadtest
