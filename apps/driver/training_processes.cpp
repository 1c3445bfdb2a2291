// One process of a multi-process job (docs/processes.md): join or coordinate, take or make
// the plan, run this process's ranks over the data plane, report a lost node.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>

#include "apps/driver/control_keys.hpp"
#include "apps/driver/restarts.hpp"
#include "apps/driver/training_loop.hpp"
#include "planner/rank_layout.hpp"

namespace cohort::apps {

using actors::fabric_ptr;

namespace {

// What the planner is asked for after a recovered loss (--fault.replan): the run's own request
// where the planner chose the first plan (auto), its free choice under the same sharding and
// options (always); none (keep, or auto with a plan the user gave).
std::optional<planner::plan_request> replan_request(const plan_options& p) {
  if (!p.dist.recover || p.dist.replan == "keep") return std::nullopt;
  const bool planners = p.mode == planner::plan_mode::automatic && p.file.empty();
  if (p.dist.replan == "auto" && !planners) return std::nullopt;
  planner::plan_request r = p;
  if (!planners) {
    r.mode = planner::plan_mode::automatic;
    r.file.clear();
    r.dp = r.tp = r.pp = r.micro_batches = r.virtual_stages = 0;
    r.cuts.clear();
    r.schedule.clear();
  }
  r.only = false;
  r.ranks = 0;
  return r;
}

// The control plane's membership as the runtime takes it, with the report of its latest change.
actors::job_membership runtime_membership(const transport::membership& m, std::string why) {
  actors::job_membership out;
  out.epoch = m.epoch;
  out.live = m.live;
  out.lost = m.lost;
  out.replaced = m.replaced;
  out.joined = m.joined;
  out.why = std::move(why);
  return out;
}

// SIGTERM (a scheduler's notice before preemption) on a node of a job that keeps going: it
// asks to leave at the next step boundary (the flag is read with the step's loss).
std::atomic<bool> leave_requested{false};
extern "C" void on_sigterm(int) { leave_requested.store(true); }
void install_leave_on_sigterm() {
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace

namespace {

// One try at the job: process 0 plans and shares the plan; every process runs its block of
// ranks over the data plane; a lost process ends the job with a report naming it (or, with
// --fault.recover, the others go on). A process joining the running job whose join was dropped
// sets `rejoin`: where to ask again should the coordinator not answer.
result<training_result> train_processes_once(const training_job& job, const plan_options& p,
                                             const std::vector<std::string>& caf_arguments,
                                             const std::shared_ptr<const start_point>& start,
                                             std::optional<std::vector<std::pair<std::string, int>>>& rejoin) {
  if (p.only)
    return make_error(errc::invalid_argument, "--plan.only plans in one process: drop --launch.nproc / WORLD_SIZE");
  auto formed = form_process_group(p.dist);
  if (!formed && p.dist.join_running && formed.error().message.find(transport::not_needed) != std::string::npos) {
    std::fprintf(stderr, "job: this process waited to join the running job, which ended without needing it\n");
    training_result spare;
    spare.report = false;
    return spare;
  }
  if (!formed) return formed.error();
  process_group& g = **formed;
  const int world = g.world();  // the job's slots (more than its processes where it may grow)
  const std::vector<bool> live_at_start = g.control->members().live;
  const int started_with = static_cast<int>(std::count(live_at_start.begin(), live_at_start.end(), true));
  const bool coordinator = g.process() == 0;
  if (coordinator) {
    std::string who;
    for (const auto& n : g.control->roster())
      if (n.pid != 0)
        who += (who.empty() ? "" : ", ") + std::to_string(n.process) + ": pid " + std::to_string(n.pid) + " at " +
               n.host + " (" + std::to_string(n.cores) + (n.cores == 1 ? " core)" : " cores)");
    std::fprintf(
        stderr, "job: %d processes joined: %s%s\n", started_with, who.c_str(),
        world > started_with ? ("; it may grow to " + std::to_string(world) + " (--elastic.max-procs)").c_str() : "");
  }
  // The coordinator plans for world-size ranks unless told otherwise; the others take its plan.
  std::shared_ptr<planner::planning_setup> setup;
  result<planner::plan_choice> choice = make_error(errc::closed, "no plan");
  std::optional<actors::run_options::joining_job> joining;
  const auto arrived = g.control->arrived_as();
  if (arrived != transport::arrival::start) {
    // the running job's plan and where it is, from process 0: during the recovery a replacement
    // joins, or at the step boundary a joining process was admitted at (with the next plan)
    const bool replacing = arrived == transport::arrival::replacement;
    const auto m = g.control->members();
    auto text = g.control->broadcast_text(key(control_key::plan_change), "", m.epoch);
    if (!text) return make_error(text.error().code, "joining the running job: " + text.error().message);
    auto st = actors::joining_from_text(*text, world);
    if (!st) return st.error();
    if (st->next.has_value() == replacing)
      return make_error(errc::io_error, replacing ? "joining the running job: process 0 sent a join, not a recovery"
                                                  : "joining the running job: process 0 named no plan to join");
    joining.emplace();
    joining->state = std::move(*st);
    joining->members = runtime_membership(
        m, "process " + std::to_string(g.process()) + (replacing ? " replaced" : " joined the running job"));
    choice = joining->state.plan;
    choice->how = "the running job's";
    if (replacing)
      std::fprintf(stderr, "job: process %d joined the running job in a lost process's place (%s, after step %lld)\n",
                   g.process(), planner::describe(choice->plan).c_str(),
                   static_cast<long long>(joining->state.committed + 1));
    else
      std::fprintf(stderr, "job: process %d joined the running job after step %lld (%s -> %s)\n", g.process(),
                   static_cast<long long>(joining->state.committed + 1), planner::describe(choice->plan).c_str(),
                   planner::describe(joining->state.next->plan).c_str());
  } else if (coordinator) {
    plan_options q = p;
    if (q.ranks == 0 && q.mode == planner::plan_mode::automatic) q.ranks = started_with;
    q.processes = started_with;  // priced with the link between them
    q.data_plane = to_string(p.dist.transport);
    // every process computes with job.threads threads: the job as a whole has that many times its processes
    auto s = prepare_planning(job, q, job.threads * started_with);
    choice = s ? planner::choose_plan(*s, q) : result<planner::plan_choice>(s.error());
    if (choice && choice->plan.ranks() % started_with != 0)
      choice = make_error(errc::invalid_argument, "the plan " + planner::describe(choice->plan) + " has " +
                                                      std::to_string(choice->plan.ranks()) + " ranks, which " +
                                                      std::to_string(started_with) + " processes cannot split evenly");
    if (s) setup = std::make_shared<planner::planning_setup>(std::move(*s));
    // the plan, and where the run starts: every process must resume from the same step
    json first = choice ? choice->to_json() : json::object();
    first["start_step"] = start->first_step;
    const std::string text = choice ? first.dump() : "error: " + choice.error().message;
    if (auto shared = g.control->broadcast_text(key(control_key::first_plan), text); !shared) return shared.error();
    if (!choice) return choice.error();
  } else {
    auto text = g.control->broadcast_text(key(control_key::first_plan), "");
    if (!text) return text.error();
    if (text->rfind("error: ", 0) == 0)
      return make_error(errc::invalid_argument, "the coordinator could not plan: " + text->substr(7));
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("start_step") || !j["start_step"].is_number_integer())
      return make_error(errc::io_error, "the coordinator's plan is not JSON with a start step");
    if (j["start_step"].get<std::int64_t>() != start->first_step)
      return make_error(errc::invalid_argument,
                        "the first process starts after step " + j["start_step"].dump() + ", this one after step " +
                            std::to_string(start->first_step) +
                            ": every process must see the same --checkpoint.dir (one machine or a shared file system)");
    j.erase("start_step");
    j.erase("predicted");
    j.erase("how");
    choice = planner::plan_from_json(j, "the coordinator's plan");
    if (!choice) return choice.error();
    choice->how = "from the coordinator";
    if (p.dist.recover) {  // it may take over from a lost coordinator: then its planner re-plans
      plan_options q = p;
      if (q.ranks == 0 && q.mode == planner::plan_mode::automatic) q.ranks = started_with;
      q.processes = started_with;
      q.data_plane = to_string(p.dist.transport);
      if (auto s = prepare_planning(job, q, job.threads * started_with); s)
        setup = std::make_shared<planner::planning_setup>(std::move(*s));
    }
  }
  std::shared_ptr<transport::fabric> data_plane;  // a replacement's comes with the recovery it joins
  if (!joining) {
    auto fabric = g.connect(choice->plan);
    if (!fabric) return fabric.error();
    data_plane = *fabric;
  }

  loop_state loop(job);
  loop.quiet = !coordinator;
  loop.process = g.process();
  if (coordinator)
    if (auto st = loop.metrics.open(job.metrics_path); !st) return st.error();
  // every process keeps the report's record (a process that takes over from a lost coordinator
  // writes it whole from then on); the coordinator writes the page
  start_report(loop, p, *choice, started_with);
  training_job with_note = job;
  with_note.note = (job.note.empty() ? "" : job.note + "\n") + "plan: " + planner::describe(choice->plan) + " (" +
                   choice->how + ") over " + std::to_string(joining ? g.live() : started_with) + " processes (" +
                   to_string(p.dist.transport) + ")";
  const auto owner = g.owners(choice->plan);
  // the data plane in use (a plan transition replaces it), closed when a node is lost
  auto current = std::make_shared<std::pair<std::mutex, fabric_ptr>>();
  current->second = data_plane;
  g.control->on_lost([current](const transport::lost_node& n) {
    std::lock_guard<std::mutex> lock(current->first);
    if (current->second) current->second->close(n.describe());
  });
  // every process's task times, kept by its planner actor; process 0 refits from all of them
  // after the run (no setup here: no refit of one process's times alone)
  auto refit =
      std::make_shared<planner::online_refit>(*choice, nullptr, /*save=*/false, job.first_step + job.warmup, job.steps);
  // --metrics.listen: process 0 serves the job's figures (a process that takes over from it, from then on)
  auto serve_metrics = [&loop, &p, &choice, started_with, current, control = g.control.get()] {
    auto bytes = [current] {
      std::lock_guard<std::mutex> lock(current->first);
      return current->second ? current->second->bytes_to_other_processes() : std::uint64_t{0};
    };
    auto live = [control] {
      int n = 0;
      for (bool l : control->members().live) n += l ? 1 : 0;
      return n;
    };
    auto control_bytes = [control] { return control->bytes_sent(); };
    return start_live_metrics(loop, p, *choice, started_with, bytes, control_bytes, live);
  };
  if (coordinator)
    if (auto st = serve_metrics(); !st) return st.error();
  // the endpoint may outlive this job's control plane (--metrics.linger-s): its last figures stay
  struct freeze_sources {
    loop_state& loop;
    ~freeze_sources() {
      if (loop.live) loop.live->freeze_sources();
    }
  } freeze{loop};
  auto customize = [&](actors::run_options& o) {
    actors::process_hooks h;
    h.process = g.process();
    h.leader = [&g] { return g.control->leader(); };
    h.processes = world;
    h.live = joining ? joining->members.live : live_at_start;
    h.fabric = data_plane;
    // the step's sum: the loss; per process a 0/1 slot (it asks to leave after the step) and its
    // seconds per rank; process 0's count of processes waiting to join and its straggler + 1
    h.sum_loss = [&g, world](std::int64_t step, const actors::step_share& mine,
                             std::uint64_t epoch) -> result<actors::step_sum> {
      const auto w = static_cast<std::size_t>(world);
      const auto me = static_cast<std::size_t>(g.process());
      std::vector<double> values(2 * w + 3, 0.0);
      values[0] = mine.loss;
      if (mine.leaving) values[1 + me] = 1.0;
      values[1 + w + me] = mine.per_rank_s;
      if (g.control->is_leader()) values[1 + 2 * w] = mine.joining, values[2 + 2 * w] = mine.straggler + 1;
      auto total = g.control->sum(step_loss_key(step), values, epoch);
      if (!total) return total.error();
      const auto bad = [&](const std::string& what) {
        return make_error(errc::io_error, "the job's sum of step " + std::to_string(step) + " " + what);
      };
      if (total->size() != values.size()) return bad("has the wrong length");
      actors::step_sum out;
      out.loss = (*total)[0];
      for (std::size_t q = 0; q < w; ++q) {
        out.leaving.push_back((*total)[1 + q] > 0.5);
        out.per_rank_s.push_back((*total)[1 + w + q]);
      }
      const double waiting = (*total)[1 + 2 * w], straggler = (*total)[2 + 2 * w] - 1;
      if (waiting < 0 || waiting > world || waiting != std::floor(waiting))
        return bad("counts " + std::to_string(waiting) + " processes waiting to join");
      if (straggler < -1 || straggler >= world || straggler != std::floor(straggler))
        return bad("names process " + std::to_string(straggler) + " a straggler");
      out.joining = static_cast<int>(waiting);
      out.straggler = static_cast<int>(straggler);
      return out;
    };
    if (p.dist.max_procs > 0) {  // --elastic.max-procs: processes may join the running job
      // (at process 0, or at the process that took over from it: the others count none)
      const auto join_timeout = std::chrono::milliseconds(p.dist.join_timeout_ms);
      auto waited = std::make_shared<bool>(false);
      h.joiners_waiting = [&g, after = p.dist.join_after, join_timeout, waited](std::int64_t step) {
        if (!g.control->is_leader()) return 0;
        if (after > 0 && step + 1 < after) return 0;  // the test hook: not before this step
        int n = g.control->joiners_waiting();
        // ... and there (or at this coordinator's first boundary after it: a join dropped for a
        // loss, a coordinator that took over) as many as fill the job
        if (after > 0 && !*waited) {
          *waited = true;
          // (its empty slots; process 0's stays empty once it is lost: nobody takes the coordinator's place)
          const auto live = g.control->members().live;
          const auto empty = static_cast<int>(std::count(live.begin() + 1, live.end(), false));
          // (half the join timeout: the others wait for this step's sum at most the whole)
          const auto deadline = std::chrono::steady_clock::now() + join_timeout / 2;
          while (n < empty && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the control proxy's thread
            n = g.control->joiners_waiting();
          }
        }
        return n;
      };
      h.admit_joiners = [&g, join_timeout](int count, const std::vector<bool>& live) -> result<actors::job_membership> {
        auto m = g.control->admit_joiners(count, join_timeout, live);
        if (!m) return m.error();
        return runtime_membership(*m, "processes joined");
      };
    }
    h.gather_pieces = [&g](std::vector<tensor> pieces, const std::vector<int>& owner) -> result<std::vector<tensor>> {
      std::vector<std::pair<int, tensor>> mine;
      for (std::size_t r = 0; r < pieces.size(); ++r)
        if (owner[r] == g.process()) mine.emplace_back(static_cast<int>(r), pieces[r]);
      return g.control->gather(key(control_key::parameters), mine, owner);
    };
    h.share_plan = [&g](const std::string& text, std::uint64_t epoch) {
      return g.control->broadcast_text(key(control_key::plan_change), text, epoch);
    };
    h.connect = [&g](const planner::parallel_plan& plan, const std::vector<int>& owner) {
      return g.connect(plan, owner);
    };
    if (p.dist.recover) {  // a lost node leaves the job running: the coordinator hands its ranks on
      // a loss is noticed within the heartbeat timeout; a lost coordinator's successor then
      // waits up to twice that plus a second for the others (control_succession.cpp)
      const auto wait = std::chrono::milliseconds(3 * p.dist.heartbeat_timeout_ms + 6000);
      // the membership after `epoch` (within `timeout`), as the runtime sees it
      auto wait_for_change = [&g](std::uint64_t epoch,
                                  std::chrono::milliseconds timeout) -> result<actors::job_membership> {
        auto m = g.control->wait_membership(epoch, timeout);
        if (!m) return m.error();
        // every change has its report: the losses in it (two may go at once: a process and a
        // newcomer that held nothing yet), or a replacement's: the loss it answers
        std::string why;
        for (const auto& n : g.control->losses_after(epoch)) why += (why.empty() ? "" : "; ") + n.describe();
        if (why.empty())
          if (auto n = g.control->last_loss()) why = n->describe();
        return runtime_membership(*m, why);
      };
      h.await_membership = [wait_for_change, wait](std::uint64_t epoch) { return wait_for_change(epoch, wait); };
      h.gather_lines = [&g](const std::string& line, std::uint64_t epoch) {
        return g.control->all_gather_text(key(control_key::rejoin), line, epoch);
      };
      // nobody takes a lost coordinator's place (the launcher starts none for it): nothing to
      // wait for; later losses are replaced at the new coordinator's standby port
      if (p.dist.replace_wait_ms > 0)
        h.await_replacement = [wait_for_change, &g](
                                  std::uint64_t epoch,
                                  std::chrono::milliseconds timeout) -> result<actors::job_membership> {
          if (auto loss = g.control->last_loss(); loss && loss->coordinator) {
            if (g.control->is_leader())
              std::fprintf(stderr,
                           "job: no replacement awaited (--fault.replace-wait-ms): a lost coordinator's "
                           "place is not taken; replacements join process %d from now on\n",
                           g.process());
            return make_error(errc::timeout, "no replacement takes a lost coordinator's place");
          }
          return wait_for_change(epoch, timeout);
        };
      // a node leaves in good order on SIGTERM or at --elastic.leave-after; process 0 lets it go
      h.depart = [&g](const std::vector<int>& leavers) -> status {
        for (int q : leavers)
          if (auto st = g.control->depart(q); !st) return st;
        return {};
      };
      if (g.process() != 0) {
        install_leave_on_sigterm();
        h.wants_to_leave = [&g, after = p.dist.leave_after, rank = p.dist.leave_rank](std::int64_t step) {
          if (g.control->is_leader()) return false;  // it took over: the job's coordinator stays
          const bool hook = after > 0 && rank == g.process() && step + 1 >= after;
          const bool term = leave_requested.load();
          static std::atomic<bool> said{false};
          if ((hook || term) && !said.exchange(true))
            std::fprintf(stderr,
                         "job: process %d %s: it leaves the job after step %lld (its state moves to the others)\n",
                         g.process(), term ? "got SIGTERM" : "--elastic.leave-after", static_cast<long long>(step + 1));
          return hook || term;
        };
      }
    }
    h.adopt_fabric = [current](const fabric_ptr& f) {
      std::lock_guard<std::mutex> lock(current->first);
      current->second = f;
    };
    o.job = std::move(h);
    o.replan_on_loss = replan_request(p);
    o.replace_wait = std::chrono::milliseconds(p.dist.replace_wait_ms);
    o.replicas = p.dist.recover && p.dist.replicas == 1;
    o.joining = joining;
    if (joining) o.scale_base_dp = joining->state.scale_base_dp;  // the running job's batch rule
    o.min_processes = static_cast<int>(p.dist.min_procs);
    o.stragglers = {.factor = p.dist.straggler_factor, .steps = static_cast<int>(p.dist.straggler_steps)};
    if (p.dist.migrate_step > 0)
      o.migrations.push_back(
          {p.dist.migrate_step, static_cast<int>(p.dist.migrate_rank), static_cast<int>(p.dist.migrate_process)});
    // the slow test hook: this process, where it hosts that rank of the first plan (a joining
    // process hosted none)
    if (p.dist.slow_rank >= 0 && !joining && p.dist.slow_rank < static_cast<std::int64_t>(owner.size()) &&
        owner[static_cast<std::size_t>(p.dist.slow_rank)] == g.process())
      o.slow_factor = p.dist.slow_factor;
    o.scale_out = p.dist.scale_out == "always"  ? actors::scale_policy::always
                  : p.dist.scale_out == "never" ? actors::scale_policy::never
                                                : actors::scale_policy::automatic;
    o.on_scale_decision = [&loop](const actors::scale_decision& d) {
      json rec = {{"step", d.step},
                  {"waiting", d.waiting},
                  {"processes_before", d.processes_before},
                  {"processes_after", d.processes_after},
                  {"from", d.from},
                  {"to", d.to},
                  {"predicted_step_s_before", d.predicted_step_s_before},
                  {"predicted_step_s_after", d.predicted_step_s_after},
                  {"remaining_steps", d.remaining_steps},
                  {"saved_s", d.saved_s},
                  {"bytes", d.bytes},
                  {"cost_s", d.cost_s},
                  {"adopted", d.adopted},
                  {"why", d.why}};
      loop.out.scale_out.push_back(rec);
      json event = rec;
      event["event"] = "scale_out";
      loop.metrics.write(event);
      std::fprintf(stderr, "\njob: %d process%s waiting to join after step %lld: %s (%s -> %s)\n", d.waiting,
                   d.waiting == 1 ? "" : "es", static_cast<long long>(d.step),
                   d.adopted ? "the job grows" : "the job stays as it is", d.why.c_str(), d.to.c_str());
    };
    o.changes = plan_changes(p);
    o.planning = setup;
    o.refit = refit;
    // the step in flight, for a lost node's report; the test hook fires once step S is
    // committed here, before step S+1 starts (so the others are in step S+1 when it is lost)
    auto raise_if_due = [&](std::int64_t step, const char* at) {
      const auto& d = p.dist;
      for (std::size_t i = 0; i < d.signal_rank.size() && !d.signal.empty() && launch_attempt() == 0 && !d.replacement;
           ++i)
        if (d.signal_rank[i] == g.process() && d.signal_step[i] == step && d.signal_at_each[i] == at) {
          std::fprintf(stderr, "fault: process %d raises SIG%s after step %lld%s\n", g.process(), d.signal.c_str(),
                       static_cast<long long>(step),
                       d.signal_at_each[i] == "step"         ? ""
                       : d.signal_at_each[i] == "transition" ? ", in the transition"
                                                             : ", as the state moves");
          std::fflush(stderr);
          ::raise(d.signal == "KILL" ? SIGKILL : d.signal == "TERM" ? SIGTERM : SIGSTOP);
        }
    };
    o.on_step_start = [&, raise_if_due](std::int64_t step) {
      raise_if_due(step, "step");
      g.control->set_step(step + 1);  // 1-based
    };
    o.on_transition_start = [raise_if_due](std::int64_t steps) { raise_if_due(steps, "transition"); };
    o.on_state_move = [raise_if_due](std::int64_t steps) { raise_if_due(steps, "exchange"); };
  };
  // the step a loss names until the first step starts: a newcomer's is the job's, a resumed run's the next
  g.control->set_step(joining ? joining->state.committed + 1 : start->first_step + 1);
  // a restarted job's notes for its launcher: the first step done, or the failure
  launch_notes notes;
  auto with_notes = [&](actors::run_options& o) {
    customize(o);
    // a node that took over from a lost coordinator (control_succession.cpp) reports from then
    // on: the progress lines, the metrics file (continued), the summary, the launcher's verdict
    auto took_over = [&loop, &g, &job, serve_metrics] {
      if (!loop.quiet || !g.control->is_leader()) return;
      loop.quiet = false;
      (void)loop.metrics.open(job.metrics_path, /*append=*/true);
      const auto me = g.control->roster()[static_cast<std::size_t>(g.process())];
      note_leader(g.process(), me.host, me.standby_port);
      std::string why = "the coordinator was lost";  // (a newcomer's loss may have followed)
      for (const auto& n : g.control->losses_after(0))
        if (n.coordinator) why = n.describe();
      std::fprintf(stderr, "\njob: process %d took over as the job's coordinator (%s)\n", g.process(), why.c_str());
      // the endpoint at the same address here (its figures from now on), the report's page whole
      if (auto st = serve_metrics(); !st)
        std::fprintf(stderr, "warning: --metrics.listen after taking over: %s\n", st.error().message.c_str());
      if (loop.report) loop.write_report_now();
    };
    auto transition = o.on_transition;
    o.on_transition = [transition, took_over](const actors::transition_record& t) {
      took_over();
      if (transition) transition(t);
    };
    auto recovered = o.on_recovery;
    o.on_recovery = [recovered, took_over](const actors::recovery_record& c) {
      took_over();
      if (recovered) recovered(c);
    };
    auto stepped = o.on_step;
    o.on_step = [stepped, took_over](const actors::step_metrics& m) {
      took_over();
      if (stepped) stepped(m);
    };
    if (!coordinator) return;
    auto inner = o.on_step;
    o.on_step = [inner, &notes](const actors::step_metrics& m) {
      inner(m);
      notes.first_step_done();
    };
  };
  auto r = train_runtime(with_note, p, *choice, caf_arguments, loop, *start, with_notes);
  if (coordinator && r) {  // the launcher's restarts before this attempt, then the recoveries inside it
    json all = restart_recoveries(job.first_step, notes.first_step_unix_s(), planner::describe(choice->plan));
    for (auto& rec : r->recoveries) all.push_back(rec);
    r->recoveries = std::move(all);
  }
  const planner::task_totals& totals = refit->totals();
  if (r && r->left_after >= 0) {  // this node left the running job: the others report it
    std::fprintf(stderr, "job: process %d left the job after step %lld; its ranks' state moved to the others\n",
                 g.process(), static_cast<long long>(r->left_after));
    if (auto st = g.control->finish(std::chrono::seconds(30)); !st) return st.error();
    r->report = false;
    return r;
  }
  if (!r) {
    // a data-plane error usually arrives just before the control plane's verdict: wait for it
    error e = r.error();
    // (a job that kept going has had its verdict: the error names the loss it could not get over)
    if (!p.dist.recover || !g.control->last_loss())
      if (auto lost = g.control->wait_lost(std::chrono::milliseconds(p.dist.heartbeat_timeout_ms + 1000)))
        e = make_error(errc::closed, lost->describe());
    if (coordinator) notes.failed(loop.last_committed, planner::describe(choice->plan), e.message);
    if (p.dist.join_running && e.code == errc::closed && e.message.rfind(actors::run_options::join_dropped, 0) == 0)
      rejoin = g.control->standby_order();
    return e;
  }
  // every rank's task times on the coordinator, for the refit: each process adds its own
  // ranks' (the others are zeros) into a job-wide vector: per rank the three task sums, then
  // each timed step's update, the first 256 of them (every process times the same steps; the
  // control plane's frames are bounded). The refit is of the job's first plan: process 0 names
  // it with the count of timed steps (a replacement joined later and timed fewer steps), and a
  // process whose first plan was another (it joined after a change) adds zeros of that size.
  const bool leads = g.control->is_leader();  // process 0, or the process that took over from it
  auto timed_text = g.control->broadcast_text(
      key(control_key::timed_steps),
      leads ? json{{"timed", std::min<std::size_t>(static_cast<std::size_t>(totals.steps), 256)},
                   {"ranks", choice->plan.ranks()},
                   {"plan", planner::describe(choice->plan)}}
                  .dump()
            : "");
  if (!timed_text) return timed_text.error();
  const json timed_json = json::parse(*timed_text, nullptr, /*allow_exceptions=*/false);
  if (!timed_json.is_object() || !timed_json.contains("timed") || !timed_json["timed"].is_number_unsigned() ||
      timed_json["timed"].get<std::uint64_t>() > 256 || !timed_json.contains("ranks") ||
      !timed_json["ranks"].is_number_unsigned() || timed_json["ranks"].get<std::uint64_t>() < 1 ||
      timed_json["ranks"].get<std::uint64_t>() > (1u << 16) || !timed_json.contains("plan") ||
      !timed_json["plan"].is_string())
    return make_error(errc::io_error, "process 0's count of timed steps is malformed: '" + *timed_text + "'");
  const auto timed = timed_json["timed"].get<std::size_t>();
  const auto first_ranks = timed_json["ranks"].get<std::size_t>();
  const bool ran_first_plan =
      timed_json["plan"].get<std::string>() == planner::describe(choice->plan) && owner.size() == first_ranks;
  const std::size_t width = 3 + timed;
  std::vector<double> flat(first_ranks * width, 0.0);
  for (std::size_t rank = 0; ran_first_plan && rank < owner.size(); ++rank) {
    if (owner[rank] != g.process()) continue;
    if (rank < totals.per_rank.size()) {
      const auto& t = totals.per_rank[rank];
      flat[rank * width] = t.forward_s, flat[rank * width + 1] = t.backward_s, flat[rank * width + 2] = t.update_s;
    }
    if (rank < totals.update_per_step.size())
      for (std::size_t i = 0; i < timed && i < totals.update_per_step[rank].size(); ++i)
        flat[rank * width + 3 + i] = totals.update_per_step[rank][i];
  }
  auto job_totals = g.control->sum(key(control_key::task_times), flat);
  if (!job_totals) return job_totals.error();
  if (loop.trace) {  // every process's events, merged on process 0 with the clocks aligned
    auto merged = gather_trace(*g.control, *loop.trace, key(control_key::trace_clock), key(control_key::trace));
    if (!merged) return merged.error();
    if (leads)
      if (auto st = write_trace(p.trace.file, std::move((*merged)["events"]),
                                {{"plan", planner::describe(choice->plan)},
                                 {"processes", g.live()},
                                 {"clock_offsets_us", (*merged)["offsets_us"]},
                                 {"clock_residual_us", (*merged)["residual_us"]}});
          !st)
        return st.error();
  }
  if (auto st = g.control->finish(std::chrono::seconds(30)); !st) return st.error();
  r->report = leads;
  r->plan["processes"] = g.live();
  if (coordinator && setup && choice->predicted && totals.steps > 0) {
    planner::task_totals all = totals;
    all.per_rank.assign(owner.size(), {});
    all.update_per_step.assign(owner.size(), std::vector<double>(timed, 0.0));
    for (std::size_t rank = 0; rank < owner.size(); ++rank) {
      const double* t = &(*job_totals)[rank * width];
      all.per_rank[rank] = {t[0], t[1], t[2]};
      for (std::size_t i = 0; i < timed; ++i) all.update_per_step[rank][i] = t[3 + i];
    }
    // reported, not saved: the profile describes this machine's in-process runtime, and a job's
    // data plane (TCP, UCX, another host) is a different link
    r->prediction = planner::compare_and_refit(*choice, *setup, /*save=*/false, all, false);
    r->prediction["note"] =
        "refit from every process's task times; its efficiencies are not saved (the profile's are the in-process "
        "runtime's); the link between the processes is refit as this job met it (between_processes)";
    auto between = planner::refit_between_processes(*choice, *setup, all, p.refit);
    if (!between.empty()) r->prediction["between_processes"] = std::move(between);
  }
  return r;
}

}  // namespace

result<training_result> train_processes(const training_job& job, const plan_options& p,
                                        const std::vector<std::string>& caf_arguments,
                                        const std::shared_ptr<const start_point>& start) {
  // a process joining the running job holds nothing until its state has moved: when the job
  // changes as it moves (another process lost), the others recover without it and it waits to
  // join again, a few times at most
  constexpr int tries = 4;
  plan_options q = p;
  for (int attempt = 1;; ++attempt) {
    std::optional<std::vector<std::pair<std::string, int>>> rejoin;
    auto r = train_processes_once(job, q, caf_arguments, start, rejoin);
    if (r || !rejoin) return r;
    if (attempt == tries)
      return make_error(r.error().code, r.error().message + "; it did not join in " + std::to_string(tries) + " tries");
    std::fprintf(stderr, "job: %s; it waits to join again\n", r.error().message.c_str());
    q.dist.rejoin_standbys = std::move(*rejoin);
  }
}

}  // namespace cohort::apps
