#include "libs/data/criteo_reader.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/data/criteo_files.h"
#include "libs/data/text_stream.h"
#include "tests/unit/data/data_file_test.h"

namespace syncopate::data {
namespace {

using ::testing::HasSubstr;

// A Criteo line (without '\n'): label, then 13 numeric and 26 categorical fields; fields not
// given are filled in (numeric i as "i", categorical as a distinct 8-digit hex string).
struct Line {
  std::string label = "0";
  std::vector<std::string> numeric;
  std::vector<std::string> categorical;

  std::string Text() const {
    std::vector<std::string> fields = {label};
    for (int i = 0; i < kCriteoNumeric; ++i) {
      fields.push_back(i < static_cast<int>(numeric.size()) ? numeric[i] : absl::StrCat(i));
    }
    for (int i = 0; i < kCriteoCategorical; ++i) {
      fields.push_back(i < static_cast<int>(categorical.size())
                           ? categorical[i]
                           : absl::StrCat(absl::Hex(0x10000000 + i * 0x01234567, absl::kZeroPad8)));
    }
    return absl::StrJoin(fields, "\t");
  }
};

// Rows compared bit for bit (NaN == NaN for missing numerics).
void ExpectSameDataset(const CtrDataset& a, const CtrDataset& b) {
  ASSERT_EQ(a.size, b.size);
  EXPECT_EQ(a.labels, b.labels);
  ASSERT_EQ(a.numeric.size(), b.numeric.size());
  if (a.numeric.empty()) return;  // memcmp must not see the null data() of an empty vector
  EXPECT_EQ(std::memcmp(a.numeric.data(), b.numeric.data(), a.numeric.size() * sizeof(float)), 0);
  EXPECT_EQ(a.categorical, b.categorical);
}

void ExpectDataLoss(const std::string& text, const std::string& message) {
  absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv(text, 0);
  ASSERT_FALSE(parsed.ok()) << "parsed: " << text;
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(parsed.status().message(), message);
}

TEST(ParseCriteoTsv, ParsesEmptyFieldsNegativeIntegersAndHexOfEitherCase) {
  Line line;
  line.label = "1";
  line.numeric = {"5", "-3", "", "0", "123456789"};
  line.categorical = {"68fd1e64", "", "ABCdef", "0", "fffffffffffffff"};
  absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv(line.Text() + "\n", 0);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size, 1);
  ASSERT_EQ(parsed->numeric.size(), 13u);
  ASSERT_EQ(parsed->categorical.size(), 26u);
  EXPECT_EQ(parsed->labels[0], 1.0f);
  const float* numeric = parsed->numeric_row(0);
  EXPECT_EQ(numeric[0], 5.0f);
  EXPECT_EQ(numeric[1], -3.0f);
  EXPECT_TRUE(std::isnan(numeric[2]));
  EXPECT_EQ(numeric[3], 0.0f);
  EXPECT_EQ(numeric[4], 123456789.0f);
  EXPECT_EQ(numeric[12], 12.0f);
  const uint64_t* categorical = parsed->categorical_row(0);
  EXPECT_EQ(categorical[0], 0x68fd1e64u);
  EXPECT_EQ(categorical[1], kMissingCategory);
  EXPECT_EQ(categorical[2], 0xabcdefu);
  EXPECT_EQ(categorical[3], 0u);
  EXPECT_EQ(categorical[4], 0xfffffffffffffffu);
}

TEST(ParseCriteoTsv, AllFieldsEmptyButTheLabel) {
  const std::string line = "0" + std::string(39, '\t');
  absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv(line, 0);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size, 1);
  for (int j = 0; j < kCriteoNumeric; ++j) EXPECT_TRUE(std::isnan(parsed->numeric_row(0)[j]));
  for (int f = 0; f < kCriteoCategorical; ++f) {
    EXPECT_EQ(parsed->categorical_row(0)[f], kMissingCategory);
  }
}

TEST(ParseCriteoTsv, CrlfAndAMissingFinalNewlineGiveTheSameRows) {
  Line a;
  Line b;
  b.label = "1";
  b.numeric = {"", "-1"};
  b.categorical = {"", "abc"};
  const std::string unix_text = a.Text() + "\n" + b.Text() + "\n";
  absl::StatusOr<CtrDataset> expected = ParseCriteoTsv(unix_text, 0);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_EQ(expected->size, 2);
  for (const std::string& text : {a.Text() + "\r\n" + b.Text() + "\r\n",  //
                                  a.Text() + "\n" + b.Text(),             //
                                  a.Text() + "\r\n" + b.Text() + "\r"}) {
    absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv(text, 0);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    ExpectSameDataset(*parsed, *expected);
  }
}

