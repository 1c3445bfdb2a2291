// The coordinator's answer to processes waiting to join the running job (issue 18 item 1): at
// the step boundary after the step whose job-wide sum said they wait, process 0's planner actor
// decides whether the job grows (the plan for the larger job, both predictions, the time it
// saves over the steps left against what the transition costs: planner_actor.hpp's
// decide_scale), process 0 admits them (one membership change, a new epoch even when nobody
// is let in, so every process waits for exactly one), and tells every process — the newcomers
// too — where the job is and the plan it changes to. Then the same plan transition as any other
// (coordinator_transition.cpp): the state moves over a data plane that includes the newcomers.
// A newcomer's coordinator starts at that transition (join_running).
#include <algorithm>
#include <cstdio>

#include "actors/coordinator_parts.hpp"
#include "planner/rank_layout.hpp"

namespace cohort::actors::coordination {
namespace {

void fail(self_ptr self, const error& e) { execute(self, self->state.protocol->on_error(e)); }

std::string process_list(const std::vector<int>& ps) {
  std::string out;
  for (int p : ps) out += (out.empty() ? "process " : ", process ") + std::to_string(p);
  return out;
}

// Every process, once the membership after the boundary is known and process 0's text read:
// "{\"keep\": WHY}" (nobody came in) or the joining state with the next plan.
void after_admission(self_ptr self, std::int64_t step, const job_membership& m, const std::string& text,
                     std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  // a process lost at the boundary (process 0 then admitted nobody) or with the admission: the
  // join is dropped and the job recovers as after a failed step; the processes waiting to join
  // are counted again at a later boundary
  for (std::size_t p = 0; p < s.live.size() && p < m.live.size(); ++p)
    if (s.live[p] && !m.live[p])
      return transition_lost(
          self, make_error(errc::closed, "process " + std::to_string(p) + " was lost while processes joined the job"));
  std::vector<int> newcomers(m.joined.begin() + static_cast<std::ptrdiff_t>(std::min(s.joined_seen, m.joined.size())),
                             m.joined.end());
  s.membership_epoch = m.epoch;
  s.live = m.live;
  s.joined_seen = m.joined.size();
  if (newcomers.empty()) return execute(self, s.protocol->on_plan_kept(clock_type::now()));
  auto st = joining_from_text(text, static_cast<int>(m.live.size()));
  if (!st) return fail(self, st.error());
  if (!st->next)
    return fail(self, make_error(errc::io_error, "join: process 0 admitted processes but named no plan for them"));
  decided_plan d;
  d.choice = std::move(*st->next);
  d.choice.how = "the coordinator's for the larger job";
  d.replan_seconds = st->next_replan_s;
  d.predicted_step_s = st->next_predicted_step_s;
  s.joining_note = process_list(newcomers);
  prepare(self, std::move(d), step, started, "join");
}

// Process 0's text for every process in the new membership.
std::string admission_text(self_ptr self, const decided_plan& d, std::int64_t step, const std::vector<bool>& before,
                           bool anyone) {
  if (!anyone) return nlohmann::json{{"keep", "nobody joined"}}.dump();
  auto& s = self->state;
  joining_state st;
  st.plan.plan = s.model->plan;
  st.plan.cuts = s.model->cuts;
  st.owner_before = s.owner;
  st.live_before = before;
  st.replaced_before = s.replaced_seen;
  st.committed = step - 1;
  st.next = d.choice;
  st.next_replan_s = d.replan_seconds;
  st.next_predicted_step_s = d.predicted_step_s;
  st.cursor = s.cursor.stretches();
  st.scale_base_dp = s.options.scale_base_dp;
  return to_text(st);
}

// Process 0: the planner's answer is in; admit (or not), then tell everyone.
void admit(self_ptr self, const transition_action& a, scale_answer answer,
           std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  s.summary.scale_decisions.push_back(answer.record);
  if (s.options.on_scale_decision) s.options.on_scale_decision(answer.record);
  const int count = answer.record.adopted ? a.joiners : 0;
  if (!answer.record.adopted) s.refused_joiners = a.joiners;  // asked again only when more come
  auto members = std::make_shared<result<job_membership>>(make_error(errc::closed, "not admitted"));
  auto shared = std::make_shared<result<std::string>>(make_error(errc::closed, "not shared"));
  auto admit_joiners = s.options.job->admit_joiners;
  auto share = s.options.job->share_plan;
  const auto before = s.live;
  const std::size_t seen = s.joined_seen;
  auto plan = std::make_shared<decided_plan>(std::move(answer.plan));
  const std::int64_t step = a.step;
  // the processes admitted may be fewer than decided for (one gone while it waited): then the
  // planner's choice for those that came (its figures for them)
  auto decide_again = [=](int came, std::function<void()> then) {
    auto& st = self->state;
    scale_request r;
    r.joiners = came;
    r.live = before;
    r.owner = st.owner;
    r.threads_per_process = st.options.threads;
    r.step = step;
    r.remaining_steps = st.options.steps - step;
    r.policy = scale_policy::always;
    self->request(st.planner, st.options.timeout, scale_atom::value, r, st.model)
        .then(
            [=](scale_answer& again) {
              *plan = std::move(again.plan);
              then();
            },
            [=](caf::error& e) { fail(self, from_caf(e)); });
  };
  on_proxy(
      self, [=] { *members = admit_joiners(count, before); },
      [=] {
        if (!*members) return fail(self, (*members).error());
        const int came = static_cast<int>((*members)->joined.size() - std::min(seen, (*members)->joined.size()));
        auto tell = [=] {
          const std::string text = admission_text(self, *plan, step, before, came > 0);
          const std::uint64_t epoch = (*members)->epoch;
          on_proxy(
              self, [=] { *shared = share(text, epoch); },
              [=] {
                if (!*shared) return transition_lost(self, (*shared).error());
                after_admission(self, step, **members, text, started);
              });
        };
        if (came > 0 && came != count) return decide_again(came, tell);
        tell();
      });
}

}  // namespace

void grow(self_ptr self, const transition_action& a, std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  const auto& job = *s.options.job;
  if (!job.await_membership || !job.share_plan)
    return fail(self, make_error(errc::invalid_argument, "joining the running job needs --fault.recover"));
  if (!job.leads()) {  // the membership the coordinator makes, then its text
    auto members = std::make_shared<result<job_membership>>(make_error(errc::closed, "not known"));
    auto shared = std::make_shared<result<std::string>>(make_error(errc::closed, "not shared"));
    auto await = job.await_membership;
    auto share = job.share_plan;
    const std::uint64_t epoch = s.membership_epoch;
    const std::int64_t step = a.step;
    on_proxy(
        self,
        [=] {
          *members = await(epoch);
          if (*members) *shared = share("", (*members)->epoch);
        },
        [=] {
          if (!*members) return fail(self, (*members).error());
          if (!*shared) return transition_lost(self, (*shared).error());
          after_admission(self, step, **members, **shared, started);
        });
    return;
  }
  if (!job.admit_joiners)
    return fail(self, make_error(errc::invalid_argument, "this job cannot grow (--elastic.max-procs)"));
  scale_request r;
  r.joiners = a.joiners;
  r.live = s.live;
  r.owner = s.owner;
  r.threads_per_process = s.options.threads;
  r.step = a.step;
  r.remaining_steps = s.options.steps - a.step;
  r.policy = s.options.scale_out;
  self->request(s.planner, s.options.timeout, scale_atom::value, r, s.model)
      .then([=](scale_answer& answer) { admit(self, a, std::move(answer), started); },
            [=](caf::error& e) { fail(self, from_caf(e)); });
}

void join_as_newcomer(self_ptr self) {
  auto& s = self->state;
  const auto& j = *s.options.joining;
  s.owner = j.state.owner_before;
  s.params.assign(s.owner.size(), param_actor_hdl{});  // the running plan's ranks: none of them here
  s.workers.assign(s.owner.size(), worker_hdl{});
  s.live = j.members.live;
  s.membership_epoch = j.members.epoch;
  s.replaced_seen = j.members.replaced.size();
  s.joined_seen = j.members.joined.size();
  const std::int64_t step = j.state.committed + 1;
  s.protocol->on_joined(j.state.committed);
  decided_plan d;
  d.choice = *j.state.next;
  d.choice.how = "the coordinator's for the larger job";
  d.replan_seconds = j.state.next_replan_s;
  d.predicted_step_s = j.state.next_predicted_step_s;
  std::vector<int> newcomers;
  for (std::size_t p = 0; p < j.members.live.size(); ++p)
    if (j.members.live[p] && !j.state.live_before[p]) newcomers.push_back(static_cast<int>(p));
  s.joining_note = process_list(newcomers);
  prepare(self, std::move(d), step, std::chrono::steady_clock::now(), "join");
}

}  // namespace cohort::actors::coordination
