#include "libs/straggler/staleness.h"
namespace syncopate::straggler {
int64_t StalenessThreshold(int n, int64_t b, int64_t g) {
  if (n <= 0 || b <= 0 || g <= 0) return 1;
  return (n * b + g - 1) / g + 1;
}
double StalenessWeight(int64_t s, int64_t t) { return s <= t ? 1.0 : 1.0 / double(s - t + 1); }
}  // namespace syncopate::straggler
