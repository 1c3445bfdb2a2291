// The coordinator's state machine.
#include "actors/step_protocol.hpp"

#include <algorithm>
#include <utility>

namespace cohort::actors {
namespace {

double between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One action (built by emplace: a braced vector of variants trips GCC 12's maybe-uninitialized).
template <class A>
actions just(A a) {
  actions out;
  out.emplace_back(std::in_place_type<A>, std::move(a));
  return out;
}

}  // namespace

step_protocol::step_protocol(config c) : cfg_(std::move(c)), local_(cfg_.local), ranks_(cfg_.ranks) {
  dead_.assign(static_cast<std::size_t>(ranks_), false);
  step_ = cfg_.first_step;
  committed_ = cfg_.first_step - 1;
  snapshot_at_ = cfg_.first_step;  // a resumed run does not save the state it started from again
  while (next_change_ < cfg_.change_at.size() && cfg_.change_at[next_change_] <= cfg_.first_step) ++next_change_;
}

actions step_protocol::start(clock_type::time_point now) {
  if (phase_ != phase::idle) return {};
  if (cfg_.joining) {  // the job's steps are the others' to say (on_rejoined)
    phase_ = phase::rejoining;
    return {};
  }
  if (cfg_.steps < 1) return finish(make_error(errc::invalid_argument, "train: steps must be >= 1"));
  if (cfg_.first_step < 0 || cfg_.first_step >= cfg_.steps)
    return finish(make_error(errc::invalid_argument, "train: the run starts after step " +
                                                         std::to_string(cfg_.first_step) + " of " +
                                                         std::to_string(cfg_.steps) + ": nothing left to train"));
  return begin_step(now);
}

actions step_protocol::begin_step(clock_type::time_point now) {
  phase_ = phase::stepping;
  failed_ = false;
  first_failure_.clear();
  first_code_ = errc::closed;
  outcomes_.assign(static_cast<std::size_t>(ranks_), std::nullopt);
  outstanding_ = 0;
  for (int r = 0; r < ranks_; ++r) outstanding_ += is_local(r) ? 1 : 0;
  step_start_ = now;
  return just(start_step_action{generation_, step_, committed_});
}

actions step_protocol::on_outcome(std::int64_t generation, std::int64_t step, int rank, step_outcome o,
                                  const std::string& fabric_reason, clock_type::time_point now) {
  if (phase_ != phase::stepping || generation != generation_ || step != step_) return {};
  if (rank < 0 || rank >= ranks_ || !is_local(rank)) return {};
  auto& slot = outcomes_[static_cast<std::size_t>(rank)];
  if (slot) return {};  // a dead worker's late error reply after its monitor fired
  actions out;
  if (!o.failure.empty()) {
    if (!failed_) {
      failed_ = true;
      detected_at_ = now;
      out.emplace_back(std::in_place_type<close_fabric_action>,
                       close_fabric_action{"rank " + std::to_string(rank) + " failed"});  // release the waiting workers
    }
    if (first_failure_.empty()) {
      first_code_ = o.code;
      first_failure_ = "rank " + std::to_string(rank) + ": " + o.failure;
      if (!fabric_reason.empty() && o.failure.find(fabric_reason) == std::string::npos)
        first_failure_ += " (" + fabric_reason + ")";
    }
  }
  slot = std::move(o);
  if (--outstanding_ > 0) return out;
  if (failed_) {
    auto next = decide_recovery();
    out.insert(out.end(), next.begin(), next.end());
    return out;
  }
  auto next = commit(now);
  out.insert(out.end(), next.begin(), next.end());
  return out;
}

actions step_protocol::commit(clock_type::time_point now) {
  actions out;
  step_metrics m;
  m.step = step_;
  m.generation = generation_;
  m.layout = layout_;
  m.seconds = between(step_start_, now);
  for (const auto& oc : outcomes_) {
    m.task_seconds.push_back(oc ? oc->report.seconds : planner::task_seconds{});
    if (oc && oc->report.reports_loss) m.loss += oc->report.loss_share;
    if (oc) m.sparse_bytes += oc->report.sparse_bytes;
    m.table_versions.push_back(oc ? oc->report.table_version : -1);
  }
  // a process's pace (the straggler watch's): its busiest rank's own work, the forward and
  // backward tasks as that rank alone takes them (step_report::alone_s); the amplifier's
  // reduction is left out, since it waits for the slowest peer
  double busiest = 0;
  for (int r = 0; r < ranks_; ++r)
    if (is_local(r) && outcomes_[static_cast<std::size_t>(r)])
      busiest = std::max(busiest, outcomes_[static_cast<std::size_t>(r)]->report.alone_s);
  if (cfg_.multi_process && cfg_.rejoin) {
    // the step commits once the job's loss is known: a process lost before that makes it the
    // interrupted step, redone by the processes that remain
    phase_ = phase::summing;
    out.emplace_back(std::in_place_type<combine_loss_action>, combine_loss_action{m.step, m.loss, busiest});
    summing_ = std::move(m);
    return out;
  }
  // committed: every local worker finished the step
  committed_ = step_;
  ++step_;
  step_failures_ = 0;
  if (!cfg_.multi_process) {
    losses_.push_back(m.loss);
    out.emplace_back(std::in_place_type<report_step_action>, report_step_action{std::move(m)});
  } else {
    // the job's loss is combined off the critical path: the next step starts now, the report
    // follows when the sum arrives (in step order; at most the steps in flight wait)
    out.emplace_back(std::in_place_type<combine_loss_action>, combine_loss_action{m.step, m.loss, busiest});
    unreported_.push_back(std::move(m));
  }
  auto next = after_commit(now);
  out.insert(out.end(), next.begin(), next.end());
  return out;
}

actions step_protocol::commit_with_loss(double total, clock_type::time_point now) {
  committed_ = step_;
  ++step_;
  step_failures_ = 0;
  step_metrics m = std::move(summing_);
  m.loss = total;
  m.seconds = between(step_start_, now);  // the step ends at its commit: the job's sum waited for every process
  losses_.push_back(m.loss);
  actions out = just(report_step_action{std::move(m)});
  phase_ = phase::stepping;
  auto next = after_commit(now);
  out.insert(out.end(), next.begin(), next.end());
  return out;
}

actions step_protocol::on_worker_lost(int rank, const std::string& reason, const std::string& fabric_reason,
                                      clock_type::time_point now) {
  if (rank < 0 || rank >= ranks_) return {};
  dead_[static_cast<std::size_t>(rank)] = true;
  failures_.push_back({rank, step_, reason, between(step_start_, now), 0});
  step_outcome o;
  o.rank = rank;
  o.failure = "worker died: " + reason;
  return on_outcome(generation_, step_, rank, std::move(o), fabric_reason, now);
}

actions step_protocol::on_loss(std::int64_t step, result<double> total, clock_type::time_point now) {
  if (phase_ == phase::summing && step == step_) {
    if (total) return commit_with_loss(*total, now);
    // the sum failed: a process was lost after the step's work, before its commit
    failed_ = true;
    detected_at_ = now;
    first_code_ = total.error().code;
    first_failure_ = "the job's loss: " + total.error().message;
    failures_.push_back({-1, step_, first_failure_, between(step_start_, now), 0});
    return decide_recovery();
  }
  if (phase_ == phase::done || unreported_.empty() || unreported_.front().step != step) return {};
  if (!total)
    return finish(make_error(total.error().code, "step " + std::to_string(step) + ": " + total.error().message));
  step_metrics m = std::move(unreported_.front());
  unreported_.pop_front();
  m.loss = *total;
  losses_.push_back(m.loss);
  actions out = just(report_step_action{std::move(m)});
  if (phase_ == phase::draining && unreported_.empty()) {
    auto next = after_commit(now);
    out.insert(out.end(), next.begin(), next.end());
  }
  return out;
}

// After a commit (step_ is the next step): a plan transition due at this boundary, the
// collection after the last step — both once every committed step is reported — or the next step.
actions step_protocol::after_commit(clock_type::time_point now) {
  const bool leave_due = std::find(leaving_.begin(), leaving_.end(), true) != leaving_.end();
  if (leave_due && step_ < cfg_.steps && unreported_.empty()) {  // before a checkpoint: the job after they left
    transition_action a;
    a.step = step_;
    a.leave = std::exchange(leaving_, {});
    return begin_transition(std::move(a));
  }
  leaving_.clear();                                                 // after the last step: they finish with the others
  if (joiners_ > 0 && step_ < cfg_.steps && unreported_.empty()) {  // the job grows before a checkpoint
    transition_action a;
    a.step = step_;
    a.joiners = std::exchange(joiners_, 0);
    return begin_transition(std::move(a));
  }
  joiners_ = 0;
  if (straggler_ >= 0 && step_ < cfg_.steps && unreported_.empty()) {  // a rank moves off a straggler
    transition_action a;
    a.step = step_;
    a.straggler = std::exchange(straggler_, -1);
    return begin_transition(std::move(a));
  }
  straggler_ = -1;
  while (next_migration_ < cfg_.migrations.size() && cfg_.migrations[next_migration_].at_step < step_)
    ++next_migration_;  // (a resumed or joining run starts past it)
  if (next_migration_ < cfg_.migrations.size() && cfg_.migrations[next_migration_].at_step == step_ &&
      step_ < cfg_.steps && unreported_.empty()) {
    transition_action a;
    a.step = step_;
    a.migration = static_cast<int>(next_migration_++);
    return begin_transition(std::move(a));
  }
  if (cfg_.checkpoint_every > 0 && step_ % cfg_.checkpoint_every == 0 && snapshot_at_ != step_) {
    phase_ = phase::snapshotting;
    snapshot_at_ = step_;
    return just(snapshot_action{step_, committed_});
  }
  // an evaluation of the steps done (after the last one too, as the serial trainer does)
  if (cfg_.evaluate_every > 0 && step_ % cfg_.evaluate_every == 0 && evaluated_at_ != step_ &&
      step_ > cfg_.first_step) {
    if (!unreported_.empty()) {  // the steps' losses first (the evaluation's record follows them)
      phase_ = phase::draining;
      return {};
    }
    phase_ = phase::evaluating;
    evaluated_at_ = step_;
    return just(evaluate_action{step_, committed_});
  }
  const bool replan_due = replan_due_ && step_ < cfg_.steps;
  const bool transition_due =
      next_change_ < cfg_.change_at.size() && cfg_.change_at[next_change_] == step_ && step_ < cfg_.steps;
  if (!transition_due && !replan_due && step_ < cfg_.steps) return begin_step(now);
  if (!unreported_.empty()) {
    phase_ = phase::draining;
    return {};
  }
  if (replan_due) {  // before a change due at the same boundary, which then follows
    replan_due_ = false;
    transition_action a;
    a.step = step_;
    a.replan = true;
    return begin_transition(std::move(a));
  }
  if (transition_due) {
    return begin_transition(transition_action{step_, next_change_++, false, {}});
  }
  phase_ = phase::collecting;
  return just(collect_action{committed_});
}

actions step_protocol::decide_recovery() {
  if (cfg_.multi_process && !cfg_.rejoin)  // across processes without rejoin: a failure ends the run
    return finish(make_error(first_code_, "step " + std::to_string(step_) + " failed: " + first_failure_));
  // the limit is per step (a step that keeps failing ends the run); a long run survives any
  // number of failures at different steps
  ++restarts_;
  if (++step_failures_ > cfg_.max_restarts)
    return finish(make_error(first_code_, "step " + std::to_string(step_) + " failed " +
                                              std::to_string(step_failures_) + " times (max-restarts " +
                                              std::to_string(cfg_.max_restarts) + "); last: " + first_failure_));
  ++generation_;
  if (cfg_.multi_process) {  // the processes that remain take over
    phase_ = phase::rejoining;
    return just(rejoin_action{generation_, committed_, "step " + std::to_string(step_) + " failed: " + first_failure_});
  }
  phase_ = phase::recovering;
  recover_action a;
  a.generation = generation_;
  a.committed = committed_;
  for (int r = 0; r < ranks_; ++r) {
    if (!is_local(r)) continue;
    (dead_[static_cast<std::size_t>(r)] ? a.respawn : a.reset).push_back(r);
    dead_[static_cast<std::size_t>(r)] = false;
  }
  return just(std::move(a));
}

actions step_protocol::on_recovered(clock_type::time_point now) {
  if (phase_ != phase::recovering) return {};
  for (auto& f : failures_)
    if (f.recover_seconds == 0) f.recover_seconds = between(detected_at_, now);
  return begin_step(now);
}

void step_protocol::adopt_ranks(int ranks, std::vector<bool> local) {
  ranks_ = ranks;
  local_ = std::move(local);
  dead_.assign(static_cast<std::size_t>(ranks_), false);
}

actions step_protocol::on_rejoined(int ranks, std::vector<bool> local, std::int64_t committed, double loss,
                                   clock_type::time_point now, bool from_checkpoint, bool devices_lost) {
  if (phase_ != phase::rejoining) return {};
  adopt_ranks(ranks, std::move(local));
  replan_due_ = cfg_.replan_on_rejoin && devices_lost;
  if (cfg_.joining) {  // a replacement: it starts where the job is
    start_where_the_job_is(committed);
    losses_.clear();
    return after_commit(now);
  }
  for (auto& f : failures_)
    if (f.recover_seconds == 0) f.recover_seconds = between(detected_at_, now);
  if (from_checkpoint && committed <= committed_ && committed + 1 >= cfg_.first_step) {
    committed_ = committed;
    step_ = committed + 1;
    snapshot_at_ = step_;  // the state it starts from is that checkpoint
    losses_.resize(static_cast<std::size_t>(step_ - cfg_.first_step));
    return after_commit(now);
  }
  // another process saw the job's loss of the step this one was summing: committed after all
  if (committed == committed_ + 1 && committed == step_) return commit_with_loss(loss, now);
  if (committed != committed_)
    return finish(make_error(errc::invalid_argument, "rejoin: the processes that remain disagree on the steps done (" +
                                                         std::to_string(committed + 1) + " and " +
                                                         std::to_string(committed_ + 1) + ")"));
  return after_commit(now);
}

void step_protocol::leave_after_commit(std::vector<bool> leaving) {
  if (leaving_.size() < leaving.size()) leaving_.resize(leaving.size(), false);
  for (std::size_t p = 0; p < leaving.size(); ++p) leaving_[p] = leaving_[p] || leaving[p];
}

void step_protocol::join_after_commit(int joiners) { joiners_ = std::max(joiners_, joiners); }

void step_protocol::migrate_after_commit(int straggler) {
  if (straggler >= 0) straggler_ = straggler;
}

void step_protocol::on_joined(std::int64_t committed) {
  if (phase_ != phase::rejoining || !cfg_.joining) return;
  start_where_the_job_is(committed);
  phase_ = phase::transitioning;
  in_transition_ = transition_action{};
  in_transition_.joiners = 1;  // the join it takes part in
}

void step_protocol::start_where_the_job_is(std::int64_t committed) {
  cfg_.joining = false;
  committed_ = committed;
  step_ = committed + 1;
  cfg_.first_step = step_;
  snapshot_at_ = step_;  // the state it starts from was not its own to save
  while (next_change_ < cfg_.change_at.size() && cfg_.change_at[next_change_] <= step_) ++next_change_;
}

actions step_protocol::on_left() {
  if (phase_ != phase::transitioning) return {};
  return finish({});
}

actions step_protocol::on_transition_done(int ranks, std::vector<bool> local, clock_type::time_point now) {
  if (phase_ != phase::transitioning) return {};
  adopt_ranks(ranks, std::move(local));
  ++layout_;
  phase_ = phase::stepping;
  return after_commit(now);  // a re-plan's boundary may also have a change due
}

actions step_protocol::begin_transition(transition_action a) {
  phase_ = phase::transitioning;
  in_transition_ = a;
  return just(std::move(a));
}

actions step_protocol::on_transition_lost(const error& e, clock_type::time_point now) {
  if (phase_ != phase::transitioning) return {};
  if (!cfg_.multi_process || !cfg_.rejoin) return finish(e);
  // what the run itself asked for is due again at this boundary, once the job has recovered
  // (a leaver, a joiner or a straggler asks again in a later step's sum; a re-plan follows
  // the recovery where devices were lost)
  const transition_action& was = in_transition_;
  if (was.migration >= 0) next_migration_ = static_cast<std::size_t>(was.migration);
  if (!was.replan && was.leave.empty() && was.joiners == 0 && was.straggler < 0 && was.migration < 0)
    next_change_ = was.change;
  detected_at_ = now;
  first_code_ = e.code;
  first_failure_ = "the plan change after step " + std::to_string(step_) + ": " + e.message;
  failures_.push_back({-1, step_, first_failure_, 0, 0});
  ++generation_;  // nothing of this step boundary is redone; the pieces roll back to what is committed
  phase_ = phase::rejoining;
  return just(rejoin_action{generation_, committed_, first_failure_, true});
}

actions step_protocol::on_plan_kept(clock_type::time_point now) {
  if (phase_ != phase::transitioning) return {};
  phase_ = phase::stepping;
  return after_commit(now);  // a change due at this boundary still comes
}

actions step_protocol::on_evaluated(clock_type::time_point now) {
  if (phase_ != phase::evaluating) return {};
  phase_ = phase::stepping;
  return after_commit(now);
}

actions step_protocol::on_snapshot_taken(clock_type::time_point now) {
  if (phase_ != phase::snapshotting) return {};
  phase_ = phase::stepping;
  return after_commit(now);
}

actions step_protocol::on_collected() {
  if (phase_ != phase::collecting) return {};
  return finish({});
}

actions step_protocol::on_error(const error& e) { return finish(e); }

actions step_protocol::finish(status st) {
  if (phase_ == phase::done) return {};
  phase_ = phase::done;
  return just(finish_action{std::move(st)});
}

}  // namespace cohort::actors
