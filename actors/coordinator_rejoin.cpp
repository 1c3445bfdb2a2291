// The coordinator's recovery from a lost process (a job that keeps going): the failed
// generation's workers stop, the control plane names the processes that remain, they agree on
// the steps done, each lost rank's state comes from the copy a data-parallel peer holds (the
// parameter actors keep the committed state), a data plane among the remaining processes
// carries it to the lost ranks' new homes, and the interrupted step is redone. Where no replica
// holds a lost rank's state, the newest checkpoint every remaining process has is loaded into
// the new placement and the steps since it are trained again. Nobody restarts. With
// run_options::replan_on_loss the recovery is reported once the re-plan that follows it
// (coordinator_transition.cpp) has settled the plan.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "actors/checkpoint_store.hpp"
#include "actors/coordinator_parts.hpp"
#include "actors/param_actor.hpp"
#include "actors/transition.hpp"
#include "planner/rank_layout.hpp"

namespace cohort::actors::coordination {
namespace {

void fail(self_ptr self, const std::string& failure, const error& e) {
  execute(self, self->state.protocol->on_error(make_error(e.code, failure + "; the job cannot go on: " + e.message)));
}

void restore(self_ptr self, const rejoin_action& a, const job_membership& m,
             std::chrono::steady_clock::time_point started);

// A step of the recovery failed: when another process was lost meanwhile (the membership moved
// past `before`), the recovery starts again for the new membership, its cause both changes';
// otherwise the job ends.
void retry_or_fail(self_ptr self, const rejoin_action& a, const job_membership& before,
                   std::chrono::steady_clock::time_point started, const error& e) {
  auto m = std::make_shared<result<job_membership>>(make_error(errc::closed, "not known"));
  auto await = self->state.options.job->await_membership;
  const std::uint64_t epoch = before.epoch;
  const std::string why = before.why;
  on_proxy(
      self, [=] { *m = await(epoch); },
      [=] {
        if (!*m || (*m)->epoch <= epoch) return fail(self, a.failure, e);
        job_membership now = **m;
        if (!why.empty() && now.why != why) now.why = now.why.empty() ? why : why + "; " + now.why;
        restore(self, a, now, started);
      });
}

// Where each rank's state comes from: the rank itself if its process remains, else a data-
// parallel replica of it on a process that remains (the same stage and tensor-parallel rank,
// an identical piece: only without sharding), else its buddy copy (replicas.hpp) where the
// process keeping it remains. `sender` (by rank) is the process that sends each rank's piece:
// its owner, or the copy's keeper.
result<std::vector<state_copy>> sources(const planner::parallel_plan& plan, const std::vector<piece_layout>& layouts,
                                        const std::vector<int>& old_owner, const std::vector<bool>& live,
                                        const std::vector<int>& copy_keeper, std::vector<int>& sender,
                                        std::string& restored_from) {
  const planner::rank_layout layout(plan);
  std::vector<state_copy> copies;
  sender = old_owner;
  restored_from.clear();
  auto note = [&](const std::string& what) { restored_from += (restored_from.empty() ? "" : "; ") + what; };
  for (int r = 0; r < plan.ranks(); ++r) {
    int from = live[static_cast<std::size_t>(old_owner[static_cast<std::size_t>(r)])] ? r : -1;
    const auto at = layout.place_of(r);
    for (int d = 0; from < 0 && !plan.shard_params && d < plan.dp; ++d) {
      const int peer = layout.rank_of({d, at.stage, at.tp_rank});
      if (live[static_cast<std::size_t>(old_owner[static_cast<std::size_t>(peer)])] &&
          layouts[static_cast<std::size_t>(peer)].size == layouts[static_cast<std::size_t>(r)].size)
        from = peer;
    }
    const int keeper = copy_keeper[static_cast<std::size_t>(r)];
    if (from >= 0 && from != r)
      note("rank " + std::to_string(r) + " from its data-parallel replica, rank " + std::to_string(from));
    if (from < 0 && keeper >= 0 && live[static_cast<std::size_t>(keeper)]) {
      from = r;
      sender[static_cast<std::size_t>(r)] = keeper;
      note("rank " + std::to_string(r) + " from its buddy copy on process " + std::to_string(keeper));
    }
    if (from < 0)
      return make_error(errc::closed, "process " + std::to_string(old_owner[static_cast<std::size_t>(r)]) +
                                          " held the only copy of rank " + std::to_string(r) + "'s state (stage " +
                                          std::to_string(at.stage) + ", tp rank " + std::to_string(at.tp_rank) +
                                          (plan.shard_params ? ", sharded" : "") +
                                          ", no data-parallel replica or buddy copy left); with --checkpoint.dir "
                                          "the job falls back on its newest checkpoint");
    copies.push_back({from, r, 0, 0, layouts[static_cast<std::size_t>(r)].size});
  }
  return copies;
}

// The states moved: the new placement's actors start from them, the interrupted step is redone.
void install(self_ptr self, std::vector<piece_state> states, fabric_ptr fabric, recovery_record rec,
             std::chrono::steady_clock::time_point started, std::int64_t agreed, double agreed_loss,
             bool from_checkpoint = false) {
  auto& s = self->state;
  retire_plan(self);
  if (s.options.job->adopt_fabric) s.options.job->adopt_fabric(fabric);
  s.fabric = std::move(fabric);
  spawn_plan(self, agreed + 1, &states);  // s.owner: the new placement (s.live is the new membership)
  rec.recover_s = since(started);
  if (s.options.replan_on_loss) {  // reported once the re-plan before the next step is settled
    s.pending_recovery = std::move(rec);
    s.recovery_started = started;
  } else {
    report_recovery(self, std::move(rec));
  }
  // fewer processes than before the loss: the plan may change for them (a replacement took its place: no)
  const bool devices_lost = std::count(s.live.begin(), s.live.end(), true) <
                            std::count(s.live_before_rejoin.begin(), s.live_before_rejoin.end(), true);
  execute(self, s.protocol->on_rejoined(s.model->plan.ranks(), local_flags(self), agreed, agreed_loss,
                                        clock_type::now(), from_checkpoint, devices_lost));
}

// No replica of a lost rank: the newest checkpoint every remaining process sees (the oldest of
// their newest), loaded into the new placement; the steps after it are trained again.
void restore_from_checkpoint(self_ptr self, const rejoin_action& a, const job_membership& m, std::vector<int> new_owner,
                             recovery_record rec, std::chrono::steady_clock::time_point started, const error& no_copy) {
  auto& s = self->state;
  if (!s.options.checkpoint || s.options.checkpoint->dir.empty()) return fail(self, a.failure, no_copy);
  const std::string dir = s.options.checkpoint->dir;
  auto lines = std::make_shared<result<std::vector<std::string>>>(make_error(errc::closed, "not gathered"));
  auto gather = s.options.job->gather_lines;
  on_proxy(
      self,
      [=] {
        auto newest = checkpoint::find_newest(dir);
        *lines = gather(newest.ck ? std::to_string(newest.ck->step) : "-1", m.epoch);
      },
      [=]() mutable {
        if (!*lines) return retry_or_fail(self, a, m, started, (*lines).error());
        std::int64_t agreed = -1;
        for (const auto& l : **lines) {
          if (l.empty()) continue;  // a lost process
          char* end = nullptr;
          const long long step = std::strtoll(l.c_str(), &end, 10);
          if (end == l.c_str() || *end != 0 || step < 0)
            return fail(self, a.failure,
                        make_error(no_copy.code, no_copy.message + ", and no checkpoint in " + dir +
                                                     " that every remaining process sees"));
          agreed = agreed < 0 ? step : std::min<std::int64_t>(agreed, step);
        }
        auto& st = self->state;
        const auto& plan = st.model->plan;
        const int me = st.options.job->process;
        std::vector<bool> local;
        for (int o : new_owner) local.push_back(o == me);
        auto states = std::make_shared<result<std::vector<piece_state>>>(make_error(errc::closed, "not loaded"));
        auto fabric = std::make_shared<result<fabric_ptr>>(make_error(errc::closed, "not connected"));
        auto connect = st.options.job->connect;
        auto layouts = st.layouts;
        const auto optimizer = st.options.optimizer;
        const std::string path = dir + "/" + checkpoint::step_dir_name(agreed);
        on_proxy(
            self,
            [=] {
              auto ck = checkpoint::open(path);
              if (!ck) {
                *states = ck.error();
              } else if (auto c = checkpoint::check_compatible(*ck, layouts, optimizer); !c) {
                *states = c.error();
              } else {
                *states =
                    checkpoint::load_pieces(*ck, layouts, local, static_cast<std::size_t>(state_slots(optimizer)));
              }
              if (*states) *fabric = connect(plan, new_owner);
            },
            [=]() mutable {
              if (!*states) return fail(self, a.failure, (*states).error());
              if (!*fabric) return retry_or_fail(self, a, m, started, (*fabric).error());
              rec.source = "checkpoint";
              rec.tables.clear();  // the checkpoint's tables, as the replicas agreed when it was written
              rec.steps_redone = a.committed + 1 - agreed;
              install(self, std::move(**states), **fabric, rec, started, agreed - 1, 0, true);
            });
      });
}

// The membership is known: agree on the steps done, export, move, install.
// One recovery's facts, shared by its steps (each runs when the one before has answered).
struct recovery {
  rejoin_action action;
  job_membership members;
  std::chrono::steady_clock::time_point started;
  std::vector<int> old_owner, new_owner;  // each rank's process before and after
  std::vector<bool> holders;              // the processes that hold committed state
  std::vector<state_copy> copies;         // each rank's whole piece from where it survives
  std::vector<int> sender;                // by rank: the process sending its piece (a copy's keeper)
  recovery_record record;
  std::int64_t agreed = -1;  // the steps done, as the remaining processes agreed
  double agreed_loss = 0;    // the job's loss of the last of them
};
using recovery_ptr = std::shared_ptr<recovery>;

// Step 4: a data plane among the remaining processes, every piece moved over it, then install.
void move_pieces(self_ptr self, recovery_ptr r, std::shared_ptr<std::vector<piece_state>> old) {
  auto& s = self->state;
  exchange_options o;
  o.old_owner = r->sender;  // a buddy copy's keeper sends in its owner's place
  o.new_owner = r->new_owner;
  o.fabric_owner = r->new_owner;
  o.process = s.options.job->process;
  o.processes = s.options.job->processes;
  o.slots = static_cast<std::size_t>(state_slots(s.options.optimizer));
  o.steps = r->agreed + 1;
  o.tag = (rejoin_tag_space << 40) | r->members.epoch;
  o.timeout = s.options.timeout;
  auto moved = std::make_shared<result<exchanged_state>>(make_error(errc::closed, "not exchanged"));
  auto fabric = std::make_shared<result<fabric_ptr>>(make_error(errc::closed, "not connected"));
  auto connect = s.options.job->connect;
  auto layouts = s.layouts;
  const auto plan = s.model->plan;
  on_proxy(
      self,
      [=] {
        *fabric = connect(plan, r->new_owner);
        if (*fabric) *moved = exchange_state(***fabric, o, r->copies, *old, layouts);
      },
      [=] {
        const auto& a = r->action;
        if (!*fabric) return retry_or_fail(self, a, r->members, r->started, (*fabric).error());
        if (!*moved) return retry_or_fail(self, a, r->members, r->started, (*moved).error());
        r->record.bytes_moved = bytes_across_processes(r->copies, o);
        install(self, std::move((*moved)->states), **fabric, r->record, r->started, r->agreed, r->agreed_loss);
      });
}

// Step 3: every local piece rolled back to what was agreed (the uncommitted dropped, or the step
// another process saw committed applied), then exported.
void export_pieces(self_ptr self, recovery_ptr r) {
  auto& s = self->state;
  auto old = std::make_shared<std::vector<piece_state>>(s.params.size());
  // the buddy copies kept here that stand in for a lost owner (their workers stopped: the
  // coordinator reads them directly)
  const int me = s.options.job->process;
  for (std::size_t k = 0; k < s.copies.size(); ++k) {
    if (r->sender[k] != me || r->old_owner[k] == me) continue;
    auto& copy = s.copies[k];
    auto st = copy ? copy->rollback(r->action.generation, r->agreed) : make_error(errc::closed, "no copy here");
    auto state = st ? copy->export_state(r->agreed) : result<piece_state>(st.error());
    if (!state)
      return fail(
          self, r->action.failure,
          make_error(state.error().code, "buddy copy of rank " + std::to_string(k) + ": " + state.error().message));
    (*old)[k] = std::move(*state);
  }
  auto left = std::make_shared<std::size_t>(0);
  for (auto& p : s.params) *left += p ? 1 : 0;
  if (*left == 0) return move_pieces(self, r, old);
  auto failed = [=](caf::error& e) { fail(self, r->action.failure, from_caf(e)); };
  for (std::size_t k = 0; k < s.params.size(); ++k) {
    if (!s.params[k]) continue;
    auto param = s.params[k];
    self->request(param, s.options.timeout, rollback_atom::value, r->action.generation, r->agreed)
        .then(
            [=](ok_atom) {
              self->request(param, self->state.options.timeout, export_atom::value, r->agreed)
                  .then(
                      [=](piece_state& p) {
                        (*old)[k] = std::move(p);
                        if (--*left == 0) move_pieces(self, r, old);
                      },
                      failed);
            },
            failed);
  }
}

// The plan, its cuts and each rank's process, as a short fingerprint (FNV-1a, 64 bits, hex).
std::string plan_key(const coordinator_state& s) {
  std::string text = planner::describe(s.model->plan) + " |";
  for (auto c : s.model->cuts) text += " " + std::to_string(c);
  text += " |";
  for (int o : s.owner) text += " " + std::to_string(o);
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// Step 2: every remaining process's committed step and the job's loss of it — one may have seen
// the loss of the step the others were still summing: the most steps done count —, the plan
// it holds (they must all hold the same), and the buddy copies each keeps; then where each rank's state survives (without a copy anywhere: the
// newest checkpoint).
void agree(self_ptr self, recovery_ptr r) {
  auto& s = self->state;
  const std::int64_t mine = s.protocol->committed();
  const double my_loss = s.protocol->losses().empty() ? 0.0 : s.protocol->losses().back();
  // the plan and placement this process holds (a process lost in the middle of a plan change
  // may leave some processes with the new plan installed and others with the old one)
  const std::string held = plan_key(s);
  char line[128];
  std::snprintf(line, sizeof line, "%lld %.17g plan %s", static_cast<long long>(mine), my_loss, held.c_str());
  std::string text = line;  // then the buddy copies this process keeps: " copies 1 3"
  if (r->holders[static_cast<std::size_t>(s.options.job->process)]) {
    std::string kept;
    for (std::size_t k = 0; k < s.copies.size(); ++k)
      if (s.copies[k] && s.copies[k]->holds_values()) kept += " " + std::to_string(k);
    if (!kept.empty()) text += " copies" + kept;
  }
  auto lines = std::make_shared<result<std::vector<std::string>>>(make_error(errc::closed, "not gathered"));
  auto gather = s.options.job->gather_lines;
  on_proxy(
      self, [=] { *lines = gather(text, r->members.epoch); },
      [=] {
        const auto& a = r->action;
        if (!*lines) return retry_or_fail(self, a, r->members, r->started, (*lines).error());
        auto& st = self->state;
        r->agreed = mine;
        r->agreed_loss = my_loss;
        const int ranks = st.model->plan.ranks();
        std::vector<int> keeper(static_cast<std::size_t>(ranks), -1);  // by rank: who keeps its copy
        for (std::size_t p = 0; p < (*lines)->size(); ++p) {
          const std::string& l = (**lines)[p];
          long long c = 0;
          double loss = 0;
          if (l.empty()) continue;  // a lost process
          if (std::sscanf(l.c_str(), "%lld %lf", &c, &loss) != 2)
            return fail(self, a.failure, make_error(errc::io_error, "rejoin: a malformed line '" + l + "'"));
          const auto key_at = l.find(" plan ");
          if (key_at == std::string::npos)
            return fail(self, a.failure, make_error(errc::io_error, "rejoin: a malformed line '" + l + "'"));
          if (l.compare(key_at + 6, held.size(), held) != 0)
            return fail(self, a.failure,
                        make_error(errc::closed, "process " + std::to_string(p) + " holds another plan than " +
                                                     planner::describe(st.model->plan) +
                                                     " here: a process was lost while the plan changed on some of "
                                                     "the others; with --checkpoint.dir and --launch.max-restarts the "
                                                     "job restarts from its newest checkpoint"));
          if (c > r->agreed) r->agreed = c, r->agreed_loss = loss;
          const auto at = l.find(" copies ");
          if (at == std::string::npos) continue;
          std::istringstream kept(l.substr(at + 8));
          for (int k = 0; kept >> k;) {
            if (k < 0 || k >= ranks)
              return fail(self, a.failure, make_error(errc::io_error, "rejoin: a malformed line '" + l + "'"));
            keeper[static_cast<std::size_t>(k)] = static_cast<int>(p);
          }
          if (!kept.eof())
            return fail(self, a.failure, make_error(errc::io_error, "rejoin: a malformed line '" + l + "'"));
        }
        auto copies =
            sources(st.model->plan, st.layouts, r->old_owner, r->holders, keeper, r->sender, r->record.restored_from);
        if (!copies)
          return restore_from_checkpoint(self, a, r->members, r->new_owner, r->record, r->started, copies.error());
        r->copies = std::move(*copies);
        export_pieces(self, r);
      });
}

// Step 1: the membership is known — a replacement awaited where one may come, the new
// placement, the record; then agree.
void restore(self_ptr self, const rejoin_action& a, const job_membership& m,
             std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  const std::size_t n = m.live.size();
  std::vector<bool> replaced(n, false);  // in this recovery: a replacement holds no state yet
  for (std::size_t i = s.replaced_before_rejoin; i < m.replaced.size(); ++i)
    if (m.replaced[i] >= 0 && static_cast<std::size_t>(m.replaced[i]) < n)
      replaced[static_cast<std::size_t>(m.replaced[i])] = true;
  bool missing = false;
  for (std::size_t p = 0; p < n; ++p) missing = missing || (s.live_before_rejoin[p] && !m.live[p]);
  if (missing && s.options.replace_wait.count() > 0 && s.options.job->await_replacement && !s.replacement_awaited) {
    s.replacement_awaited = true;  // once per recovery: then the others take over
    auto next = std::make_shared<result<job_membership>>(make_error(errc::closed, "not known"));
    auto await = s.options.job->await_replacement;
    const auto wait = s.options.replace_wait;
    const std::uint64_t epoch = m.epoch;
    const job_membership here = m;
    on_proxy(
        self, [=] { *next = await(epoch, wait); },
        [=] {
          if (*next) return restore(self, a, **next, started);
          if ((*next).error().code == errc::timeout) return restore(self, a, here, started);
          fail(self, a.failure, (*next).error());
        });
    return;
  }
  if (const auto left = std::count(m.live.begin(), m.live.end(), true); left < s.options.min_processes)
    return fail(self, a.failure,
                make_error(errc::closed, std::to_string(left) + " processes remain, fewer than --elastic.min-procs=" +
                                             std::to_string(s.options.min_processes)));
  const auto& plan = s.model->plan;
  auto r = std::make_shared<recovery>();
  r->action = a;
  r->members = m;
  r->started = started;
  r->old_owner = s.owner;
  s.membership_epoch = m.epoch;
  s.live = m.live;
  s.replaced_seen = m.replaced.size();
  s.placement.clear();  // a migration's placement: the ranks go back to blocks over the processes that remain
  if (s.stragglers) s.stragglers->reset();
  s.checking.reset();
  s.undo_due = s.undoing = false;
  r->new_owner = owners_of(self, plan);
  if (s.layouts_of != s.protocol->layout()) {
    auto l = piece_layouts(*s.model);
    if (!l) return fail(self, a.failure, l.error());
    s.layouts = std::move(*l);
    s.layouts_of = s.protocol->layout();
  }
  r->holders.assign(n, false);
  for (std::size_t p = 0; p < n; ++p) r->holders[p] = s.live_before_rejoin[p] && m.live[p] && !replaced[p];
  recovery_record& rec = r->record;
  rec.step = a.committed + 1;
  rec.cause = m.why;
  // every process lost since the recovery began (two may go at once: "process 2, process 3"),
  // a replaced one too
  for (std::size_t p = 0; p < n; ++p) {
    if (s.live_before_rejoin[p] && (!m.live[p] || replaced[p]))
      rec.lost += (rec.lost.empty() ? "process " : ", process ") + std::to_string(p);
    if (replaced[p]) rec.replacement += (rec.replacement.empty() ? "process " : ", process ") + std::to_string(p);
  }
  rec.plan_before = rec.plan_after = planner::describe(plan);
  rec.source = "replica";
  if (s.model->options.sparse_tables && plan.dp > 1 && !plan.shard_params)  // replicas of the tables
    rec.tables = s.options.exchange.recovery_note(a.committed + 1);
  if (a.in_transition) rec.interrupted = "plan change";
  rec.detect_s = s.protocol->last_detect_seconds();
  auto go_on = [=] { agree(self, r); };  // then where each lost rank's state survives
  if (rec.replacement.empty() || s.options.joining) return go_on();
  // a replacement is in: process 0 tells it where the job is (it joined knowing nothing)
  std::string text;
  if (s.options.job->leads()) {
    joining_state st;
    st.plan.plan = plan;
    st.plan.cuts = s.model->cuts;
    st.owner_before = r->old_owner;
    st.live_before = s.live_before_rejoin;
    st.replaced_before = s.replaced_before_rejoin;
    st.committed = a.committed;
    st.cursor = s.cursor.stretches();
    st.scale_base_dp = s.options.scale_base_dp;
    text = to_text(st);
  }
  auto shared = std::make_shared<result<std::string>>(make_error(errc::closed, "not shared"));
  auto share = s.options.job->share_plan;
  const std::uint64_t epoch = m.epoch;
  on_proxy(
      self, [=] { *shared = share(text, epoch); },
      [=]() mutable {
        if (!*shared) return retry_or_fail(self, a, m, started, (*shared).error());
        go_on();
      });
}

}  // namespace

void report_recovery(self_ptr self, recovery_record rec) {
  auto& s = self->state;
  s.summary.recoveries.push_back(rec);
  if (s.options.on_recovery) s.options.on_recovery(rec);
}

void settle_recovery(self_ptr self, const std::string& plan_after, const std::string& replan) {
  auto& s = self->state;
  if (!s.pending_recovery) return;
  recovery_record rec = std::move(*s.pending_recovery);
  s.pending_recovery.reset();
  rec.plan_after = plan_after;
  rec.replan = replan;
  rec.recover_s = since(s.recovery_started);
  report_recovery(self, std::move(rec));
}

void join_running(self_ptr self) {
  auto& s = self->state;
  const auto& j = *s.options.joining;
  if (j.state.next) return join_as_newcomer(self);  // joining the running job, not replacing
  s.owner = j.state.owner_before;
  s.live = j.members.live;
  s.membership_epoch = j.members.epoch;
  s.live_before_rejoin = j.state.live_before;
  s.replaced_before_rejoin = j.state.replaced_before;
  s.replaced_seen = j.members.replaced.size();
  s.replacement_awaited = true;  // it is the replacement
  rejoin_action a;
  a.committed = j.state.committed;
  a.failure = "joining the running job";
  restore(self, a, j.members, std::chrono::steady_clock::now());
}

void rejoin(self_ptr self, const rejoin_action& a) {
  auto& s = self->state;
  const auto started = std::chrono::steady_clock::now();
  // the failed generation's workers stop (their data plane is closed); the parameter actors
  // keep the committed state
  for (auto& w : s.workers)
    if (w) self->send_exit(w, caf::exit_reason::user_shutdown);
  std::fill(s.workers.begin(), s.workers.end(), worker_hdl{});
  // a recovery whose re-plan this failure interrupted is reported now, with the plan still in
  // place: this recovery re-plans again once it has restored the lost ranks
  if (s.pending_recovery)
    settle_recovery(self, planner::describe(s.model->plan),
                    "not settled: another process was lost during the re-plan (the next recovery re-plans)");
  s.live_before_rejoin = s.live;
  s.replaced_before_rejoin = s.replaced_seen;
  s.replacement_awaited = false;
  cancel_waiting_writes(self);  // a checkpoint still waiting for a lost process's file never gets it
  auto m = std::make_shared<result<job_membership>>(make_error(errc::closed, "not known"));
  auto await = s.options.job->await_membership;
  const std::uint64_t epoch = s.membership_epoch;
  on_proxy(
      self, [=] { *m = await(epoch); },
      [=] {
        if (!*m) return fail(self, a.failure, (*m).error());
        restore(self, a, **m, started);
      });
}

}  // namespace cohort::actors::coordination
