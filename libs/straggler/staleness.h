// PLACEHOLDER until the straggler branch lands (replaced by it).
#ifndef SYNCOPATE_LIBS_STRAGGLER_STALENESS_H_
#define SYNCOPATE_LIBS_STRAGGLER_STALENESS_H_
#include <cstdint>
namespace syncopate::straggler {
int64_t StalenessThreshold(int num_workers, int64_t local_batch, int64_t global_batch);
double StalenessWeight(int64_t staleness, int64_t threshold);
}  // namespace syncopate::straggler
#endif
