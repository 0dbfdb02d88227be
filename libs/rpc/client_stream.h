// The client side of a bidirectional stream on gRPC's synchronous API: one reader thread hands
// every inbound message to a callback; Write may be called from any thread.
//
// Nothing here waits without a bound: the reader ends when the stream ends, Cancel() ends it
// from our side, and the destructor cancels and joins.
// Thread-safety: Write, Cancel and done are thread-safe.
#ifndef SYNCOPATE_LIBS_RPC_CLIENT_STREAM_H_
#define SYNCOPATE_LIBS_RPC_CLIENT_STREAM_H_

#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace syncopate::rpc {

template <typename Request, typename Response>
class ClientStream {
 public:
  using Opener = std::function<std::unique_ptr<grpc::ClientReaderWriter<Request, Response>>(
      grpc::ClientContext*)>;
  using OnMessage = std::function<void(Response&)>;
  // Called once on the reader thread when the stream has ended, with its final status.
  using OnEnd = std::function<void(const grpc::Status&)>;

  ClientStream(const Opener& open, OnMessage on_message, OnEnd on_end)
      : on_message_(std::move(on_message)), on_end_(std::move(on_end)) {
    stream_ = open(&context_);
    reader_ = std::thread([this] { ReadLoop(); });
  }

  ~ClientStream() {
    Cancel();
    if (reader_.joinable()) reader_.join();
  }

  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  // False once the stream is broken or finished.
  bool Write(const Request& request) {
    absl::MutexLock lock(&write_mu_);
    if (ended_.HasBeenNotified()) return false;
    return stream_->Write(request);
  }

  // Half-closes our side; the server finishes and the reader thread ends.
  void WritesDone() {
    absl::MutexLock lock(&write_mu_);
    stream_->WritesDone();
  }

  void Cancel() { context_.TryCancel(); }

  bool done() const { return ended_.HasBeenNotified(); }
  // Waits up to `timeout` for the stream to end.
  bool WaitForEnd(absl::Duration timeout) { return ended_.WaitForNotificationWithTimeout(timeout); }
  // The final status, valid once done().
  const grpc::Status& status() const { return status_; }

 private:
  void ReadLoop() {
    Response response;
    while (stream_->Read(&response)) on_message_(response);
    status_ = stream_->Finish();
    ended_.Notify();
    if (on_end_) on_end_(status_);
  }

  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> stream_;
  OnMessage on_message_;
  OnEnd on_end_;
  absl::Mutex write_mu_;  // gRPC allows one writer at a time
  grpc::Status status_;   // written by the reader before ended_ is notified
  absl::Notification ended_;
  std::thread reader_;
};

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_CLIENT_STREAM_H_
