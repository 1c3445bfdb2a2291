// Plan validation and names.
#include "planner/plan.hpp"

namespace cohort::planner {

status validate(const parallel_plan& p, std::int64_t batch) {
  if (p.dp < 1 || p.tp < 1 || p.pp < 1 || p.micro_batches < 1)
    return make_error(errc::invalid_argument, "plan: dp, tp, pp and micro-batches must be >= 1");
  std::int64_t parts = static_cast<std::int64_t>(p.dp) * p.micro_batches;
  if (batch < parts)  // any other batch splits, in near-equal shares (batch_split)
    return make_error(errc::invalid_argument, "plan: batch " + std::to_string(batch) + " is smaller than dp " +
                                                  std::to_string(p.dp) + " x micro-batches " +
                                                  std::to_string(p.micro_batches) + " (every share needs a row)");
  if (p.virtual_stages < 1)
    return make_error(errc::invalid_argument,
                      "plan: virtual stages must be >= 1, got " + std::to_string(p.virtual_stages));
  if (p.virtual_stages > 1 && p.pp < 2)
    return make_error(errc::invalid_argument,
                      "plan: virtual stages (interleaved 1F1B) need pp >= 2, got pp " + std::to_string(p.pp));
  if (p.virtual_stages > 1 && p.micro_batches % p.pp != 0)
    return make_error(errc::invalid_argument, "plan: virtual stages need micro-batches in whole groups of pp (" +
                                                  std::to_string(p.pp) + "), got " + std::to_string(p.micro_batches) +
                                                  " micro-batches");
  if (p.shard_params && p.dp == 1)
    return make_error(errc::invalid_argument, "plan: shard-params needs dp > 1 (it splits optimizer state over dp)");
  return {};
}

const char* to_string(schedule_kind s) { return s == schedule_kind::gpipe ? "gpipe" : "1f1b"; }

result<schedule_kind> parse_schedule(const std::string& text) {
  if (text == "gpipe") return schedule_kind::gpipe;
  if (text == "1f1b") return schedule_kind::one_f_one_b;
  return make_error(errc::invalid_argument, "--plan.schedule must be gpipe or 1f1b, got '" + text + "'");
}

}  // namespace cohort::planner
