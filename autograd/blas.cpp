#include "xgrad/autograd/detail/blas.hpp"

#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

// DYNAMIC_ARCH builds of OpenBLAS export the routine that picks the kernel table at load
// time and its counterpart; weak, so that xgrad still links against other builds.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
int blas_thread_shutdown_(void) __attribute__((weak));  // threaded builds: stop the worker threads
}

namespace xgrad {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd");
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// What the start-up check did, for blas_summary(), and who chose the kernels.
std::string& selection_note() {
  static std::string note;
  return note;
}
std::string& chooser() {
  static std::string who = "OpenBLAS";
  return who;
}

}  // namespace

std::string blas_core() { return openblas_get_corename(); }

int blas_threads_per_call() { return openblas_get_num_threads(); }

std::string cpu_vector_class() {
  if (cpu_has_avx512()) return "avx512";
  if (cpu_has_avx2()) return "avx2";
  return "baseline";
}

bool blas_core_fits_cpu(const std::string& core) {
  const std::string c = lower(core), cls = cpu_vector_class();
  const bool avx512_kernels = c == "skylakex" || c == "cooperlake" || c == "sapphirerapids";
  if (cls == "avx512") return avx512_kernels;
  if (cls == "avx2") return avx512_kernels || c == "haswell" || c == "zen";
  return true;
}

std::string blas_summary() {
  const char* flavour[] = {"serial", "pthreads", "OpenMP"};
  const int parallel = openblas_get_parallel();
  std::string config = openblas_get_config();  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..."
  const std::size_t version_end = config.find(' ', config.find(' ') + 1);
  std::string s = config.substr(0, version_end) + " " + (parallel >= 0 && parallel <= 2 ? flavour[parallel] : "?") +
                  ", " + blas_core() + " kernels";
  if (!selection_note().empty()) s += " (" + selection_note() + ")";
  return s;
}

bool detail::force_blas_core(const std::string& core) {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit) return false;
  const char* name = "OPENBLAS_CORETYPE";
  const char* user_value = std::getenv(name);
  const std::optional<std::string> saved = user_value ? std::optional<std::string>(user_value) : std::nullopt;
  setenv(name, core.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  if (saved)
    setenv(name, saved->c_str(), 1);
  else
    unsetenv(name);
  return lower(blas_core()) == lower(core);
}

std::string blas_core_chosen_by() { return chooser(); }

std::string detail::select_blas_kernels() {
  std::string& note = selection_note();
  const std::string picked = blas_core();
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (user && !*user) user = nullptr;  // set but empty: OpenBLAS ignores it too
  if (user && lower(user) == lower(picked)) {
    chooser() = "user";
    return note = "OPENBLAS_CORETYPE set by the user";
  }
  // A name OpenBLAS does not know leaves it to its own detection: said, then checked as usual.
  const std::string not_taken =
      user ? "OPENBLAS_CORETYPE=" + std::string(user) + " set by the user is not a kernel family OpenBLAS knows; " : "";
  chooser() = "OpenBLAS";
  if (blas_core_fits_cpu(picked)) {
    note = user ? not_taken + "it picked " + picked : "";
  } else if (force_blas_core(cpu_vector_class() == "avx512" ? "SkylakeX" : "Haswell")) {
    chooser() = "xgrad";
    note = not_taken + "chosen by xgrad: OpenBLAS picked " + picked;
  } else {
    note = not_taken + "OpenBLAS picked " + picked + "; xgrad could not switch it";
  }
  return note;
}

void detail::run_blas_single_threaded() {
  openblas_set_num_threads(1);
  // The threads OpenBLAS started when it was loaded would spin (sched_yield) for about
  // 0.1 s before they sleep; it starts them again by itself if ever asked for more threads.
  if (blas_thread_shutdown_) blas_thread_shutdown_();
}

}  // namespace xgrad
