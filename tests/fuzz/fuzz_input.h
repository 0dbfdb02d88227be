// A cursor over a fuzzer's input bytes, for targets that turn one input into several decisions.
// (clang's FuzzedDataProvider is not available to GCC, which builds the regression replays.)
// Thread-safety: thread-compatible.
#ifndef SYNCOPATE_TESTS_FUZZ_FUZZ_INPUT_H_
#define SYNCOPATE_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace syncopate::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return size_ == 0; }
  uint8_t Byte() {
    if (size_ == 0) return 0;
    --size_;
    return *data_++;
  }
  // Eight bytes (zero-padded when the input runs out), native order.
  int64_t Int64() {
    int64_t value = 0;
    const size_t n = size_ < sizeof(value) ? size_ : sizeof(value);
    std::memcpy(&value, data_, n);
    data_ += n;
    size_ -= n;
    return value;
  }
  // Up to `max` bytes, the count chosen by the next byte.
  std::string Bytes(size_t max) {
    size_t n = Byte();
    if (n > max) n = max;
    if (n > size_) n = size_;
    std::string out(reinterpret_cast<const char*>(data_), n);
    data_ += n;
    size_ -= n;
    return out;
  }
  std::string Rest() {
    std::string out(reinterpret_cast<const char*>(data_), size_);
    data_ += size_;
    size_ = 0;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

}  // namespace syncopate::fuzz

#endif  // SYNCOPATE_TESTS_FUZZ_FUZZ_INPUT_H_
