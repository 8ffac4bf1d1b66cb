// Where and how a load client connects, for every API's client (kserve/infer_client.h, speech/, generation/, the
// HTTP worker pool in http/): the protocol, the server's address, the gRPC channels, the HTTP connection bound and
// the bearer token.
// Thread-safety: a plain struct.
#pragma once

#include <string>

namespace sluice::loadtest {

struct ClientOptions {
  std::string protocol = "grpc";  // grpc | http
  std::string address = "localhost:8001";  // host:port
  int channels = 1;               // gRPC: channels (HTTP/2 connections), used round robin
  int max_connections = 1024;     // HTTP: most calls (connections, threads) in flight at once
  std::string bearer_token;       // sent as "authorization: Bearer <token>" when not empty
};

}  // namespace sluice::loadtest
