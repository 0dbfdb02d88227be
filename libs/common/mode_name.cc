#include "libs/common/mode_name.h"

namespace syncopate {

std::string ModeName(v1::Mode mode) {
  switch (mode) {
    case v1::MODE_SYNC:
      return "sync";
    case v1::MODE_GBA:
      return "gba";
    case v1::MODE_ASYNC:
      return "async";
    case v1::MODE_AUTO:
      return "auto";
    default:
      return "unspecified";
  }
}

}  // namespace syncopate
