// The coordinator's migrations (issue 18 item 4): one rank — its worker and its parameter
// actor's piece — moves to another process at a step boundary while the plan stays. Process 0
// decides the move: the operator's request (--elastic.migrate-at=STEP:RANK:PROC), or, for a
// straggler its step sums revealed (straggler_watch.hpp), the move of one of the straggler's
// ranks predicted to shorten the step most (best_move, from every process's measured seconds
// per rank, the medians over the window that named it). It shares the decision; every process changes to the same plan under the new
// placement — the same transition as any other (coordinator_transition.cpp), in which only the
// moved rank's piece travels (every other parameter actor stays where it is: kept_pieces).
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "actors/coordinator_parts.hpp"

namespace cohort::actors::coordination {
namespace {

void fail(self_ptr self, const error& e) { execute(self, self->state.protocol->on_error(e)); }

// Process 0: the move, or why none: {"rank", "to", "why"} or {"keep": WHY}.
nlohmann::json decide_move(const coordinator_state& s, const transition_action& a) {
  const int ranks = s.model->plan.ranks();
  auto holds = [&](int p) { return static_cast<int>(std::count(s.owner.begin(), s.owner.end(), p)); };
  if (a.migration >= 0) {
    const auto& m = s.options.migrations[static_cast<std::size_t>(a.migration)];
    const std::string asked = "--elastic.migrate-at=" + std::to_string(m.at_step) + ":" + std::to_string(m.rank) + ":" +
                              std::to_string(m.process);
    if (m.rank < 0 || m.rank >= ranks)
      return {{"keep", asked + ": the plan has ranks 0.." + std::to_string(ranks - 1)}};
    const int from = s.owner[static_cast<std::size_t>(m.rank)];
    if (m.process < 0 || static_cast<std::size_t>(m.process) >= s.live.size() ||
        !s.live[static_cast<std::size_t>(m.process)])
      return {{"keep", asked + ": process " + std::to_string(m.process) + " is not in the job"}};
    if (m.process == from)
      return {
          {"keep", asked + ": rank " + std::to_string(m.rank) + " is on process " + std::to_string(from) + " already"}};
    if (holds(from) < 2)
      return {{"keep", asked + ": process " + std::to_string(from) + " would hold no rank (a process leaves instead)"}};
    return {{"rank", m.rank}, {"to", m.process}, {"why", "the operator asked (" + asked + ")"}};
  }
  if (s.undoing && s.checking) {  // the move being checked made the step slower: back where it was
    const auto& m = s.last_move;
    auto sorted = s.checking->after_s;
    std::sort(sorted.begin(), sorted.end());
    char why[256];
    std::snprintf(why, sizeof why,
                  "moving %s made the step slower (median %.4g s before, %.4g s after, predicted %.4g -> %.4g s): "
                  "it moves back, and no straggler is moved again",
                  m.describe().c_str(), s.checking->before_s, sorted[sorted.size() / 2], m.predicted_before_s,
                  m.predicted_after_s);
    return {{"rank", m.rank}, {"to", m.from}, {"why", why}, {"undo", true}};
  }
  const auto& pace = s.straggler_pace;  // the medians over the window that named the straggler
  const auto move = best_move(pace, s.owner, a.straggler, s.options.threads);
  char ratio[160] = "";
  if (static_cast<std::size_t>(a.straggler) < pace.size())
    std::snprintf(ratio, sizeof ratio, "process %d runs %.4g s per rank", a.straggler,
                  pace[static_cast<std::size_t>(a.straggler)]);
  if (!move)
    return {{"keep", std::string(ratio) + ", slower than its peers; no move of one of its ranks shortens the step" +
                         (holds(a.straggler) < 2 ? " (it holds one rank)" : "")}};
  char why[320];
  std::snprintf(why, sizeof why,
                "%s, slower than its peers over %d steps: the busiest process predicted %.4g s -> %.4g s per step",
                ratio, s.options.stragglers.steps, move->predicted_before_s, move->predicted_after_s);
  return {{"rank", move->rank},
          {"to", move->to},
          {"why", why},
          {"predicted_before_s", move->predicted_before_s},
          {"predicted_after_s", move->predicted_after_s}};
}

}  // namespace

void migrate(self_ptr self, const transition_action& a, std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  const std::string cause = a.migration >= 0 ? "request" : "straggler";
  const std::string text = s.options.job->leads() ? decide_move(s, a).dump() : std::string();
  auto shared = std::make_shared<result<std::string>>(make_error(errc::closed, "not shared"));
  auto share = s.options.job->share_plan;
  const std::uint64_t epoch = s.membership_epoch;
  const std::int64_t step = a.step;
  on_proxy(
      self, [=] { *shared = share(text, epoch); },
      [=] {
        auto& st = self->state;
        if (!*shared) return transition_lost(self, (*shared).error());
        const auto j = nlohmann::json::parse(**shared, nullptr, false);
        const auto malformed = make_error(errc::io_error, "the first process's migration is malformed");
        if (j.is_discarded() || !j.is_object()) return fail(self, malformed);
        if (j.contains("keep")) {
          if (!j["keep"].is_string()) return fail(self, malformed);
          if (st.options.job->leads())
            std::fprintf(stderr, "\njob: no migration after step %lld: %s\n", static_cast<long long>(step),
                         j["keep"].get<std::string>().c_str());
          return execute(self, st.protocol->on_plan_kept(clock_type::now()));
        }
        const int ranks = st.model->plan.ranks();
        if (!j.contains("rank") || !j["rank"].is_number_integer() || !j.contains("to") ||
            !j["to"].is_number_integer() || !j.contains("why") || !j["why"].is_string())
          return fail(self, malformed);
        const int rank = j["rank"].get<int>(), to = j["to"].get<int>();
        if (rank < 0 || rank >= ranks || to < 0 || static_cast<std::size_t>(to) >= st.live.size() ||
            !st.live[static_cast<std::size_t>(to)])
          return fail(self, malformed);
        std::vector<int> placement = st.owner;
        const int from = placement[static_cast<std::size_t>(rank)];
        placement[static_cast<std::size_t>(rank)] = to;
        rank_move m;
        m.rank = rank, m.from = from, m.to = to;
        decided_plan same;
        same.choice.plan = st.model->plan;
        same.choice.cuts = st.model->cuts;
        same.choice.how = "the running job's";
        st.moving_note = m.describe();
        st.moving_why = j["why"].get<std::string>();
        // every process keeps the move's check (a successor goes on with it); the coordinator acts on it
        if (cause == "straggler") {
          if (j.value("undo", false)) {  // undone: no straggler is moved again in this run
            st.checking.reset();
            st.stragglers.reset();
            st.undo_due = st.undoing = false;
          } else {  // checked against the steps before it once it has run a while
            m.predicted_before_s = j.value("predicted_before_s", 0.0);
            m.predicted_after_s = j.value("predicted_after_s", 0.0);
            st.last_move = m;
            move_check c;
            auto before = std::vector<double>(st.recent_step_s.begin(), st.recent_step_s.end());
            std::sort(before.begin(), before.end());
            c.before_s = before.empty() ? 0 : before[before.size() / 2];
            st.checking = c;
          }
        }
        prepare(self, std::move(same), step, started, cause, std::move(placement));
      });
}

}  // namespace cohort::actors::coordination
