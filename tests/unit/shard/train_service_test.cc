// TrainService's shared bfloat16 packing: every puller of one published copy gets the same
// bytes, packed once.
#include "libs/shard/train_service.h"

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "libs/tensor/bfloat16.h"

namespace syncopate::shard {
namespace {

TEST(TrainService, PacksEachPublishedCopyToBfloat16OnceForEveryPuller) {
  TrainService service(nullptr, "");
  auto version = std::make_shared<const std::vector<float>>(std::vector<float>{1.5f, -2.25f, 3.0f});
  std::shared_ptr<const std::string> first = service.Bfloat16Of(version);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(*first, tensor::PackBfloat16(*version));
  EXPECT_EQ(service.Bfloat16Of(version), first) << "the same copy is not packed again";
  // The next version's copy (equal values or not) is packed anew.
  auto next = std::make_shared<const std::vector<float>>(*version);
  std::shared_ptr<const std::string> second = service.Bfloat16Of(next);
  EXPECT_NE(second, first);
  EXPECT_EQ(*second, *first);
  // A copy freed and another made (possibly at the same address) never matches the old packing.
  const std::weak_ptr<const std::vector<float>> watch = next;
  next.reset();
  second.reset();
  ASSERT_TRUE(watch.expired());
  auto later = std::make_shared<const std::vector<float>>(std::vector<float>{8.0f, 8.0f, 8.0f});
  EXPECT_EQ(*service.Bfloat16Of(later), tensor::PackBfloat16(*later));
}

}  // namespace
}  // namespace syncopate::shard
