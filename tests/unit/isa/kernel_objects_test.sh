#!/usr/bin/env bash
# The per-level kernel objects cannot leak one level's code into another (ADR 0008): every symbol
# an object defines for the linker is in its own level's namespace (ours or the renamed Eigen's),
# so the linker never merges an AVX-512 template instantiation into baseline code; and the
# static initialisers of the v3/v4 objects, which run at start on any CPU, use no VEX/EVEX
# instruction. Usage: kernel_objects_test.sh LEVEL OBJECT [LEVEL OBJECT ...]
set -euo pipefail
failed=0
while [[ $# -ge 2 ]]; do
  level="$1" object="$2"
  shift 2
  # Defined, global or weak symbols, demangled. DW.ref.__gxx_personality_v0 is the exception
  # tables' pointer to the C++ runtime's personality routine: data, the same in every object.
  # AddressSanitizer adds an ODR indicator __odr_asan.<mangled name> per global; it belongs to the
  # global it names, so it is judged by that name.
  leaks="$(nm --defined-only --extern-only "$object" | sed 's/ __odr_asan\./ /' | c++filt |
    grep -v -E "isa_${level}::|syncopate_eigen_${level}::| DW\.ref\.__gxx_personality_v0$" ||
    true)"
  object_failed=0
  if [[ -n "$leaks" ]]; then
    echo "FAIL: $object ($level) defines symbols outside its level's namespaces:"
    echo "$leaks" | head -20
    object_failed=1
  fi
  if [[ "$level" != baseline ]]; then
    startup="$(objdump -d --no-show-raw-insn -j .text.startup "$object" 2>/dev/null |
      grep -E '^\s+[0-9a-f]+:' | grep -E '\sv[a-z]|%[yz]mm|%k[0-7]' || true)"
    if [[ -n "$startup" ]]; then
      echo "FAIL: $object ($level) runs vector instructions at start-up:"
      echo "$startup" | head -10
      object_failed=1
    fi
  fi
  if [[ $object_failed -ne 0 ]]; then
    failed=1
    continue
  fi
  echo "ok: $level $(basename "$object") ($(nm --defined-only --extern-only "$object" | wc -l) symbols)"
done
exit "$failed"
