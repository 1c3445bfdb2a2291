// Serial or actor-runtime training with one progress/metrics path.
#include "apps/training.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <limits>
#include <csignal>
#include <cstdio>
#include <optional>

#include "actors/runtime.hpp"
#include "apps/planning.hpp"
#include "kernels/trainer.hpp"
#include "planner/refit.hpp"

namespace cohort::apps {

void plan_options::add_to(option_set& opts) {
  opts.add("plan.mode", mode, "auto (the planner chooses), manual (the --plan.* degrees) or serial (the reference trainer)")
      .add("plan.dp", dp, "data-parallel replicas (0: the planner's choice; manual: 1)")
      .add("plan.tp", tp, "tensor-parallel ranks per stage (0: the planner's choice; manual: 1)")
      .add("plan.pp", pp, "pipeline stages (0: the planner's choice; manual: 1)")
      .add("plan.micro-batches", micro_batches, "micro-batches per step (0: the planner's choice; manual: 1)")
      .add("plan.schedule", schedule, "gpipe or 1f1b (empty: the planner's choice; manual: 1f1b)")
      .add("plan.shard-params", shard_params, "shard optimizer state over dp (ZeRO); under auto: require it")
      .add("plan.cuts", cuts, "pipeline cuts as forward-node indices (empty: balanced)")
      .add("plan.only", only, "print the ranked plans and the chosen one as JSON; train nothing")
      .add("plan.file", file, "train with this saved plan (JSON as --plan.only prints it)")
      .add("plan.list", list, "write every candidate plan (auto) to this file, one JSON per line, best first")
      .add("plan.ranks", ranks, "devices to plan for on this machine (0: one per core)")
      .add("plan.max-micro-batches", max_micro_batches, "the most micro-batches the planner considers")
      .add("plan.refit", refit, "refit the cost model from this run's task times and save it with the profile")
      .add("plan.half-precision", half_precision, "plan for mixed precision (f16 FLOP/s, 2-byte activations)")
      .add("plan.recompute", recompute, "let the planner recompute activations (cluster files only: not run here yet)")
      .add("cluster.file", cluster_file, "plan for this cluster (Paddle's or cohort's JSON, docs/cluster.md)")
      .add("cluster.profile", cluster_profile, "this machine's measured profile (default ~/.cache/cohort/profile.json)")
      .add("cluster.calibrate", cluster_calibrate, "measure this machine (GEMM, memory, link) and save the profile")
      .add("fault.max-restarts", max_restarts, "redo a failed step at most this many times")
      .add("fault.timeout-ms", timeout_ms, "the longest any wait inside a step may take")
      .add("fault.inject-rank", inject_rank, "test hook: this worker rank fails ... (-1: off)")
      .add("fault.inject-step", inject_step, "... at this step ...")
      .add("fault.inject-task", inject_task, "... before this task of its schedule");
  dist.add_to(opts);
}

status plan_options::finish(const option_set& opts) {
  if (!opts.was_set("plan.mode"))
    for (const char* key : {"plan.dp", "plan.tp", "plan.pp", "plan.micro-batches", "plan.schedule", "plan.shard-params",
                            "plan.cuts"})
      if (opts.was_set(key)) mode = "manual";
  return dist.finish(opts);
}

namespace {

struct loop_state {
  const training_job& job;
  progress_line progress;
  metrics_file metrics;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), timed_start = start;
  training_result out;

  bool quiet = false;  // another process reports

  explicit loop_state(const training_job& j) : job(j), progress(j.app, j.steps) {}

  void on_step(std::int64_t step, float loss, json extra = json::object()) {  // step is 0-based
    if (step == 0) out.first_loss = loss;
    if (step + 1 == job.warmup + 1) timed_start = std::chrono::steady_clock::now();
    out.final_loss = loss;
    double elapsed = seconds_since(start);
    double rate = static_cast<double>((step + 1) * job.batch * job.items_per_sample) / elapsed;
    if (quiet) return;
    progress.update(step + 1, loss, rate, job.rate_unit);
    json rec = {{"step", step + 1}, {"loss", loss}, {"lr", learning_rate(job.optimizer)}, {"time", elapsed}};
    rec[std::string(job.rate_unit) == "tokens/s" ? "tokens_per_s" : "samples_per_s"] = rate;
    for (auto& [k, v] : extra.items()) rec[k] = v;
    metrics.write(rec);
  }

