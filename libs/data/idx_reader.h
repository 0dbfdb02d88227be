// Readers for the IDX format of MNIST-style datasets (http://yann.lecun.com/exdb/mnist/, "FILE
// FORMATS"): a big-endian header (magic, then one u32 per dimension) followed by raw u8 data.
// Files may be gzip-compressed or plain; zlib's gzread reads both transparently.
// Thread-safety: free functions without shared state; safe to call concurrently.
#ifndef SYNCOPATE_LIBS_DATA_IDX_READER_H_
#define SYNCOPATE_LIBS_DATA_IDX_READER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "libs/data/dataset.h"

namespace syncopate::data {

// Reads an images file (magic 0x00000803: u8, 3-D [count, rows, cols]) and its labels file
// (magic 0x00000801: u8, 1-D [count]) into a Dataset with dim = rows * cols and pixels scaled to
// [0, 1] (value / 255).
//
// `limit` > 0 keeps only the first `limit` examples (all of them if the files hold fewer); 0 keeps
// all. Only the kept images are decompressed. num_classes is max label + 1 over the *whole* labels
// file, so a limited load agrees with a full one on the model's output width.
//
// Errors:
//   INVALID_ARGUMENT  `limit` < 0.
//   NOT_FOUND         a file does not exist (the message names the path).
//   DATA_LOSS         wrong magic number, zero-sized image dimensions, a file shorter than its
//                     header promises (the message names the file and the expected vs. read byte
//                     counts), a corrupt gzip stream, or image and label counts that disagree.
//   other             the file cannot be opened or read (e.g. PERMISSION_DENIED).
absl::StatusOr<Dataset> ReadIdxPair(const std::string& images_path, const std::string& labels_path,
                                    int64_t limit);

enum class Split { kTrain, kTest };

// Loads Fashion-MNIST from `dir` as laid out by Debian's dataset-fashion-mnist package
// (/usr/share/datasets/fashion-mnist): {train,t10k}-images-idx3-ubyte.gz and
// {train,t10k}-labels-idx1-ubyte.gz. kTrain has 60000 examples, kTest 10000; 784 features and 10
// classes. Same `limit` and errors as ReadIdxPair; a NOT_FOUND message also says which package
// provides the files.
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, Split split, int64_t limit);

// The number of examples in a split, from the labels file's header alone (no pixels read).
absl::StatusOr<int64_t> CountFashionMnist(const std::string& dir, Split split);

}  // namespace syncopate::data

#endif  // SYNCOPATE_LIBS_DATA_IDX_READER_H_
