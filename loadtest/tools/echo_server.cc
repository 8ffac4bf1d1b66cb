// sluice-echo-server: a bare KServe v2 gRPC service for the transport benchmark. ModelInfer answers at once, on
// gRPC's own thread, with every input copied to an output (same datatype, shape and bytes); nothing is parsed,
// validated, queued or batched. ModelMetadata and ModelConfig describe the models whose config.yaml it was
// given, exactly as sluice-server does (the same codec), so that sluice-loadtest sends identical requests to
// both and the throughput ratio isolates what sluice adds on top of gRPC itself.
// Prints "sluice-echo-server READY grpc=HOST:PORT" when it listens; SIGTERM/SIGINT stop it.
// Thread-safety: the service is stateless after start; handlers run on any gRPC thread.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <cstdio>
#include <map>

#include "CLI/CLI.hpp"
#include "backend/base/model_config.h"
#include "grpc_service.grpc.pb.h"
#include "server/kserve/model_descriptions.h"

namespace sluice {
namespace {

// The service's ModelConfig method hides the type's name inside the class.
using ModelSpec = ModelConfig;

class EchoService final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit EchoService(std::map<std::string, ModelSpec> models) : models_(std::move(models)) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override {
    response->set_live(true);
    return Reply(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context, const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override {
    response->set_ready(true);
    return Reply(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override {
    response->set_ready(models_.count(request->name()) > 0);
    return Reply(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override {
    const ModelSpec* model = Find(request->name());
    if (model == nullptr) return Reply(context, NotFound(request->name()));
    FillModelMetadata(*model, *response);
    return Reply(context, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override {
    const ModelSpec* model = Find(request->name());
    if (model == nullptr) return Reply(context, NotFound(request->name()));
    FillModelConfig(*model, *response->mutable_config());
    return Reply(context, grpc::Status::OK);
  }
  // The echo: inputs back as outputs, raw bytes copied, nothing looked at but the model name.
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override {
    const ModelSpec* model = Find(request->model_name());
    if (model == nullptr) return Reply(context, NotFound(request->model_name()));
    response->set_model_name(request->model_name());
    response->set_model_version("1");
    response->set_id(request->id());
    for (int i = 0; i < request->inputs_size(); ++i) {
      const auto& input = request->inputs(i);
      auto* output = response->add_outputs();
      output->set_name(i < static_cast<int>(model->outputs.size()) ? model->outputs[i].name : input.name());
      output->set_datatype(input.datatype());
      *output->mutable_shape() = input.shape();
      if (i < request->raw_input_contents_size()) response->add_raw_output_contents(request->raw_input_contents(i));
    }
    return Reply(context, grpc::Status::OK);
  }

 private:
  const ModelSpec* Find(const std::string& name) const {
    auto it = models_.find(name);
    return it == models_.end() ? nullptr : &it->second;
  }
  static grpc::Status NotFound(const std::string& name) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown model '" + name + "'");
  }
  static grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  const std::map<std::string, ModelSpec> models_;
};

int Main(int argc, char** argv) {
  CLI::App app{"sluice-echo-server: a bare KServe v2 gRPC echo service (inputs copied to outputs at once), the "
               "baseline of the transport benchmark"};
  std::string address = "127.0.0.1:0";
  std::vector<std::string> model_dirs;
  app.add_option("--address", address, "host:port to listen on (port 0: any free port)")->capture_default_str();
  app.add_option("--model", model_dirs, "model directory whose config.yaml names and describes an echoed model")
      ->required();
  CLI11_PARSE(app, argc, argv);

  std::map<std::string, ModelSpec> models;
  for (const std::string& dir : model_dirs) {
    absl::StatusOr<ModelSpec> config = LoadModelConfig(dir);
    if (!config.ok()) {
      std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
      return 2;
    }
    std::string name = config->name;
    models.emplace(std::move(name), *std::move(config));
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before gRPC starts its threads: only sigwait sees them

  EchoService service(std::move(models));
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(64 << 20);  // as sluice-server's example config
  builder.SetMaxSendMessageSize(64 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "cannot listen on %s\n", address.c_str());
    return 1;
  }
  std::printf("sluice-echo-server READY grpc=%s:%d\n", address.substr(0, address.rfind(':')).c_str(), port);
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) { return sluice::Main(argc, argv); }
