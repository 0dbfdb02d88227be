#include "libs/datagen/ctr_generator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "libs/data/criteo_files.h"
#include "libs/data/criteo_reader.h"
#include "tests/unit/data/data_file_test.h"

namespace syncopate::datagen {
namespace {

using data::CtrDataset;
using data::kCriteoCategorical;
using data::kCriteoNumeric;
using data::kMissingCategory;
using data::ReadCriteoTsv;

using ::testing::AllOf;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::Le;

TEST(ZipfSampler, MatchesTheZipfProbabilities) {
  constexpr int kN = 10;
  constexpr double kExponent = 1.15;
  constexpr int kDraws = 200000;
  ZipfSampler sampler(kN, kExponent);
  std::mt19937_64 rng(3);
  std::vector<int> counts(kN + 1, 0);
  for (int i = 0; i < kDraws; ++i) {
    const int64_t k = sampler.Sample(rng);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, kN);
    ++counts[k];
  }
  double normaliser = 0;
  for (int k = 1; k <= kN; ++k) normaliser += std::pow(k, -kExponent);
  for (int k = 1; k <= kN; ++k) {
    const double p = std::pow(k, -kExponent) / normaliser;
    const double sigma = std::sqrt(kDraws * p * (1 - p));
    EXPECT_NEAR(counts[k], kDraws * p, 5 * sigma) << "k=" << k;
  }
}

TEST(ZipfSampler, HandlesOneValueAndHugeVocabularies) {
  std::mt19937_64 rng(5);
  ZipfSampler one(1, 1.15);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(one.Sample(rng), 1);
  ZipfSampler huge(int64_t{1} << 31, 1.0);  // exponent 1 exercises the log-limit branches
  int64_t ones = 0;
  for (int i = 0; i < 10000; ++i) {
    const int64_t k = huge.Sample(rng);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, int64_t{1} << 31);
    ones += k == 1 ? 1 : 0;
  }
  // P(1) = 1 / H(2^31) ~= 1 / 22.05.
  EXPECT_NEAR(ones / 10000.0, 1 / 22.05, 0.01);
}

TEST(CtrTeacher, VocabulariesSpanTheConfiguredRange) {
  CtrTeacher teacher(CtrTeacherConfig{});
  int64_t smallest = teacher.vocabulary_size(0);
  int64_t largest = smallest;
  for (int f = 0; f < kCriteoCategorical; ++f) {
    smallest = std::min(smallest, teacher.vocabulary_size(f));
    largest = std::max(largest, teacher.vocabulary_size(f));
  }
  EXPECT_EQ(smallest, 3);
  EXPECT_EQ(largest, 100000);
}

TEST(CtrTeacher, SameSeedSameTeacherAndDifferentSeedDifferentWeights) {
  CtrTeacherConfig config;
  const CtrTeacher a(config);
  const CtrTeacher b(config);
  config.teacher_seed = 2;
  const CtrTeacher c(config);
  EXPECT_EQ(a.bias(), b.bias());
  std::mt19937_64 rng_a(9);
  std::mt19937_64 rng_b(9);
  float numeric_a[kCriteoNumeric], numeric_b[kCriteoNumeric];
  uint64_t categorical_a[kCriteoCategorical], categorical_b[kCriteoCategorical];
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const double p_a = a.Sample(rng_a, numeric_a, categorical_a);
    const double p_b = b.Sample(rng_b, numeric_b, categorical_b);
    ASSERT_EQ(p_a, p_b);
    // Bit-identical (NaN marks a missing value, and NaN != NaN): memcmp is the point here.
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    ASSERT_EQ(std::memcmp(numeric_a, numeric_b, sizeof(numeric_a)), 0);
    ASSERT_EQ(std::memcmp(categorical_a, categorical_b, sizeof(categorical_a)), 0);
    ASSERT_EQ(p_a, a.Probability(numeric_a, categorical_a));
    // Teacher c's hex strings are different values; it sees a's examples as (mostly) foreign.
    differ += c.Probability(numeric_a, categorical_a) != p_a ? 1 : 0;
  }
  EXPECT_EQ(differ, 100);
}

