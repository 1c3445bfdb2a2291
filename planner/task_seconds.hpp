// The one timing record from a worker to the refit: seconds in each kind of task the runtime
// runs — forward and backward (waits for inputs left out) and the amplifier's update (the
// gradient reduction). A worker reports one per step; the driver sums them per rank; the
// refit sets the per-stage means against the planner's stage_prediction.
//
//   task_seconds t{.forward_s = 0.010, .backward_s = 0.021, .update_s = 0.002};
//   task_seconds sum;  sum += t;  sum += t;      // sum.total() == 0.066
//   assert(std::abs(sum.total() - 0.066) < 1e-12);
#pragma once

namespace cohort::planner {

struct task_seconds {
  double forward_s = 0, backward_s = 0, update_s = 0;

  task_seconds& operator+=(const task_seconds& o) {
    forward_s += o.forward_s, backward_s += o.backward_s, update_s += o.update_s;
    return *this;
  }
  double total() const { return forward_s + backward_s + update_s; }
};

}  // namespace cohort::planner