TEST(ParseCriteoTsv, EmptyInputIsZeroRows) {
  absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv("", 0);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size, 0);
  EXPECT_TRUE(parsed->labels.empty() && parsed->numeric.empty() && parsed->categorical.empty());
}

TEST(ParseCriteoTsv, LimitKeepsTheFirstExamplesAndIgnoresTheRest) {
  Line good;
  const std::string text = good.Text() + "\n" + good.Text() + "\n" + "garbage\n";
  absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv(text, 2);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->size, 2);
  EXPECT_EQ(parsed->numeric.size(), 26u);
  EXPECT_EQ(parsed->categorical.size(), 52u);
  absl::StatusOr<CtrDataset> more = ParseCriteoTsv(good.Text(), 5);
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->size, 1);
  EXPECT_EQ(ParseCriteoTsv(text, 3).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ParseCriteoTsv(text, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseCriteoTsv, BadHexNamesTheLineAndField) {
  Line good;
  Line bad;
  bad.categorical = {"1", "2", "zz"};
  std::string text;
  for (int i = 0; i < 16; ++i) text += good.Text() + "\n";
  ExpectDataLoss(text + bad.Text() + "\n", "line 17: field C3: bad hex 'zz'");
}

TEST(ParseCriteoTsv, EachMalformedFieldIsDataLoss) {
  auto with_numeric = [](int index, const std::string& value) {
    Line line;
    line.numeric.assign(13, "1");
    line.numeric[index] = value;
    return line.Text();
  };
  auto with_categorical = [](int index, const std::string& value) {
    Line line;
    line.categorical.assign(26, "a");
    line.categorical[index] = value;
    return line.Text();
  };
  Line label;
  label.label = "2";
  ExpectDataLoss(label.Text(), "line 1: field label: expected 0 or 1, got '2'");
  label.label = "";
  ExpectDataLoss(label.Text(), "line 1: field label: expected 0 or 1, got ''");
  ExpectDataLoss(with_numeric(3, "1.5"), "line 1: field I4: bad integer '1.5'");
  ExpectDataLoss(with_numeric(0, "+1"), "line 1: field I1: bad integer '+1'");
  ExpectDataLoss(with_numeric(12, "-"), "line 1: field I13: bad integer '-'");
  ExpectDataLoss(with_numeric(0, " 1"), "line 1: field I1: bad integer ' 1'");
  ExpectDataLoss(with_numeric(1, "9223372036854775808"),
                 "line 1: field I2: bad integer '9223372036854775808'");
  ExpectDataLoss(with_categorical(25, "0x1f"), "line 1: field C26: bad hex '0x1f'");
  ExpectDataLoss(with_categorical(0, "1000000000000000"),
                 "line 1: field C1: bad hex '1000000000000000'");
  ExpectDataLoss(with_categorical(4, std::string("a\0z", 3)),
                 "line 1: field C5: bad hex 'a\\x00z'");
  // Too few and too many fields, a blank line, and a line that never ends.
  Line good;
  ExpectDataLoss(good.Text() + "\n" + good.Text().substr(2) + "\n",
                 "line 2: expected 40 tab-separated fields, found 39");
  ExpectDataLoss(good.Text() + "\t\n", "line 1: expected 40 tab-separated fields, found 41");
  ExpectDataLoss(good.Text() + "\n\n" + good.Text(),
                 "line 2: expected 40 tab-separated fields, found 1");
  ExpectDataLoss(std::string(70000, 'x'), "line 1: longer than 65536 bytes");
}

TEST(ParseCriteoTsv, Int64ExtremesParse) {
  absl::StatusOr<CtrDataset> parsed = ParseCriteoTsv(
      [] {
        Line line;
        line.numeric = {"-9223372036854775808", "9223372036854775807"};
        return line.Text();
      }(),
      0);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->numeric_row(0)[0], -9223372036854775808.0f);
  EXPECT_EQ(parsed->numeric_row(0)[1], 9223372036854775807.0f);
}

