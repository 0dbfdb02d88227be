// Exports while a job runs (ExportSpec): a thread of the coordinator that watches the shards'
// checkpoint directory and publishes (publisher.h) each new kept version (kept/, once every
// shard has written the same point: KEPT) or each new complete set of checkpoints (once no
// shard's file is younger than a poll: CHECKPOINT), and, when the job is done, the final
// parameters once every shard's last checkpoint is on disk (END). It reads files only: shards
// write their checkpoints as always, and the directory must be the one they write (a shared
// volume outside a single machine).
// Thread-safety: Finish and the destructor are called by the thread that started it.
#ifndef SYNCOPATE_LIBS_MODEL_EXPORT_LIVE_EXPORTER_H_
#define SYNCOPATE_LIBS_MODEL_EXPORT_LIVE_EXPORTER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "libs/model_export/publisher.h"
#include "syncopate/v1/cluster.pb.h"
#include "syncopate/v1/job.pb.h"

namespace syncopate::model_export {

struct LiveExporterOptions {
  v1::ExportSpec spec;
  std::string checkpoint_dir;
  FormatWriter formats = nullptr;
  // Each published version (the coordinator's status names the newest).
  std::function<void(const v1::ExportRecord&)> published = nullptr;
  absl::Duration poll = absl::Seconds(2);
};

class LiveExporter {
 public:
  // Starts the watching thread (when the spec asks for KEPT or CHECKPOINT).
  explicit LiveExporter(LiveExporterOptions options);
  ~LiveExporter();
  LiveExporter(const LiveExporter&) = delete;
  LiveExporter& operator=(const LiveExporter&) = delete;

  // The job is done (at `done`): stops the thread, then (END) waits up to `timeout` for a
  // complete set of checkpoints every file of which was written at or after `done` (the shards'
  // job-done checkpoints) and publishes it, and takes a last look at kept/ (KEPT).
  void Finish(absl::Time done, absl::Duration timeout);

  // The export directory: ExportSpec.dir, or <checkpoint_dir>/exports.
  static std::string Directory(const v1::ExportSpec& spec, const std::string& checkpoint_dir);

 private:
  void Run();
  // Publishes the set in `from` unless it is the one published last from there.
  void MaybePublish(const std::string& from, std::string& last, absl::Duration settled);

  const LiveExporterOptions options_;
  const std::string dir_;
  std::string last_latest_;  // the file set last published, per source (thread or Finish only)
  std::string last_kept_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace syncopate::model_export

#endif  // SYNCOPATE_LIBS_MODEL_EXPORT_LIVE_EXPORTER_H_
