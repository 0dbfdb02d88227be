// Choosing a kernel table by ISA level. A component's kernels are compiled once per level by
// syncopate_isa_kernels() (cmake/syncopate.cmake) into namespace <component>::isa_<level>, each
// defining the same table of plain function pointers; the component's dispatch file declares the
// tables and picks one with SYNCOPATE_ISA_PICK. Only these tables cross between levels: no Eigen
// or standard-library type appears in them, so no template compiled for AVX-512 can be merged by
// the linker into code that runs on an older CPU (tests/unit/isa/kernel_objects_test.sh checks
// the objects).
// Thread-safety: tables are immutable.
#ifndef SYNCOPATE_LIBS_ISA_DISPATCH_H_
#define SYNCOPATE_LIBS_ISA_DISPATCH_H_

#include <type_traits>

#include "libs/isa/isa.h"

namespace syncopate::isa {

template <typename Table>
const Table& PickTable(IsaLevel level, const Table& baseline, const Table* v3, const Table* v4) {
  if (level >= IsaLevel::kV4 && v4 != nullptr) return *v4;
  if (level >= IsaLevel::kV3 && v3 != nullptr) return *v3;
  return baseline;
}

}  // namespace syncopate::isa

// Declares `extern const Type name;` in ns::isa_baseline (and isa_v3, isa_v4 when the build has
// them): the tables a kernel source defines once per level.
#ifdef SYNCOPATE_ISA_MULTI_LEVEL
#define SYNCOPATE_ISA_DECLARE_TABLES(ns, Type, name) \
  namespace ns::isa_baseline {                       \
  extern const Type name;                            \
  }                                                  \
  namespace ns::isa_v3 {                             \
  extern const Type name;                            \
  }                                                  \
  namespace ns::isa_v4 {                             \
  extern const Type name;                            \
  }
#define SYNCOPATE_ISA_PICK(level, ns, name) \
  ::syncopate::isa::PickTable(level, ns::isa_baseline::name, &ns::isa_v3::name, &ns::isa_v4::name)
#else
#define SYNCOPATE_ISA_DECLARE_TABLES(ns, Type, name) \
  namespace ns::isa_baseline {                       \
  extern const Type name;                            \
  }
#define SYNCOPATE_ISA_PICK(level, ns, name)                                           \
  ::syncopate::isa::PickTable<std::remove_cvref_t<decltype(ns::isa_baseline::name)>>( \
      level, ns::isa_baseline::name, nullptr, nullptr)
#endif

#endif  // SYNCOPATE_LIBS_ISA_DISPATCH_H_