TEST(CtrTeacher, ValuesPrintAsEightHexDigitsAndMissingRatesFollowTheRealData) {
  const CtrTeacher teacher(CtrTeacherConfig{});
  std::mt19937_64 rng(11);
  float numeric[kCriteoNumeric];
  uint64_t categorical[kCriteoCategorical];
  int missing_i12 = 0, missing_c22 = 0, negative_i2 = 0;
  constexpr int kRows = 20000;
  for (int i = 0; i < kRows; ++i) {
    const double p = teacher.Sample(rng, numeric, categorical);
    ASSERT_GT(p, 0.0);
    ASSERT_LT(p, 1.0);
    for (int f = 0; f < kCriteoCategorical; ++f) {
      ASSERT_TRUE(categorical[f] == kMissingCategory || categorical[f] <= 0xffffffffu);
    }
    for (int j = 0; j < kCriteoNumeric; ++j) {
      ASSERT_TRUE(std::isnan(numeric[j]) || numeric[j] == std::floor(numeric[j]));
      if (j != 1) {
        ASSERT_TRUE(std::isnan(numeric[j]) || numeric[j] >= 0);
      }
    }
    missing_i12 += std::isnan(numeric[11]) ? 1 : 0;
    missing_c22 += categorical[21] == kMissingCategory ? 1 : 0;
    negative_i2 += numeric[1] < 0 ? 1 : 0;
  }
  EXPECT_NEAR(missing_i12 / double{kRows}, 0.76, 0.02);
  EXPECT_NEAR(missing_c22 / double{kRows}, 0.76, 0.02);
  EXPECT_NEAR(negative_i2 / double{kRows}, 0.03, 0.01);
}

using CtrGeneratorTest = data::DataFileTest;

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_F(CtrGeneratorTest, FileRoundTripsTheSampledRowsPlainAndGzip) {
  const CtrTeacherConfig config;
  constexpr int64_t kRows = 3000;
  for (const std::string name : {"train.txt", "train.txt.gz"}) {
    const std::string path = PathOf(name);
    absl::StatusOr<CtrGenerationReport> report = GenerateCtr(config, 42, kRows, path);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->rows, kRows);
    absl::StatusOr<CtrDataset> read = ReadCriteoTsv(path, 0);
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_EQ(read->size, kRows);
    // Replaying the documented draw order reproduces every row and its probability.
    const CtrTeacher teacher(config);
    std::mt19937_64 rng(42);
    float numeric[kCriteoNumeric];
    uint64_t categorical[kCriteoCategorical];
    int64_t positives = 0;
    for (int64_t i = 0; i < kRows; ++i) {
      const double p = teacher.Sample(rng, numeric, categorical);
      const float label = static_cast<double>(rng() >> 11) * 0x1.0p-53 < p ? 1.0f : 0.0f;
      positives += label != 0 ? 1 : 0;
      ASSERT_EQ(read->labels[i], label) << "row " << i;
      // Bit-identical, NaNs (missing values) included: memcmp, not ==.
      // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
      ASSERT_EQ(std::memcmp(read->numeric_row(i), numeric, sizeof(numeric)), 0) << "row " << i;
      ASSERT_EQ(std::memcmp(read->categorical_row(i), categorical, sizeof(categorical)), 0)
          << "row " << i;
      ASSERT_EQ(teacher.Probability(read->numeric_row(i), read->categorical_row(i)), p);
    }
    EXPECT_EQ(report->positive_rate, static_cast<double>(positives) / kRows);
  }
  // The gzip file is compressed and holds the same text.
  const std::string plain = FileBytes(PathOf("train.txt"));
  EXPECT_LT(FileBytes(PathOf("train.txt.gz")).size(), plain.size() / 2);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), '\n'), kRows);
  // No temporary file is left next to the outputs.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 2);
}

