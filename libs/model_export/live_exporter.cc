#include "libs/model_export/live_exporter.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "glog/logging.h"
#include "libs/checkpoint/checkpoint_store.h"

namespace syncopate::model_export {
namespace {

namespace fs = std::filesystem;

bool Asks(const v1::ExportSpec& spec, v1::ExportSpec::Trigger trigger) {
  return std::find(spec.on().begin(), spec.on().end(), trigger) != spec.on().end();
}

// The newest modification time among `files`.
absl::Time Newest(const std::vector<std::string>& files) {
  absl::Time newest = absl::InfinitePast();
  for (const std::string& file : files) {
    std::error_code error;
    const auto when = fs::last_write_time(file, error);
    if (error) continue;
    const auto since_epoch = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::file_clock::to_sys(when).time_since_epoch());
    newest = std::max(newest, absl::FromUnixNanos(since_epoch.count()));
  }
  return newest;
}

absl::Time Oldest(const std::vector<std::string>& files) {
  absl::Time oldest = absl::InfiniteFuture();
  for (const std::string& file : files) {
    oldest = std::min(oldest, Newest({file}));
  }
  return oldest;
}

}  // namespace

std::string LiveExporter::Directory(const v1::ExportSpec& spec, const std::string& checkpoint_dir) {
  return spec.dir().empty() ? absl::StrCat(checkpoint_dir, "/exports") : spec.dir();
}

LiveExporter::LiveExporter(LiveExporterOptions options)
    : options_(std::move(options)), dir_(Directory(options_.spec, options_.checkpoint_dir)) {
  if (Asks(options_.spec, v1::ExportSpec::KEPT) ||
      Asks(options_.spec, v1::ExportSpec::CHECKPOINT)) {
    thread_ = std::thread([this] { Run(); });
  }
}

LiveExporter::~LiveExporter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void LiveExporter::MaybePublish(const std::string& from, std::string& last,
                                absl::Duration settled) {
  absl::StatusOr<SourceSummary> source = SummarizeSource(from);
  if (!source.ok()) return;  // nothing complete yet
  const std::string key = absl::StrJoin(source->files, ",");
  if (key == last) return;
  // One checkpoint round: the shards write their files within moments of each other. A set
  // whose files span more than a second mixes rounds (one shard already wrote the next) and
  // waits, unless it has been stable for a poll (gba shards checkpoint on their own schedule).
  const absl::Time newest = Newest(source->files);
  const absl::Duration age = absl::Now() - newest;
  const bool one_round = newest - Oldest(source->files) <= absl::Seconds(1);
  if (age < std::min(settled, absl::Milliseconds(250)) || (!one_round && age < settled)) return;
  PublishOptions publish{.dir = dir_,
                         .keep = options_.spec.keep() > 0 ? options_.spec.keep() : 3,
                         .formats = options_.formats};
  absl::StatusOr<v1::ExportRecord> record = PublishVersion({.from = from}, publish);
  last = key;  // a set that cannot export is not retried every poll
  if (!record.ok()) {
    LOG(WARNING) << "export of " << from << " not published: " << record.status().message();
    return;
  }
  LOG(INFO) << "export published: " << record->path();
  if (options_.published) options_.published(*record);
}

void LiveExporter::Run() {
  const std::string kept = absl::StrCat(options_.checkpoint_dir, "/", checkpoint::kKeptDir);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.poll)) return;
    }
    if (Asks(options_.spec, v1::ExportSpec::KEPT)) MaybePublish(kept, last_kept_, options_.poll);
    if (Asks(options_.spec, v1::ExportSpec::CHECKPOINT)) {
      MaybePublish(options_.checkpoint_dir, last_latest_, options_.poll);
    }
  }
}

void LiveExporter::Finish(absl::Time done, absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  const absl::Time deadline = absl::Now() + timeout;
  const std::string kept = absl::StrCat(options_.checkpoint_dir, "/", checkpoint::kKeptDir);
  if (Asks(options_.spec, v1::ExportSpec::END)) {
    // The shards checkpoint when the coordinator stops them: wait for every shard's file of then.
    while (absl::Now() < deadline) {
      absl::StatusOr<SourceSummary> source = SummarizeSource(options_.checkpoint_dir);
      // File times come from the kernel's coarse clock (a jiffy, up to 10 ms behind): a file
      // written just after `done` may carry a time just before it. Training had stopped well
      // before the shards were told to stop (the final evaluation came between), so a file of
      // those last moments holds the final parameters either way.
      if (source.ok() && Oldest(source->files) >= done - absl::Milliseconds(50)) break;
      absl::SleepFor(absl::Milliseconds(200));
    }
    std::string none;
    MaybePublish(options_.checkpoint_dir, none, absl::ZeroDuration());
  }
  if (Asks(options_.spec, v1::ExportSpec::KEPT)) {
    MaybePublish(kept, last_kept_, absl::ZeroDuration());
  }
}

}  // namespace syncopate::model_export