  void finish() {
    if (!quiet) progress.finish();
    std::int64_t timed = job.steps > job.warmup ? job.steps - job.warmup : job.steps;
    if (job.steps <= job.warmup) timed_start = start;
    out.items_per_s = static_cast<double>(timed * job.batch * job.items_per_sample) / seconds_since(timed_start);
  }
};

result<training_result> train_serial(const training_job& job, loop_state& loop) {
  graph g;
  var loss = job.model(g, job.batch);
  if (auto st = g.check(); !st) return st.error();
  auto tr = kernels::serial_trainer::create(g, loss, {.optimizer = job.optimizer, .seed = job.seed, .threads = job.threads});
  if (!tr) return tr.error();
  if (!job.note.empty()) std::fprintf(stderr, "%s\n", job.note.c_str());
  for (std::int64_t step = 0; step < job.steps; ++step) {
    for (auto& [name, t] : job.data(step)) (*tr)->input(name).copy_from(t);
    auto l = (*tr)->step();
    if (!l) return make_error(l.error().code, "step " + std::to_string(step + 1) + ": " + l.error().message);
    loop.on_step(step, *l);
  }
  loop.finish();
  loop.out.parameters = (*tr)->parameters();
  loop.out.plan = {{"mode", "serial"}, {"ranks", 1}};
  return std::move(loop.out);
}

// Per rank, the seconds of forward, backward and update tasks summed over the timed steps.
struct task_totals {
  std::vector<std::array<double, 3>> per_rank;
  std::vector<double> step_seconds;
  std::int64_t steps = 0;
};

result<training_result> train_runtime(const training_job& job, const plan_options& p, const plan_choice& choice,
                                      const std::vector<std::string>& caf_arguments, loop_state& loop,
                                      task_totals& totals, const std::function<void(const task_totals&)>& on_totals,
                                      const std::function<void(actors::run_options&)>& customize = {}) {
  actors::run_options o;
  o.plan = choice.plan;
  o.batch = job.batch;
  o.steps = job.steps;
  o.optimizer = job.optimizer;
  o.seed = job.seed;
  o.threads = job.threads;
  o.timeout = std::chrono::milliseconds(p.timeout_ms);
  o.max_restarts = static_cast<int>(p.max_restarts);
  o.stage_cuts = choice.cuts;
  o.inject = {static_cast<int>(p.inject_rank), p.inject_step, static_cast<std::size_t>(p.inject_task)};
  o.on_step = [&](const actors::step_metrics& m) {
    // per-step timings for the cost model: the slowest worker's task seconds and the step's
    double busiest = 0;
    json tasks = json::array();
    for (const auto& t : m.task_seconds) {
      busiest = std::max(busiest, t[0] + t[1] + t[2]);
      tasks.push_back({t[0], t[1], t[2]});
    }
    if (m.step >= job.warmup || job.steps <= job.warmup) {
      totals.per_rank.resize(std::max(totals.per_rank.size(), m.task_seconds.size()));
      for (std::size_t r = 0; r < m.task_seconds.size(); ++r)
        for (std::size_t k = 0; k < 3; ++k) totals.per_rank[r][k] += m.task_seconds[r][k];
      totals.step_seconds.push_back(m.seconds);
      ++totals.steps;
      if (on_totals) on_totals(totals);
    }
    loop.on_step(m.step, static_cast<float>(m.loss),
                 {{"step_s", m.seconds}, {"busiest_worker_s", busiest}, {"task_s", tasks}, {"generation", m.generation}});
  };
  o.on_start = [&] {
    if (!job.note.empty() && !loop.quiet) std::fprintf(stderr, "%s\n", job.note.c_str());
  };
  if (customize) customize(o);

  caf::actor_system_config cfg;
  cfg.set("scheduler.max-threads", std::max(1, job.threads));
  // Workers compute on their own threads; the scheduler only runs the light coordinator,
  // data and parameter actors. Work stealing's polling would take cores from the workers;
  // the sharing policy sleeps when idle. Both can be overridden with --scheduler.*.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  std::vector<std::string> args = caf_arguments;
  if (auto err = cfg.parse(args); err)
    return make_error(errc::invalid_argument, "CAF options: " + caf::to_string(err));
  caf::actor_system sys{cfg};
  auto data = job.data;
  auto r = actors::train(sys, job.model,
                         [data](std::int64_t step) -> result<std::map<std::string, tensor>> { return data(step); }, o);
  if (!r) return r.error();
  loop.finish();
  loop.out.restarts = r->restarts;
  loop.out.parameters = std::move(r->parameters);
  loop.out.plan = choice.to_json();
  return std::move(loop.out);
}


// Predicted against measured step time, and the refit of the cost model from the task
// times (saved with the profile when --plan.refit).
// `first` counts the refit in the profile (a run's later refits replace its first).
json compare_and_refit(const plan_choice& choice, planning_setup& setup, const plan_options& p, const task_totals& t,
                       bool first) {
  json out = json::object();
  if (!choice.predicted || t.steps == 0) return out;
  std::vector<double> steps = t.step_seconds;
  std::sort(steps.begin(), steps.end());
  const double measured = steps[steps.size() / 2];
  const double predicted = choice.predicted->step_s;
  out["predicted_step_s"] = predicted;
  out["measured_step_s"] = measured;
  out["error_pct"] = 100.0 * (predicted - measured) / measured;
  // One observation per stage: forward and backward averaged over the stage's ranks; the
  // update (the dp reduction) from the rank that waited least in it, the last to arrive,
  // whose time is the reduction itself rather than waiting for slower replicas.
  std::vector<planner::task_observation> obs;
  const auto& plan = choice.plan;
  const auto stages = choice.predicted->stages.size();
  std::vector<std::array<double, 3>> per_stage(stages, {0.0, 0.0, std::numeric_limits<double>::infinity()});
  std::vector<int> count(stages, 0);
  for (std::size_t r = 0; r < t.per_rank.size(); ++r) {
    const auto stage = static_cast<std::size_t>((static_cast<int>(r) / plan.tp) % plan.pp);
    if (stage >= stages) continue;
    const double n = static_cast<double>(t.steps);
    per_stage[stage][0] += t.per_rank[r][0] / n;
    per_stage[stage][1] += t.per_rank[r][1] / n;
    per_stage[stage][2] = std::min(per_stage[stage][2], t.per_rank[r][2] / n);
    ++count[stage];
  }
  for (std::size_t s = 0; s < stages; ++s) {
    if (count[s] == 0) continue;
    per_stage[s][0] /= count[s];
    per_stage[s][1] /= count[s];
    obs.push_back({choice.predicted->stages[s], per_stage[s]});
  }
  auto fit = planner::refit(obs, setup.search.eff);  // the constants the prediction was made with
  if (!fit.changed) return out;
  // What the tasks do not explain (messages, waking threads, the commit) is the runtime's
  // overhead per step and rank: the measured step against the refit model's.
  if (!setup.cluster) {
    planner::search_options again = setup.search;
    again.eff = fit.eff;
    again.eff.per_rank_step_seconds = 0;
    again.topo = local_topology(setup.profile, plan.ranks(), setup.threads);
    if (auto q = planner::evaluate_plan(*setup.analysis, plan, again, choice.predicted->cuts, choice.predicted->recompute))
      fit.eff.per_rank_step_seconds = std::max(0.0, measured - q->step_s) / plan.ranks();
  }
  out["refit"] = {{"compute_factor", fit.compute_factor}, {"reduce_factor", fit.reduce_factor},
                  {"efficiency", {{"gemm", fit.eff.gemm}, {"memory", fit.eff.memory}, {"link", fit.eff.link},
                                  {"per_op_seconds", fit.eff.per_op_seconds},
                                  {"per_rank_step_seconds", fit.eff.per_rank_step_seconds}}}};
  if (p.refit && !setup.cluster) {
    setup.profile.eff = fit.eff;
    if (first) ++setup.profile.refits;
    if (auto st = save_profile(setup.profile_path, setup.profile); !st)
      std::fprintf(stderr, "warning: %s\n", st.error().message.c_str());
    else
      out["profile"] = setup.profile_path;
  }
  return out;
}


// One process of a multi-process job: join (or coordinate) it; process 0 plans and shares
// the plan; every process runs its block of ranks over the TCP fabric; a lost process ends
// the job with a report naming it.
result<training_result> train_processes(const training_job& job, const plan_options& p,
                                        const std::vector<std::string>& caf_arguments) {
  if (p.only) return make_error(errc::invalid_argument, "--plan.only plans in one process: drop --launch.nproc / WORLD_SIZE");
  auto formed = form_process_group(p.dist);
  if (!formed) return formed.error();
  process_group& g = **formed;
  const int world = g.world();
  const bool coordinator = g.process() == 0;
  if (coordinator) {
    std::string who;
    for (const auto& n : g.control->roster())
      who += (who.empty() ? "" : ", ") + std::to_string(n.process) + ": pid " + std::to_string(n.pid) + " at " + n.host + " (" +
             std::to_string(n.cores) + (n.cores == 1 ? " core)" : " cores)");
    std::fprintf(stderr, "job: %d processes joined: %s\n", world, who.c_str());
  }
  // The coordinator plans for world-size ranks unless told otherwise; the others take its plan.
  std::optional<planning_setup> setup;
  result<plan_choice> choice = make_error(errc::closed, "no plan");
  if (coordinator) {
    plan_options q = p;
    if (q.ranks == 0 && q.mode == "auto") q.ranks = world;
    auto s = prepare_planning(job.model, state_slots(job.optimizer), job.batch, job.threads, q);
    choice = s ? choose_plan(*s, q) : result<plan_choice>(s.error());
    if (choice && choice->plan.ranks() % world != 0)
      choice = make_error(errc::invalid_argument, "the plan " + planner::describe(choice->plan) + " has " +
                                                      std::to_string(choice->plan.ranks()) + " ranks, which " +
                                                      std::to_string(world) + " processes cannot split evenly");
    if (s) setup = std::move(*s);
    const std::string text = choice ? choice->to_json().dump() : "error: " + choice.error().message;
    if (auto shared = g.control->broadcast_text(1, text); !shared) return shared.error();
    if (!choice) return choice.error();
  } else {
    auto text = g.control->broadcast_text(1, "");
    if (!text) return text.error();
    if (text->rfind("error: ", 0) == 0) return make_error(errc::invalid_argument, "the coordinator could not plan: " + text->substr(7));
    json j = json::parse(*text, nullptr, false);
    if (j.is_discarded()) return make_error(errc::io_error, "the coordinator's plan is not JSON");
    j.erase("predicted");
    j.erase("how");
    choice = plan_from_json(j, "the coordinator's plan");
    if (!choice) return choice.error();
    choice->how = "from the coordinator";
  }
  auto fabric = g.connect(choice->plan.ranks());
  if (!fabric) return fabric.error();
  std::shared_ptr<transport::fabric> data_plane = *fabric;
  g.control->on_lost([data_plane](const transport::lost_node& n) { data_plane->close(n.describe()); });

  loop_state loop(job);
  loop.quiet = !coordinator;
  if (coordinator)
    if (auto st = loop.metrics.open(job.metrics_path); !st) return st.error();
  training_job with_note = job;
  with_note.note = (job.note.empty() ? "" : job.note + "\n") + "plan: " + planner::describe(choice->plan) + " (" + choice->how +
                   ") over " + std::to_string(world) + " processes (" + p.dist.transport + ")";
  const auto owner = g.owners(choice->plan.ranks());
  auto customize = [&](actors::run_options& o) {
    o.fabric = data_plane;
    o.combine_loss = [&](std::int64_t step, double local) -> result<double> {
      auto total = g.control->sum(16 + static_cast<std::uint64_t>(step), {local});
      if (!total) return total.error();
      return (*total)[0];
    };
    o.gather_pieces = [&](std::vector<tensor> pieces) -> result<std::vector<tensor>> {
      std::vector<std::pair<int, tensor>> mine;
      for (std::size_t r = 0; r < pieces.size(); ++r)
        if (owner[r] == g.process()) mine.emplace_back(static_cast<int>(r), pieces[r]);
      return g.control->gather(2, mine, owner);
    };
    auto inner = o.on_step;
    o.on_step = [&, inner](const actors::step_metrics& m) {
      g.control->set_step(m.step + 2);  // 1-based, the step now in flight
      inner(m);
      const auto& d = p.dist;
      if (!d.signal.empty() && d.signal_rank == g.process() && d.signal_step == m.step + 1) {
        std::fprintf(stderr, "fault: process %d raises SIG%s after step %lld\n", g.process(), d.signal.c_str(),
                     static_cast<long long>(m.step + 1));
        std::fflush(stderr);
        ::raise(d.signal == "KILL" ? SIGKILL : SIGSTOP);
      }
    };
  };
  task_totals totals;
  g.control->set_step(1);
  auto r = train_runtime(with_note, p, *choice, caf_arguments, loop, totals, {}, customize);
  if (!r) {
    // a data-plane error usually arrives just before the control plane's verdict: wait for it
    if (auto lost = g.control->wait_lost(std::chrono::milliseconds(p.dist.heartbeat_timeout_ms + 1000)))
      return make_error(errc::closed, lost->describe());
    return r;
  }
  if (auto st = g.control->finish(std::chrono::seconds(30)); !st) return st.error();
  r->report = coordinator;
  r->plan["processes"] = world;
  if (coordinator && setup && choice->predicted && totals.steps > 0) {
    std::vector<double> steps = totals.step_seconds;
    std::sort(steps.begin(), steps.end());
    r->prediction = {{"predicted_step_s", choice->predicted->step_s}, {"measured_step_s", steps[steps.size() / 2]},
                     {"note", "the cost model is not refit from multi-process runs yet"}};
  }
  return r;
}
}  // namespace

