// How long work tells whoever shows it how far it is: `done` of `total` units (bytes,
// measurements), called as it goes, from the working thread. Empty: nobody listens.
//
//   progress_fn show = [](std::int64_t done, std::int64_t total) { std::printf("%lld/%lld\n",
//                                                     static_cast<long long>(done), static_cast<long long>(total)); };
//   for (std::int64_t i = 1; i <= 3; ++i) report_progress(show, i, 3);   // 1/3, 2/3, 3/3
#pragma once

#include <cstdint>
#include <functional>

namespace cohort {

using progress_fn = std::function<void(std::int64_t done, std::int64_t total)>;

inline void report_progress(const progress_fn& f, std::int64_t done, std::int64_t total) {
  if (f) f(done, total);
}

}  // namespace cohort