TEST_F(CtrGeneratorTest, SameSeedsSameFileAndAnotherSampleSeedAnotherFile) {
  const CtrTeacherConfig config;
  ASSERT_TRUE(GenerateCtr(config, 1, 500, PathOf("a")).ok());
  ASSERT_TRUE(GenerateCtr(config, 1, 500, PathOf("b")).ok());
  ASSERT_TRUE(GenerateCtr(config, 2, 500, PathOf("c")).ok());
  EXPECT_EQ(FileBytes(PathOf("a")), FileBytes(PathOf("b")));
  EXPECT_NE(FileBytes(PathOf("a")), FileBytes(PathOf("c")));
}

// The calibration the header promises: ~0.25 positives and a Bayes AUC of ~0.80 on a large file.
TEST_F(CtrGeneratorTest, DefaultTeacherHasRealisticRateAndBayesAuc) {
  absl::StatusOr<CtrGenerationReport> report =
      GenerateCtr(CtrTeacherConfig{}, 7, 200000, PathOf("big.gz"));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->positive_rate, AllOf(Ge(0.22), Le(0.28)));
  EXPECT_THAT(report->bayes_auc, AllOf(Ge(0.78), Le(0.82)));
  // Between perfect (0) and the constant predictor's entropy (~0.56 at a rate of 0.25).
  EXPECT_THAT(report->bayes_logloss, AllOf(Ge(0.35), Le(0.50)));
}

// Key churn (CtrKeyChurn): the same rows and labels as without it, with the churning fraction of
// values under a key of their period: the distinct keys grow with every period.
TEST_F(CtrGeneratorTest, KeyChurnRenamesAFractionOfValuesEveryPeriod) {
  const CtrTeacherConfig config;
  ASSERT_TRUE(GenerateCtr(config, 3, 4000, PathOf("plain")).ok());
  ASSERT_TRUE(
      GenerateCtr(config, 3, 4000, PathOf("churn"), {.period_rows = 1000, .fraction = 0.5}).ok());
  absl::StatusOr<CtrDataset> plain = ReadCriteoTsv(PathOf("plain"), 0);
  absl::StatusOr<CtrDataset> churn = ReadCriteoTsv(PathOf("churn"), 0);
  ASSERT_TRUE(plain.ok() && churn.ok());
  EXPECT_EQ(churn->labels, plain->labels);
  EXPECT_EQ(churn->size, 4000);
  // A value keeps or changes its key in every row alike; changed keys differ between periods.
  std::map<uint64_t, std::set<uint64_t>> keys_of;  // value of C1 -> its keys
  int64_t renamed = 0, present = 0;
  for (int64_t i = 0; i < churn->size; ++i) {
    const uint64_t value = plain->categorical_row(i)[0];
    if (value == kMissingCategory) continue;
    ++present;
    renamed += churn->categorical_row(i)[0] != value;
    keys_of[value].insert(churn->categorical_row(i)[0]);
  }
  EXPECT_GT(renamed, present / 10);
  EXPECT_LT(renamed, present);
  for (const auto& [value, keys] : keys_of) {
    EXPECT_TRUE(keys.size() == 1 || keys.count(value) == 0) << value;
    EXPECT_LE(keys.size(), 4u) << "one key per period";
  }
  EXPECT_FALSE(GenerateCtr(config, 3, 10, PathOf("bad"), {.period_rows = 10, .fraction = 2}).ok());
}

