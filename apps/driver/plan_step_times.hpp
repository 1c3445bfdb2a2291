// The step times of the plan in use, for the transitions' report (issue 18 item 5): the median
// of the steps a plan ran before it changed, and of the first steps of the plan after it.
//
//   plan_step_times times;
//   for (double s : {0.021, 0.020, 0.035, 0.022}) times.add(s);
//   assert(std::abs(*times.median() - 0.0215) < 1e-12);   // a slow step (a checkpoint) weighs little
//   times.restart();                        // a new plan: its own steps from now
//   assert(!times.median() && times.count() == 0);
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

namespace cohort::apps {

class plan_step_times {
 public:
  /// How many of a new plan's steps its "after" figure takes.
  static constexpr std::size_t after_steps = 10;

  void add(double seconds) { seconds_.push_back(seconds); }
  std::size_t count() const { return seconds_.size(); }
  /// The median of the steps so far (none: no step yet).
  std::optional<double> median() const {
    if (seconds_.empty()) return std::nullopt;
    std::vector<double> v = seconds_;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  void restart() { seconds_.clear(); }

 private:
  std::vector<double> seconds_;
};

}  // namespace cohort::apps