result<training_result> train(const training_job& job, const plan_options& plan,
                              const std::vector<std::string>& caf_arguments) {
  if (plan.mode != "auto" && plan.mode != "serial" && plan.mode != "manual")
    return make_error(errc::invalid_argument, "--plan.mode must be auto, manual or serial, got '" + plan.mode + "'");
  if (!plan.schedule.empty())
    if (auto s = planner::parse_schedule(plan.schedule); !s) return s.error();
  if ((plan.recompute || plan.half_precision) && plan.cluster_file.empty())
    return make_error(errc::invalid_argument, "--plan.recompute and --plan.half-precision plan for a --cluster.file; "
                                              "the runtime here trains in f32 without recomputation");
  if (plan.max_micro_batches < 1 || plan.ranks < 0)
    return make_error(errc::invalid_argument, "--plan.max-micro-batches must be positive and --plan.ranks not negative");
  if (plan.dist.multi_process()) {
    if (plan.mode == "serial") return make_error(errc::invalid_argument, "--plan.mode=serial runs in one process");
    return train_processes(job, plan, caf_arguments);
  }
  loop_state loop(job);
  if (plan.mode == "serial") {
    if (plan.only || !plan.file.empty() || !plan.cluster_file.empty())
      return make_error(errc::invalid_argument, "--plan.mode=serial takes no --plan.only, --plan.file or --cluster.file");
    if (auto st = loop.metrics.open(job.metrics_path); !st) return st.error();
    return train_serial(job, loop);
  }
  const auto planning_start = std::chrono::steady_clock::now();
  auto setup = prepare_planning(job.model, state_slots(job.optimizer), job.batch, job.threads, plan);
  if (!setup) return setup.error();
  auto choice = choose_plan(*setup, plan);
  if (!choice) return choice.error();
  const double planning_s = seconds_since(planning_start);
  if (!plan.list.empty()) {
    std::FILE* f = std::fopen(plan.list.c_str(), "w");
    if (f == nullptr) return make_error(errc::io_error, "cannot write --plan.list file " + plan.list);
    for (const auto& c : choice->candidates) std::fprintf(f, "%s\n", plan_choice::to_json(c, "candidate").dump().c_str());
    std::fclose(f);
  }
  if (plan.only) {
    std::printf("planning for %s%d %s (%s)\n", !setup->cluster && plan.ranks == 0 && setup->search.topo.devices > 1 ? "1 to " : "",
                setup->search.topo.devices, setup->cluster ? "devices" : "ranks on this machine",
                setup->cluster ? plan.cluster_file.c_str() : describe(setup->profile).c_str());
    if (!choice->table.empty()) std::printf("%s", choice->table.c_str());
    training_result r;
    r.plan_only = true;
    r.plan = choice->to_json();
    r.plan["planning_s"] = planning_s;  // calibration included when --cluster.calibrate
    r.plan["parameters"] = setup->analysis->param_bytes / 4.0;
    if (choice->predicted) {
      // model FLOPs utilisation: the step's forward and backward FLOPs (recomputation not
      // counted) over the step time and every device's peak
      const double flops = planner::model_flops(*setup->analysis, job.batch);
      const auto& topo = setup->search.topo;
      r.plan["predicted"]["model_flops_per_step"] = flops;
      r.plan["predicted"]["mfu"] = flops / (choice->predicted->step_s * choice->plan.ranks() * topo.speed.flops_per_s);
    }
    return r;
  }
  if (setup->cluster)
    return make_error(errc::invalid_argument,
                      "training on the devices of --cluster.file needs the multi-process runtime, which is not built "
                      "yet; --plan.only=true plans for them");
  if (auto st = loop.metrics.open(job.metrics_path); !st) return st.error();
  training_job with_note = job;
  char line[320];
  if (choice->predicted)
    std::snprintf(line, sizeof line, "plan: %s (%s, predicted %.4g ms per step)", planner::describe(choice->plan).c_str(),
                  choice->how.c_str(), choice->predicted->step_s * 1e3);
  else
    std::snprintf(line, sizeof line, "plan: %s (%s)", planner::describe(choice->plan).c_str(), choice->how.c_str());
  with_note.note = job.note.empty() ? line : job.note + "\n" + line;
  // Online refit: once after refit_after_steps timed steps (saved, so a run that is stopped
  // later still leaves it behind), and again from every timed step at the end.
  constexpr std::int64_t refit_after_steps = 10;
  bool refit_saved = false;
  task_totals totals;
  auto mid_run = [&](const task_totals& t) {
    if (t.steps != refit_after_steps || t.steps == job.steps - job.warmup) return;
    json early = compare_and_refit(*choice, *setup, plan, t, !refit_saved);
    if (!early.contains("refit")) return;
    refit_saved = refit_saved || early.contains("profile");
    std::fprintf(stderr, "\nrefit after %lld steps: predicted %.4g ms per step, measured %.4g ms; compute x%.3g, reduction x%.3g\n",
                 static_cast<long long>(t.steps), early["predicted_step_s"].get<double>() * 1e3,
                 early["measured_step_s"].get<double>() * 1e3, early["refit"]["compute_factor"].get<double>(),
                 early["refit"]["reduce_factor"].get<double>());
  };
  auto r = train_runtime(with_note, plan, *choice, caf_arguments, loop, totals, mid_run);
  if (!r) return r;
  r->prediction = compare_and_refit(*choice, *setup, plan, totals, !refit_saved);
  return r;
}

}  // namespace cohort::apps