TEST_F(CtrGeneratorTest, RejectsBadArgumentsAndLeavesNoFile) {
  const CtrTeacherConfig good;
  EXPECT_EQ(GenerateCtr(good, 1, 0, PathOf("x")).status().code(),
            absl::StatusCode::kInvalidArgument);
  CtrTeacherConfig bad;
  bad.positive_rate = 1.5;
  absl::Status status = GenerateCtr(bad, 1, 10, PathOf("x")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("positive_rate"));
  bad = good;
  bad.num_interactions = 6;
  EXPECT_EQ(ValidateCtrTeacherConfig(bad).code(), absl::StatusCode::kInvalidArgument);
  status = GenerateCtr(good, 1, 10, PathOf("no-such-dir/x.gz")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("no-such-dir"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 0);
}

// The segments teacher: deterministic from its seeds, labels drawn from p(click | x, z) while
// the reported Bayes probability is p(click | x) = Probability(x), and calibrated like the first.
TEST_F(CtrGeneratorTest, SegmentTeacherReplaysItsRowsAndReportsTheMarginalProbability) {
  CtrTeacherConfig config;
  config.kind = CtrTeacherKind::kSegments;
  constexpr int64_t kRows = 2000;
  const std::string path = PathOf("segments.tsv");
  absl::StatusOr<CtrGenerationReport> report = GenerateCtr(config, 5, kRows, path);
  ASSERT_TRUE(report.ok()) << report.status();
  absl::StatusOr<CtrDataset> read = ReadCriteoTsv(path, 0);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size, kRows);
  const SegmentTeacher teacher(config);
  std::mt19937_64 rng(5);
  float numeric[kCriteoNumeric];
  uint64_t categorical[kCriteoCategorical];
  for (int64_t i = 0; i < kRows; ++i) {
    double bayes = -1;
    const double p = teacher.Sample(rng, numeric, categorical, &bayes);
    const float label = static_cast<double>(rng() >> 11) * 0x1.0p-53 < p ? 1.0f : 0.0f;
    ASSERT_EQ(read->labels[i], label) << "row " << i;
    ASSERT_EQ(std::memcmp(read->categorical_row(i), categorical, sizeof(categorical)), 0);
    ASSERT_EQ(teacher.Probability(read->numeric_row(i), read->categorical_row(i)), bayes);
    const auto posterior = teacher.SegmentPosterior(numeric, categorical);
    double sum = 0;
    for (double q : posterior) sum += q;
    ASSERT_NEAR(sum, 1.0, 1e-9);
  }
  EXPECT_EQ(teacher.vocabulary_size(teacher.fm_fields().back()), 100000);
  CtrGenerationReport again = *GenerateCtr(config, 5, kRows, PathOf("again.tsv"));
  EXPECT_EQ(FileBytes(path), FileBytes(PathOf("again.tsv")));
  EXPECT_EQ(again.bayes_auc, report->bayes_auc);
}

// The segments are recoverable from the fields they drive (otherwise they would be noise), and
// the teacher's Bayes AUC sits near the reference data (0.79).
TEST_F(CtrGeneratorTest, SegmentTeacherHasRealisticRateAndBayesAucAndVisibleSegments) {
  CtrTeacherConfig config;
  config.kind = CtrTeacherKind::kSegments;
  absl::StatusOr<CtrGenerationReport> report = GenerateCtr(config, 7, 100000, PathOf("big.gz"));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->positive_rate, AllOf(Ge(0.22), Le(0.28)));
  EXPECT_THAT(report->bayes_auc, AllOf(Ge(0.77), Le(0.82)));
  EXPECT_THAT(report->bayes_logloss, AllOf(Ge(0.35), Le(0.52)));
  // Mean posterior of the most likely segment: well above the uniform 1/8.
  const SegmentTeacher teacher(config);
  std::mt19937_64 rng(9);
  float numeric[kCriteoNumeric];
  uint64_t categorical[kCriteoCategorical];
  double top = 0;
  for (int i = 0; i < 2000; ++i) {
    double bayes = 0;
    teacher.Sample(rng, numeric, categorical, &bayes);
    const auto posterior = teacher.SegmentPosterior(numeric, categorical);
    top += *std::max_element(posterior.begin(), posterior.end()) / 2000;
  }
  EXPECT_GT(top, 0.5);
}

