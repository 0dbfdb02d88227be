# Helpers shared by every CMakeLists.txt: our own sources build with -Werror, generated code
# does not (protoc output is not ours to fix).
set(SYNCOPATE_WARNINGS -Wall -Wextra -Werror -Wno-unused-parameter)

if(SANITIZE)
  add_compile_options(-fsanitize=${SANITIZE} -fno-omit-frame-pointer)
  # GCC 12 reports false -Wmaybe-uninitialized inside libstdc++ (std::function, std::regex) when
  # sanitizers change its inlining; the warning stays an error in normal builds. GCC only: clang
  # (the fuzz build) has no such option and -Werror rejects unknown ones.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  add_link_options(-fsanitize=${SANITIZE})
  if(NOT SYNCOPATE_FUZZ)
    # -O1 (after the build type's -O3, so it wins): the usual level for sanitizer test runs, and
    # about twice as fast to compile. Fuzz builds keep -O3 for executions per second.
    add_compile_options(-O1)
  endif()
endif()

# ThreadSanitizer cannot see the synchronisation inside Debian's uninstrumented Abseil; this object
# interposes absl::Mutex/Notification and annotates them (tests/tsan/absl_tsan_annotations.cc).
if(SANITIZE MATCHES "thread")
  add_library(syncopate_tsan_absl OBJECT ${PROJECT_SOURCE_DIR}/tests/tsan/absl_tsan_annotations.cc)
  target_link_libraries(syncopate_tsan_absl PUBLIC ${CMAKE_DL_LIBS})
endif()

# libFuzzer builds (./dev fuzz, clang only): coverage instrumentation on every source; the fuzz
# targets themselves link with -fsanitize=fuzzer (tests/fuzz). Undefined behaviour aborts, so
# the fuzzer counts it as a crash.
option(SYNCOPATE_FUZZ "Build libFuzzer targets (clang)" OFF)
if(SYNCOPATE_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined)
endif()

# syncopate_library(NAME SRCS ... DEPS ...): one small named target per component.
function(syncopate_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${name} PRIVATE ${SYNCOPATE_WARNINGS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# syncopate_test(NAME SRCS ... DEPS ... [TIMEOUT s] [LABELS ...]): a GoogleTest binary run by ctest
# (LABELS default: unit).
function(syncopate_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_compile_options(${name} PRIVATE ${SYNCOPATE_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  if(TARGET syncopate_tsan_absl)
    target_link_libraries(${name} PRIVATE syncopate_tsan_absl)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 60)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)  # so `ctest -L unit` (the sanitizer pass) finds every unit test
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
endfunction()
include(cmake/subdirs.cmake)

# Hot kernels per x86-64 level (ADR 0008, libs/isa): on x86-64 every kernel source is compiled
# three times, for x86-64 (SSE2), x86-64-v3 (AVX2+FMA) and x86-64-v4 (AVX-512), and the process
# picks one at start; everything else stays portable x86-64. Each level's copy lives in its own
# namespace (SYNCOPATE_ISA_NS) and sees Eigen under its own name (-DEigen=...): Eigen's templates
# would otherwise be instantiated with the same mangled names at every level, and the linker
# would keep one of them (possibly the AVX-512 one) for all.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(SYNCOPATE_ISA_MULTI_LEVEL ON)
  set(SYNCOPATE_ISA_LEVELS baseline v3 v4)
else()
  set(SYNCOPATE_ISA_MULTI_LEVEL OFF)
  set(SYNCOPATE_ISA_LEVELS baseline)
endif()
set(SYNCOPATE_ISA_FLAGS_baseline "")
set(SYNCOPATE_ISA_FLAGS_v3 -march=x86-64-v3)
set(SYNCOPATE_ISA_FLAGS_v4 -march=x86-64-v4)
if(SYNCOPATE_ISA_MULTI_LEVEL)
  set(SYNCOPATE_ISA_FLAGS_baseline -march=x86-64)
endif()

# syncopate_isa_kernels(NAME KERNELS ... SRCS ... DEPS ...): a static library of the per-level
# objects of KERNELS (<NAME>_<level>, object libraries) plus SRCS, compiled once (the dispatch
# and everything portable). -fno-math-errno lets sqrt vectorize (nothing reads errno).
function(syncopate_isa_kernels name)
  cmake_parse_arguments(ARG "" "" "KERNELS;SRCS;DEPS" ${ARGN})
  set(objects "")
  foreach(level ${SYNCOPATE_ISA_LEVELS})
    add_library(${name}_${level} OBJECT ${ARG_KERNELS})
    target_include_directories(${name}_${level} PUBLIC ${PROJECT_SOURCE_DIR})
    target_compile_options(${name}_${level} PRIVATE ${SYNCOPATE_WARNINGS} -fno-math-errno
                           ${SYNCOPATE_ISA_FLAGS_${level}})
    target_compile_definitions(${name}_${level} PRIVATE SYNCOPATE_ISA_NS=isa_${level}
                               Eigen=syncopate_eigen_${level})
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC 12's own avx512fintrin.h trips -Wmaybe-uninitialized (its _mm512_undefined_* idiom,
      # `__m512 __Y = __Y;`) when Eigen's AVX-512 packets are inlined; at the sanitizer build's -O1
      # the same idiom is reported as -Wuninitialized (CI, Eigen's ptranspose). A false positive
      # in the compiler's header either way. Only the vector levels: the baseline object compiles
      # the same sources with every warning on, so a real one in our code still fails the build.
      target_compile_options(${name}_${level} PRIVATE -Wno-maybe-uninitialized)
      if(NOT level STREQUAL "baseline")
        target_compile_options(${name}_${level} PRIVATE -Wno-uninitialized)
      endif()
    endif()
    target_link_libraries(${name}_${level} PUBLIC ${ARG_DEPS})
    list(APPEND objects $<TARGET_OBJECTS:${name}_${level}>)
  endforeach()
  syncopate_library(${name} SRCS ${ARG_SRCS} ${objects} DEPS syncopate_isa ${ARG_DEPS})
endfunction()
