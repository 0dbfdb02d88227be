// A server-side bidirectional stream on gRPC's callback API with a thread-safe outbound queue.
//
// gRPC allows one outstanding write per stream; Send() queues and starts the next write from
// OnWriteDone, so any thread may send at any time. Close() finishes once queued writes have
// drained. No lock of ours is held while calling into gRPC, and OnRequest runs on a gRPC
// callback thread one message at a time (it must not block).
//
// Lifetime: create with std::make_shared and call Begin(self). The stream keeps itself alive
// until gRPC calls OnDone; other threads may hold shared_ptrs and Send() after that (no-op).
// Thread-safety: Send, Close and closed are thread-safe.
#ifndef SYNCOPATE_LIBS_RPC_BIDI_STREAM_H_
#define SYNCOPATE_LIBS_RPC_BIDI_STREAM_H_

#include <deque>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/server_callback.h"

namespace syncopate::rpc {

template <typename Request, typename Response>
class BidiStream : public grpc::ServerBidiReactor<Request, Response> {
 public:
  // Starts reading. `self` must own this object; it is released when gRPC is done with it.
  void Begin(std::shared_ptr<BidiStream> self) {
    self_ = std::move(self);
    this->StartRead(&request_);
  }

  // Queues a message. Returns false when the stream is closing or closed.
  bool Send(Response response) {
    const Response* to_write = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (finish_requested_) return false;
      outbox_.push_back(std::move(response));
      if (writing_) return true;
      writing_ = true;
      to_write = &outbox_.front();
    }
    this->StartWrite(to_write);
    return true;
  }

  // Finishes the stream with `status` after queued writes drain. Later calls are ignored.
  void Close(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (finish_requested_) return;
      finish_requested_ = true;
      if (writing_) {  // OnWriteDone finishes with it once the queue has drained
        final_status_ = std::move(status);
        return;
      }
    }
    this->Finish(std::move(status));
  }

  bool closed() const {
    absl::MutexLock lock(&mu_);
    return finish_requested_;
  }

 protected:
  // One inbound message. May call Send and Close.
  virtual void OnRequest(const Request& request) = 0;
  // Called once, when gRPC is done with the stream (peer gone, cancelled or finished).
  virtual void OnStreamDone() {}

 private:
  void OnReadDone(bool ok) override {
    if (!ok) {  // the peer half-closed, or the stream broke
      Close(grpc::Status::OK);
      return;
    }
    OnRequest(request_);
    if (closed()) return;
    this->StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    const Response* next = nullptr;
    bool finish_now = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      outbox_.pop_front();
      if (!ok) {  // the stream is broken: nothing else will be delivered
        outbox_.clear();
        if (!finish_requested_) {
          finish_requested_ = true;
          final_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
        }
      }
      if (!outbox_.empty()) {
        next = &outbox_.front();
      } else {
        writing_ = false;
        finish_now = finish_requested_;
        status = final_status_;
      }
    }
    if (next != nullptr) {
      this->StartWrite(next);
    } else if (finish_now) {
      this->Finish(std::move(status));
    }
  }

  void OnDone() override {
    OnStreamDone();
    std::shared_ptr<BidiStream> self = std::move(self_);  // may destroy *this on scope exit
  }

  Request request_;
  std::shared_ptr<BidiStream> self_;
  mutable absl::Mutex mu_;
  std::deque<Response> outbox_ ABSL_GUARDED_BY(mu_);  // front() is being written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_requested_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace syncopate::rpc

#endif  // SYNCOPATE_LIBS_RPC_BIDI_STREAM_H_