// Enough varied lines to cross the reader's 1 MiB chunks several times.
std::string ManyLines(int count) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    Line line;
    line.label = absl::StrCat(i % 3 == 0 ? 1 : 0);
    line.numeric = {absl::StrCat(i), i % 7 == 0 ? std::string() : absl::StrCat(-i)};
    line.categorical = {absl::StrCat(absl::Hex(i * 2654435761u)),
                        i % 5 == 0 ? std::string() : std::string("ff")};
    absl::StrAppend(&text, line.Text(), i % 11 == 0 ? "\r\n" : "\n");
  }
  return text;
}

using CriteoFileTest = DataFileTest;

TEST_F(CriteoFileTest, GzipAndPlainFilesGiveTheParsedRows) {
  const std::string text = ManyLines(12000);
  ASSERT_GT(text.size(), 3u << 20);
  absl::StatusOr<CtrDataset> expected = ParseCriteoTsv(text, 0);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->size, 12000);
  absl::StatusOr<CtrDataset> plain = ReadCriteoTsv(WritePlain("day_0", text), 0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<CtrDataset> gzip = ReadCriteoTsv(WriteGzip("day_0.gz", text), 0);
  ASSERT_TRUE(gzip.ok()) << gzip.status();
  ExpectSameDataset(*plain, *expected);
  ExpectSameDataset(*gzip, *expected);
  // No final newline, and a limit that ends inside a later chunk.
  absl::StatusOr<CtrDataset> unterminated =
      ReadCriteoTsv(WriteGzip("cut.gz", text.substr(0, text.size() - 1)), 0);
  ASSERT_TRUE(unterminated.ok()) << unterminated.status();
  ExpectSameDataset(*unterminated, *expected);
  absl::StatusOr<CtrDataset> limited = ReadCriteoTsv(PathOf("day_0.gz"), 9000);
  ASSERT_TRUE(limited.ok()) << limited.status();
  absl::StatusOr<CtrDataset> limited_text = ParseCriteoTsv(text, 9000);
  ASSERT_TRUE(limited_text.ok()) << limited_text.status();
  EXPECT_EQ(limited->size, 9000);
  ExpectSameDataset(*limited, *limited_text);
}

TEST_F(CriteoFileTest, EmptyFileIsZeroRows) {
  absl::StatusOr<CtrDataset> plain = ReadCriteoTsv(WritePlain("empty", ""), 0);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->size, 0);
  absl::StatusOr<CtrDataset> gzip = ReadCriteoTsv(WriteGzip("empty.gz", ""), 0);
  ASSERT_TRUE(gzip.ok()) << gzip.status();
  EXPECT_EQ(gzip->size, 0);
}

