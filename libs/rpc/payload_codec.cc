#include "libs/rpc/payload_codec.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "grpc/slice.h"

namespace syncopate::rpc {
namespace {

// Protobuf's wire types (protobuf.dev/programming-guides/encoding).
constexpr uint64_t kVarint = 0;
constexpr uint64_t kFixed64 = 1;
constexpr uint64_t kLengthDelimited = 2;
constexpr uint64_t kFixed32 = 5;

constexpr uint64_t Tag(int field, uint64_t wire_type) {
  return (static_cast<uint64_t>(field) << 3) | wire_type;
}

void AppendVarint(uint64_t value, std::string& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

absl::Status Malformed(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed message: ", what));
}

// A read position in a sequence of slices, limited to `remaining` bytes. A copy is a saved
// position.
class SliceCursor {
 public:
  SliceCursor(const std::vector<grpc::Slice>& slices, size_t size)
      : slices_(&slices), remaining_(size) {}

  size_t remaining() const { return remaining_; }

  // The next `n` bytes as a cursor of their own (n <= remaining()).
  SliceCursor Prefix(size_t n) const {
    SliceCursor prefix = *this;
    prefix.remaining_ = n;
    return prefix;
  }

  bool ReadVarint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {  // at most ten bytes
      uint8_t byte = 0;
      if (!ReadByte(byte)) return false;
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // Advances `n` bytes, appending the pieces passed over to `out` unless it is null.
  bool Take(uint64_t n, tensor::ByteChunks* out) {
    if (n > remaining_) return false;
    remaining_ -= n;
    while (n > 0) {
      const grpc::Slice& slice = (*slices_)[index_];
      const size_t available = slice.size() - offset_;
      if (available == 0) {
        ++index_;
        offset_ = 0;
        continue;
      }
      const size_t step = std::min<uint64_t>(n, available);
      if (out != nullptr) {
        out->emplace_back(reinterpret_cast<const char*>(slice.begin()) + offset_, step);
      }
      offset_ += step;
      n -= step;
    }
    return true;
  }

  // Advances past the value of a field whose tag has been read.
  absl::Status SkipValue(uint64_t tag) {
    uint64_t length = 0;
    switch (tag & 7) {
      case kVarint:
        return ReadVarint(length) ? absl::OkStatus() : Malformed("a truncated varint");
      case kFixed64:
        return Take(8, nullptr) ? absl::OkStatus() : Malformed("a truncated fixed64");
      case kFixed32:
        return Take(4, nullptr) ? absl::OkStatus() : Malformed("a truncated fixed32");
      case kLengthDelimited:
        return ReadVarint(length) && Take(length, nullptr)
                   ? absl::OkStatus()
                   : Malformed(absl::StrCat("field ", tag >> 3, " runs past the end"));
      default:
        return Malformed(absl::StrCat("field ", tag >> 3, " has wire type ", tag & 7,
                                      " (groups and invalid types are not accepted)"));
    }
  }

  // Advances past one field that is not the one looked for, appending its bytes (tag and value)
  // to `out`.
  absl::Status CopyField(const SliceCursor& field_start, uint64_t tag, tensor::ByteChunks& out) {
    if (absl::Status skipped = SkipValue(tag); !skipped.ok()) return skipped;
    SliceCursor again = field_start;
    again.Take(field_start.remaining() - remaining_, &out);
    return absl::OkStatus();
  }

 private:
  bool ReadByte(uint8_t& byte) {
    if (remaining_ == 0) return false;
    while (offset_ == (*slices_)[index_].size()) {
      ++index_;
      offset_ = 0;
    }
    byte = (*slices_)[index_].begin()[offset_++];
    --remaining_;
    return true;
  }

  const std::vector<grpc::Slice>* slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
  uint64_t remaining_;
};

// Pieces read as one stream by protobuf's parser: the message without its payload, parsed
// without first being gathered into one buffer.
class ChunksInputStream final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit ChunksInputStream(const tensor::ByteChunks& chunks) : chunks_(chunks) {}

  bool Next(const void** data, int* size) override {
    for (; index_ < chunks_.size(); ++index_, offset_ = 0) {
      const std::span<const char> chunk = chunks_[index_];
      if (offset_ == chunk.size()) continue;
      *data = chunk.data() + offset_;
      *size = static_cast<int>(chunk.size() - offset_);
      offset_ = chunk.size();
      bytes_ += *size;
      return true;
    }
    return false;
  }

  // Only ever after Next, by at most what it returned (ZeroCopyInputStream's contract).
  void BackUp(int count) override {
    offset_ -= static_cast<size_t>(count);
    bytes_ -= count;
  }

  bool Skip(int count) override {
    for (; count > 0 && index_ < chunks_.size(); ++index_, offset_ = 0) {
      const size_t step =
          std::min<size_t>(static_cast<size_t>(count), chunks_[index_].size() - offset_);
      offset_ += step;
      bytes_ += static_cast<int64_t>(step);
      count -= static_cast<int>(step);
      if (count == 0) return true;
    }
    return count == 0;
  }

  int64_t ByteCount() const override { return bytes_; }

 private:
  const tensor::ByteChunks& chunks_;
  size_t index_ = 0;
  size_t offset_ = 0;
  int64_t bytes_ = 0;
};

// The container's fields other than the payload go to `rest`; the payload's last occurrence to
// `payload`.
absl::Status SplitContainer(SliceCursor cursor, int payload_field, tensor::ByteChunks& rest,
                            tensor::ByteChunks& payload) {
  while (cursor.remaining() > 0) {
    const SliceCursor start = cursor;
    uint64_t tag = 0;
    if (!cursor.ReadVarint(tag)) return Malformed("a truncated tag");
    if (tag == Tag(payload_field, kLengthDelimited)) {
      uint64_t length = 0;
      payload.clear();
      if (!cursor.ReadVarint(length) || !cursor.Take(length, &payload)) {
        return Malformed(absl::StrCat("field ", payload_field, " runs past the end"));
      }
      continue;
    }
    if (absl::Status copied = cursor.CopyField(start, tag, rest); !copied.ok()) return copied;
  }
  return absl::OkStatus();
}

void DeleteSharedValues(void* owner) {
  delete static_cast<std::shared_ptr<const std::vector<float>>*>(owner);
}

void DeleteOwnedBytes(void* owner) { delete static_cast<std::string*>(owner); }

void DeleteSharedBytes(void* owner) {
  delete static_cast<std::shared_ptr<const std::string>*>(owner);
}

}  // namespace

grpc::Slice SliceReferencing(std::shared_ptr<const std::vector<float>> values) {
  if (values == nullptr || values->empty()) return {};
  auto* owner = new std::shared_ptr<const std::vector<float>>(std::move(values));
  // gRPC never writes through a slice it was given; the cast only fits its C signature.
  return {const_cast<float*>((*owner)->data()), (*owner)->size() * sizeof(float),
          &DeleteSharedValues, owner};
}

grpc::Slice SliceReferencing(std::shared_ptr<const std::string> bytes) {
  if (bytes == nullptr || bytes->empty()) return {};
  auto* owner = new std::shared_ptr<const std::string>(std::move(bytes));
  return {const_cast<char*>((*owner)->data()), (*owner)->size(), &DeleteSharedBytes, owner};
}

grpc::Slice SliceCopying(std::span<const char> bytes) { return {bytes.data(), bytes.size()}; }

grpc::Slice SliceOwning(std::string bytes) {
  if (bytes.empty()) return {};
  auto* owner = new std::string(std::move(bytes));
  return {owner->data(), owner->size(), &DeleteOwnedBytes, owner};
}

grpc::ByteBuffer EncodeWithPayload(const PayloadField& field,
                                   const google::protobuf::MessageLite& container,
                                   const grpc::Slice& payload) {
  const size_t container_size = container.ByteSizeLong();
  std::string payload_prefix;
  AppendVarint(Tag(field.payload, kLengthDelimited), payload_prefix);
  AppendVarint(payload.size(), payload_prefix);
  std::string prefix;
  AppendVarint(Tag(field.container, kLengthDelimited), prefix);
  AppendVarint(container_size + payload_prefix.size() + payload.size(), prefix);
  // One slice for everything but the payload: the prefixes and the container's other fields.
  grpc_slice head = grpc_slice_malloc(prefix.size() + container_size + payload_prefix.size());
  uint8_t* out = GRPC_SLICE_START_PTR(head);
  out = std::copy(prefix.begin(), prefix.end(), out);
  out = container.SerializeWithCachedSizesToArray(out);
  std::copy(payload_prefix.begin(), payload_prefix.end(), out);
  const grpc::Slice slices[] = {grpc::Slice(head, grpc::Slice::STEAL_REF), payload};
  return {slices, payload.size() == 0 ? 1u : 2u};
}

grpc::ByteBuffer Encode(const google::protobuf::MessageLite& message) {
  grpc_slice slice = grpc_slice_malloc(message.ByteSizeLong());
  message.SerializeWithCachedSizesToArray(GRPC_SLICE_START_PTR(slice));
  const grpc::Slice owned(slice, grpc::Slice::STEAL_REF);
  return {&owned, 1};
}

absl::Status DecodeWithPayload(const grpc::ByteBuffer& buffer, const PayloadField& field,
                               google::protobuf::MessageLite& message, ReceivedPayload& payload) {
  payload = ReceivedPayload();
  if (grpc::Status dumped = buffer.Dump(&payload.slices_); !dumped.ok()) {
    return Malformed(dumped.error_message());
  }
  size_t total = 0;
  for (const grpc::Slice& slice : payload.slices_) total += slice.size();
  // Every field but the container, in order, with the container (minus its payload) put back
  // where it was: protobuf parses that exactly as it would the whole message, payload cleared.
  tensor::ByteChunks before, container, after;
  bool seen_container = false;
  SliceCursor cursor(payload.slices_, total);
  while (cursor.remaining() > 0) {
    const SliceCursor start = cursor;
    uint64_t tag = 0;
    if (!cursor.ReadVarint(tag)) return Malformed("a truncated tag");
    if (tag == Tag(field.container, kLengthDelimited)) {
      if (seen_container) return Malformed(absl::StrCat("field ", field.container, " twice"));
      seen_container = true;
      uint64_t length = 0;
      if (!cursor.ReadVarint(length) || length > cursor.remaining()) {
        return Malformed(absl::StrCat("field ", field.container, " runs past the end"));
      }
      if (absl::Status split =
              SplitContainer(cursor.Prefix(length), field.payload, container, payload.chunks_);
          !split.ok()) {
        return split;
      }
      cursor.Take(length, nullptr);
      continue;
    }
    if (absl::Status copied = cursor.CopyField(start, tag, seen_container ? after : before);
        !copied.ok()) {
      return copied;
    }
  }
  std::string container_prefix;
  tensor::ByteChunks pieces = std::move(before);
  if (seen_container) {
    AppendVarint(Tag(field.container, kLengthDelimited), container_prefix);
    AppendVarint(tensor::TotalSize(container), container_prefix);
    pieces.emplace_back(container_prefix.data(), container_prefix.size());
    pieces.insert(pieces.end(), container.begin(), container.end());
    pieces.insert(pieces.end(), after.begin(), after.end());
  }
  ChunksInputStream stream(pieces);
  if (!message.ParseFromZeroCopyStream(&stream)) {
    return Malformed(absl::StrCat("not a valid ", message.GetTypeName()));
  }
  payload.size_ = tensor::TotalSize(payload.chunks_);
  return absl::OkStatus();
}

}  // namespace syncopate::rpc