// The long-tail teacher: a Bayes AUC like the others', most of a large field's values rare, and
// rare values that share an effect (a model can learn "rare value of this column").
TEST_F(CtrGeneratorTest, LongTailTeacherHasRareValuesWithASharedEffect) {
  const CtrTeacherConfig config = LongTailTeacherConfig(1);
  ASSERT_TRUE(ValidateCtrTeacherConfig(config).ok());
  absl::StatusOr<CtrGenerationReport> report = GenerateCtr(config, 7, 50000, PathOf("tail.gz"));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->positive_rate, AllOf(Ge(0.22), Le(0.28)));
  EXPECT_THAT(report->bayes_auc, AllOf(Ge(0.76), Le(0.82)));
  const SegmentTeacher teacher(config);
  int largest = 0;
  for (int f = 1; f < kCriteoCategorical; ++f) {
    if (teacher.vocabulary_size(f) > teacher.vocabulary_size(largest)) largest = f;
  }
  EXPECT_EQ(teacher.vocabulary_size(largest), 200000);
  std::mt19937_64 rng(3);
  float numeric[kCriteoNumeric];
  uint64_t categorical[kCriteoCategorical];
  std::map<uint64_t, int> seen;
  constexpr int kRows = 20000;
  for (int i = 0; i < kRows; ++i) {
    double bayes = 0;
    teacher.Sample(rng, numeric, categorical, &bayes);
    ++seen[categorical[largest]];
  }
  int singletons = 0;
  for (const auto& [value, count] : seen) singletons += count == 1 ? 1 : 0;
  EXPECT_GT(singletons, static_cast<int>(seen.size()) / 2);
  // Without the cold-start effect the same rows' rare values would carry only their own
  // (small) weights: the two teachers differ on examples with rare values.
  CtrTeacherConfig without = config;
  without.cold_start_scale = 0;
  const SegmentTeacher plain(without);
  std::mt19937_64 again(3);
  double differ = 0;
  for (int i = 0; i < 200; ++i) {
    double bayes = 0;
    teacher.Sample(again, numeric, categorical, &bayes);
    differ += std::abs(teacher.Probability(numeric, categorical) -
                       plain.Probability(numeric, categorical)) /
              200;
  }
  EXPECT_GT(differ, 0.01);
}

// The heavy-tail teacher: longtail's counts, zero-inflated as a real click log's (a third of the
// present values 0, columns from a few percent to most), tails past 10^6, and a Bayes AUC like
// the others'; a zero rate outside [0, 1) is refused.
TEST_F(CtrGeneratorTest, HeavyTailTeacherHasZeroInflatedHeavyTailedCounts) {
  const CtrTeacherConfig config = HeavyTailTeacherConfig(1);
  ASSERT_TRUE(ValidateCtrTeacherConfig(config).ok());
  absl::StatusOr<CtrGenerationReport> report = GenerateCtr(config, 7, 50000, PathOf("heavy.gz"));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->positive_rate, AllOf(Ge(0.22), Le(0.28)));
  EXPECT_THAT(report->bayes_auc, AllOf(Ge(0.76), Le(0.82)));
  auto zero_shares = [](const CtrTeacherConfig& teacher_config, float* largest) {
    const SegmentTeacher teacher(teacher_config);
    std::mt19937_64 rng(5);
    float numeric[kCriteoNumeric];
    uint64_t categorical[kCriteoCategorical];
    std::array<int, kCriteoNumeric> present{}, zeros{};
    *largest = 0;
    for (int i = 0; i < 20000; ++i) {
      double bayes = 0;
      teacher.Sample(rng, numeric, categorical, &bayes);
      for (int j = 0; j < kCriteoNumeric; ++j) {
        if (std::isnan(numeric[j])) continue;
        ++present[j];
        zeros[j] += numeric[j] == 0 ? 1 : 0;
        *largest = std::max(*largest, numeric[j]);
      }
    }
    std::vector<double> shares;
    for (int j = 0; j < kCriteoNumeric; ++j) shares.push_back(1.0 * zeros[j] / present[j]);
    return shares;
  };
  float largest = 0;
  const std::vector<double> heavy = zero_shares(config, &largest);
  EXPECT_GT(largest, 1e6);
  const double mean = std::accumulate(heavy.begin(), heavy.end(), 0.0) / heavy.size();
  EXPECT_THAT(mean, AllOf(Ge(0.3), Le(0.55)));
  EXPECT_GT(*std::max_element(heavy.begin(), heavy.end()), 0.5);
  const std::vector<double> longtail = zero_shares(LongTailTeacherConfig(1), &largest);
  EXPECT_LT(std::accumulate(longtail.begin(), longtail.end(), 0.0) / longtail.size(), 0.15);
  CtrTeacherConfig bad = config;
  bad.numeric_zero_rate = 1;
  EXPECT_EQ(ValidateCtrTeacherConfig(bad).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace syncopate::datagen