TEST_F(CriteoFileTest, ParseErrorsNameThePathAndLine) {
  const std::string text = ManyLines(5000) + "1\tbad\n";
  for (const std::string& path : {WritePlain("bad", text), WriteGzip("bad.gz", text)}) {
    absl::StatusOr<CtrDataset> read = ReadCriteoTsv(path, 0);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(read.status().message(),
              absl::StrCat("Criteo file '", path,
                           "': line 5001: expected 40 tab-separated fields, found 2"));
  }
  // A file with no line breaks fails once a line exceeds the cap, not at the end of the file.
  absl::StatusOr<CtrDataset> endless =
      ReadCriteoTsv(WriteGzip("endless.gz", std::string(5 << 20, '1')), 0);
  EXPECT_EQ(endless.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(endless.status().message(), HasSubstr("line 1: longer than 65536 bytes"));
}

TEST_F(CriteoFileTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = PathOf("no-such-day.gz");
  absl::StatusOr<CtrDataset> read = ReadCriteoTsv(path, 0);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr(path));
  EXPECT_EQ(ReadCriteoTsv(path, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CriteoFileTest, CorruptAndTruncatedGzipAreDataLoss) {
  const std::string text = ManyLines(3000);
  std::ifstream in(WriteGzip("whole.gz", text), std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(gz.size(), 1000u);
  std::string corrupt = gz;
  for (size_t i = gz.size() / 2; i < gz.size() / 2 + 64; ++i) {
    corrupt[i] = static_cast<char>(~corrupt[i]);
  }
  absl::StatusOr<CtrDataset> damaged = ReadCriteoTsv(WritePlain("corrupt.gz", corrupt), 0);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss) << damaged.status();
  EXPECT_THAT(damaged.status().message(), HasSubstr("corrupt.gz"));
  absl::StatusOr<CtrDataset> cut =
      ReadCriteoTsv(WritePlain("cut.gz", gz.substr(0, gz.size() / 2)), 0);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss) << cut.status();
  EXPECT_THAT(cut.status().message(), HasSubstr("truncated"));
}

// Rows [begin, end) of `all`.
CtrDataset Slice(const CtrDataset& all, int64_t begin, int64_t end) {
  CtrDataset out;
  out.size = end - begin;
  out.labels.assign(all.labels.begin() + begin, all.labels.begin() + end);
  out.numeric.assign(all.numeric.begin() + begin * kCriteoNumeric,
                     all.numeric.begin() + end * kCriteoNumeric);
  out.categorical.assign(all.categorical.begin() + begin * kCriteoCategorical,
                         all.categorical.begin() + end * kCriteoCategorical);
  return out;
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Lines 0-6999 plain, 7000-13999 two concatenated gzip members, the rest gzip without a final
// newline: one dataset over three files, three layouts.
class CriteoFilesTest : public DataFileTest {
 protected:
  void SetUp() override {
    DataFileTest::SetUp();
    text_ = ManyLines(20000);
    std::vector<size_t> cuts = {0};
    for (int line : {7000, 10500, 14000}) {
      size_t at = 0;
      for (int i = 0; i < line; ++i) at = text_.find('\n', at) + 1;
      cuts.push_back(at);
    }
    WritePlain("day_a", text_.substr(cuts[0], cuts[1] - cuts[0]));
    const std::string first = Bytes(WriteGzip("m1.tmp", text_.substr(cuts[1], cuts[2] - cuts[1])));
    const std::string second = Bytes(WriteGzip("m2.tmp", text_.substr(cuts[2], cuts[3] - cuts[2])));
    WritePlain("day_b.gz", first + second);
    WriteGzip("day_c.gz", text_.substr(cuts[3], text_.size() - 1 - cuts[3]));
    absl::StatusOr<CtrDataset> all = ParseCriteoTsv(text_, 0);
    ASSERT_TRUE(all.ok()) << all.status();
    all_ = *std::move(all);
  }

  std::string Spec() const { return absl::StrCat(PathOf("day_a"), ",", PathOf("day_*.gz")); }

  std::string text_;
  CtrDataset all_;
};

TEST_F(CriteoFilesTest, AnyRangeReadsTheRowsOfTheWholeText) {
  // Small spacing and cap: the index fills and halves several times on this ~5 MB dataset.
  absl::StatusOr<std::unique_ptr<CriteoFiles>> files =
      CriteoFiles::Open(Spec(), {.max_seek_points = 8, .min_spacing_bytes = 16 << 10});
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ((*files)->rows(), 20000);
  EXPECT_EQ((*files)->paths().size(), 3u);
  EXPECT_GT((*files)->seek_points(), 2);
  EXPECT_LE((*files)->seek_points(), 8);
  std::mt19937_64 random(7);
  for (int i = 0; i < 150; ++i) {
    int64_t begin = static_cast<int64_t>(random() % 20001);
    int64_t end = static_cast<int64_t>(random() % 20001);
    if (begin > end) std::swap(begin, end);
    end = std::min<int64_t>(end, begin + 3000);
    SCOPED_TRACE(absl::StrCat("rows [", begin, ", ", end, ")"));
    absl::StatusOr<CtrDataset> read = (*files)->Read(begin, end);
    ASSERT_TRUE(read.ok()) << read.status();
    ExpectSameDataset(*read, Slice(all_, begin, end));
  }
  // Consecutive ranges continue the open stream, across the files' ends.
  for (int64_t begin = 0; begin < 20000; begin += 1777) {
    const int64_t end = std::min<int64_t>(begin + 1777, 20000);
    absl::StatusOr<CtrDataset> read = (*files)->Read(begin, end);
    ASSERT_TRUE(read.ok()) << read.status();
    ExpectSameDataset(*read, Slice(all_, begin, end));
  }
  EXPECT_EQ((*files)->Read(5, 20001).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ((*files)->Read(-1, 2).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(CriteoFilesTest, LimitValidationAndDefaultIndex) {
  absl::StatusOr<std::unique_ptr<CriteoFiles>> files =
      CriteoFiles::Open(Spec(), {.limit = 12345, .validate = true});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ((*files)->rows(), 12345);
  absl::StatusOr<CtrDataset> read = (*files)->Read(12000, 12345);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameDataset(*read, Slice(all_, 12000, 12345));
  EXPECT_EQ((*files)->Read(0, 12346).status().code(), absl::StatusCode::kOutOfRange);
  // The default spacing (1 MiB) keeps a few points here, each well under 32 KiB.
  EXPECT_LT((*files)->index_bytes(), 8 * 32768);
}

TEST_F(CriteoFilesTest, BadSpecsAndBadLinesAreNamed) {
  absl::StatusOr<std::unique_ptr<CriteoFiles>> none = CriteoFiles::Open(PathOf("nope_*.gz"), {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("no file matches"));
  EXPECT_EQ(CriteoFiles::Open(absl::StrCat(PathOf("day_a"), ",,"), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CriteoFiles::Open(PathOf("missing"), {}).status().code(), absl::StatusCode::kNotFound);
  // A bad line in the second file: validation names that file and its own line number.
  WriteGzip("day_b.gz", ManyLines(50) + "1\tbad\n");
  absl::StatusOr<std::unique_ptr<CriteoFiles>> bad = CriteoFiles::Open(Spec(), {.validate = true});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.status().message(),
            absl::StrCat("Criteo file '", PathOf("day_b.gz"),
                         "': line 51: expected 40 tab-separated fields, found 2"));
  // Without validation the read that reaches the line fails the same way.
  absl::StatusOr<std::unique_ptr<CriteoFiles>> lazy = CriteoFiles::Open(Spec(), {});
  ASSERT_TRUE(lazy.ok()) << lazy.status();
  EXPECT_TRUE((*lazy)->Read(7000, 7050).ok());
  EXPECT_EQ((*lazy)->Read(7040, 7051).status().message(), bad.status().message());
  // A failed read leaves nothing behind: the next one seeks afresh and reads good rows.
  absl::StatusOr<CtrDataset> after = (*lazy)->Read(7000, 7050);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->size, 50);
}

TEST_F(CriteoFilesTest, AFileThatShrankAfterOpeningIsDataLoss) {
  absl::StatusOr<std::unique_ptr<CriteoFiles>> files = CriteoFiles::Open(Spec(), {});
  ASSERT_TRUE(files.ok()) << files.status();
  WriteGzip("day_c.gz", ManyLines(10));
  absl::StatusOr<CtrDataset> read = (*files)->Read(14000, 14100);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("no longer holds the rows"));
}

// Everything `stream` returns from here to its end.
std::string ReadToEnd(TextStream& stream) {
  std::string out;
  char buffer[7001];  // odd-sized reads end mid-line and mid-block
  while (!stream.eof()) {
    absl::StatusOr<size_t> got = stream.Read(buffer, sizeof(buffer));
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) break;
    out.append(buffer, *got);
  }
  return out;
}

TEST_F(CriteoFilesTest, AGzipStreamResumesAtEveryPointItTook) {
  // Two members, each several deflate blocks: a point at every block boundary of both.
  const std::string path = PathOf("day_b.gz");
  absl::StatusOr<std::unique_ptr<TextStream>> stream = TextStream::Open(path);
  ASSERT_TRUE(stream.ok()) << stream.status();
  ASSERT_TRUE((*stream)->gzip());
  std::vector<SeekPoint> points;
  std::string text;
  char buffer[4096];
  while (!(*stream)->eof()) {
    if ((*stream)->resumable() && (*stream)->position() > 0 &&
        (points.empty() || (*stream)->position() > points.back().out)) {
      points.push_back((*stream)->Here());
    }
    absl::StatusOr<size_t> got = (*stream)->Read(buffer, sizeof(buffer));
    ASSERT_TRUE(got.ok()) << got.status();
    text.append(buffer, *got);
  }
  ASSERT_GT(points.size(), 4u);
  int with_bits = 0;
  for (const SeekPoint& point : points) {
    SCOPED_TRACE(
        absl::StrCat("point at ", point.out, " (byte ", point.in, ", ", point.bits, " bits)"));
    with_bits += point.bits != 0 ? 1 : 0;
    EXPECT_GT(point.window_bytes, 0);
    EXPECT_LT(static_cast<int>(point.window.size()), point.window_bytes);  // compressed
    absl::StatusOr<std::unique_ptr<TextStream>> resumed = TextStream::Open(path, &point);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ(ReadToEnd(**resumed), text.substr(static_cast<size_t>(point.out)));
  }
  EXPECT_GT(with_bits, 0);  // most blocks end mid-byte: inflatePrime is exercised
  // A point that does not belong to the file is refused, not inflated into garbage.
  SeekPoint wrong = points[3];
  wrong.window = "not deflate";
  absl::StatusOr<std::unique_ptr<TextStream>> refused = TextStream::Open(path, &wrong);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace syncopate::data
