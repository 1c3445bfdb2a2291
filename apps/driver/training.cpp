// Serial or actor-runtime training with one progress/metrics path: the plan options, the
// serial reference, the single-process runtime path with the cost model's refit, and the
// dispatch to the multi-process path (training_processes.cpp).
#include "apps/driver/training.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "actors/calibration.hpp"
#include "actors/link_measure.hpp"
#include "apps/driver/joint_plan.hpp"
#include "apps/driver/training_loop.hpp"
#include "kernels/trainer.hpp"
#include "planner/run_refit.hpp"

namespace cohort::apps {

void plan_options::add_to(option_set& opts) {
  opts.add("plan.mode", mode_text,
           "auto (the planner chooses), manual (the --plan.* degrees) or serial (the reference trainer)")
      .add("plan.dp", dp, "data-parallel replicas (0: the planner's choice; manual: 1)")
      .add("plan.tp", tp, "tensor-parallel ranks per stage (0: the planner's choice; manual: 1)")
      .add("plan.pp", pp, "pipeline stages (0: the planner's choice; manual: 1)")
      .add("plan.micro-batches", micro_batches, "micro-batches per step (0: the planner's choice; manual: 1)")
      .add("plan.schedule", schedule, "gpipe or 1f1b (empty: the planner's choice; manual: 1f1b)")
      .add("plan.virtual-stages", virtual_stages,
           "chunks of layers per pipeline rank, interleaved 1F1B (Megatron's virtual stages: the bubble / V, V times "
           "the transfers; micro-batches in whole groups of pp; 0: the planner's choice of 1, 2, 4; manual: 1)")
      .add("plan.shard-params", shard_params, "shard optimizer state over dp (ZeRO); under auto: require it")
      .add("plan.cuts", cuts, "pipeline cuts as forward-node indices (empty: balanced)")
      .add("plan.only", only, "print the ranked plans and the chosen one as JSON; train nothing")
      .add("plan.file", file, "train with this saved plan (JSON as --plan.only prints it)")
      .add("plan.list", list, "write every candidate plan (auto) to this file, one JSON per line, best first")
      .add("plan.ranks", ranks, "devices to plan for on this machine (0: one per core)")
      .add("plan.processes", processes,
           "plan a job of this many processes on this machine, each with --train.threads threads, linked by "
           "--dist.transport (with --plan.only; a job started with --launch.nproc plans for its own processes)")
      .add("plan.max-micro-batches", max_micro_batches, "the most micro-batches the planner considers")
      .add("plan.refit", refit, "refit the cost model from this run's task times and save it with the profile")
      .add("plan.half-precision", half_precision, "plan for mixed precision (f16 FLOP/s, 2-byte activations)")
      .add("plan.recompute", recompute, "let the planner recompute activations (cluster files only: not run here yet)")
      .add("plan.assume-overlap", assume_overlap,
           "plan for a runtime that overlaps tp collectives and/or the dp reduction with compute: none, tp, dp or "
           "tp,dp (cluster files only: cohort's runtime overlaps neither)")
      .add("plan.assume-sequence-parallel", assume_sequence_parallel,
           "plan for a runtime that splits what each tensor-parallel rank would repeat (layer norms, residuals, "
           "dropout, the loss) and its activations over the ranks by sequence, as Megatron's --sequence-parallel "
           "(cluster files only)")
      .add("plan.assume-f32-gradients", assume_f32_gradients,
           "plan for a runtime that keeps and reduces gradients in f32 under mixed precision, as Megatron does for "
           "bf16 (cluster files only)")
      .add("plan.assume-f32-loss", assume_f32_loss,
           "plan for a runtime that computes the loss in f32, as separate passes over each tp rank's share of the "
           "vocabulary, as Megatron's vocab-parallel cross-entropy (cluster files only)")
      .add("plan.assume-even-layers", assume_even_layers,
           "plan for a runtime that gives every pipeline stage the same number of layers, the embedding with the "
           "first and the output layer with the last, as Megatron does by default (cluster files only; interleaved "
           "plans of 1 to 8 chunks whose stages divide the layers)")
      .add("plan.always-recompute", always_recompute,
           "consider only plans that recompute activations, as a published run did (cluster files only)")
      .add("cluster.file", cluster_file, "plan for this cluster (Paddle's or cohort's JSON, docs/cluster.md)")
      .add("cluster.profile", cluster_profile, "this machine's measured profile (default ~/.cache/cohort/profile.json)")
      .add("cluster.device-profile", device_profile,
           "the efficiencies of --cluster.file's devices (configs/devices/*.json; default: the profile the "
           "cluster file names, else uncalibrated defaults)")
      .add("cluster.calibrate", cluster_calibrate,
           "measure this machine (GEMM, memory, link, the runtime's own overhead; a few seconds) and save the profile")
      .add("fault.max-restarts", max_restarts, "redo a failed step at most this many times")
      .add("fault.timeout-ms", timeout_ms, "the longest any wait inside a step may take")
      .add("fault.inject-rank", inject_rank, "test hook: this worker rank fails ... (-1: off)")
      .add("fault.inject-step", inject_step, "... at this step ...")
      .add("fault.inject-task", inject_task, "... before this task of its schedule")
      .add("plan.change-at", change_at, "change the plan of the running job after these many steps (e.g. 10,20)")
      .add("plan.change-to", change_to,
           "the plan of each change: a saved plan file (as --plan.only prints it), "
           "serial (one rank) or auto (the planner's choice), comma-separated");
  dist.add_to(opts);
  checkpoint.add_to(opts);
  trace.add_to(opts);
  report.add_to(opts);
  prometheus.add_to(opts);
}

status plan_options::finish(const option_set& opts) {
  auto m = planner::parse_plan_mode(mode_text);
  if (!m) return m.error();
  mode = *m;
  if (!opts.was_set("plan.mode"))
    for (const char* key : {"plan.dp", "plan.tp", "plan.pp", "plan.micro-batches", "plan.schedule", "plan.shard-params",
                            "plan.cuts", "plan.virtual-stages"})
      if (opts.was_set(key)) mode = planner::plan_mode::manual;
  if (mode == planner::plan_mode::automatic && !cuts.empty())
    return make_error(errc::invalid_argument,
                      "--plan.cuts: the auto planner cuts every plan it considers itself; give the cuts with "
                      "--plan.mode=manual (or in a --plan.file)");
  change_targets = split_commas(change_to);
  if (change_targets.size() != change_at.size())
    return make_error(errc::invalid_argument,
                      "--plan.change-at has " + std::to_string(change_at.size()) + " steps and --plan.change-to " +
                          std::to_string(change_targets.size()) + " plans: give one plan per step");
  for (std::size_t i = 0; i < change_at.size(); ++i) {
    if (change_at[i] < 1 || (i > 0 && change_at[i] <= change_at[i - 1]))
      return make_error(errc::invalid_argument, "--plan.change-at: steps must be positive and ascending");
    if (change_targets[i].empty()) return make_error(errc::invalid_argument, "--plan.change-to: an empty plan");
  }
  if (processes < 1) return make_error(errc::invalid_argument, "--plan.processes must be at least 1");
  if (virtual_stages < 0 || virtual_stages > 64)
    return make_error(errc::invalid_argument, "--plan.virtual-stages must be 0 (the planner's choice) to 64, got " +
                                                  std::to_string(virtual_stages));
  if (auto st = checkpoint.finish(); !st) return st;
  if (auto st = trace.finish(); !st) return st;
  if (auto st = report.finish(); !st) return st;
  if (auto st = prometheus.finish(); !st) return st;
  return dist.finish(opts);
}

std::vector<actors::plan_change> plan_changes(const plan_options& p) {
  std::vector<actors::plan_change> out;
  for (std::size_t i = 0; i < p.change_at.size(); ++i) {
    actors::plan_change c;
    c.at_step = p.change_at[i];
    c.label = p.change_targets[i];
    planner::plan_request& r = c.request;
    r = p;  // the planner's other settings (cluster, limits) as the first plan had them
    r.dp = r.tp = r.pp = r.micro_batches = r.virtual_stages = 0;
    r.schedule.clear();
    r.shard_params = false;
    r.cuts.clear();
    r.file.clear();
    r.only = false;
    if (c.label == "serial")
      r.mode = planner::plan_mode::manual;  // every degree 1
    else if (c.label == "auto")
      r.mode = planner::plan_mode::automatic;  // the planner's choice
    else
      r.mode = planner::plan_mode::manual, r.file = c.label;
    out.push_back(std::move(c));
  }
  return out;
}

result<planner::planning_setup> prepare_planning(const training_job& job, const plan_options& p, int threads) {
  const std::string path = p.cluster_profile.empty() ? planner::default_profile_path() : p.cluster_profile;
  planner::machine_profile profile;
  if (p.cluster_calibrate) {
    phase_progress measuring("calibration", "measurements", !p.dist.reports());
    profile = actors::calibrate(threads, measuring.callback());
    measuring.finish("GEMM, memory, cache, optimizer, link and runtime measured");
    if (auto st = planner::save_profile(path, profile); !st) return st.error();
    profile.source = "calibrated now, saved to " + path;
  } else {
    auto loaded = planner::load_profile(path);
    if (!loaded) return loaded.error();
    profile = *loaded;
    if (profile.source == "defaults")
      profile.source = "defaults: no profile at " + path + "; --cluster.calibrate measures one";
  }
  // a job of several processes here: the link between them, measured once per data plane
  // (kept with the profile when there is a file to keep it in); again where a measurement under
  // load kept no latency, which no refit can scale
  const auto kept = profile.process_links.find(p.data_plane);
  if (p.processes > 1 && p.cluster_file.empty() &&
      (kept == profile.process_links.end() || !(kept->second.cost.latency_s > 0))) {
    auto between = actors::measure_process_link(p.data_plane);
    if (between) {
      profile.process_links[p.data_plane].cost = *between;
      const bool keep = std::filesystem::exists(path);
      if (keep)
        if (auto st = planner::save_profile(path, profile); !st) return st.error();
      std::fprintf(stderr, "planner: the %s link between processes measured: %.2f GB/s + %.1f us%s\n",
                   p.data_plane.c_str(), between->bandwidth_bytes_per_s / 1e9, between->latency_s * 1e6,
                   keep ? (", saved to " + path).c_str() : "");
    } else {  // the plan is still made, with the unmeasured figure, and the job says so
      std::fprintf(stderr,
                   "warning: planner: the %s link between processes was not measured (%s); it is taken as "
                   "%.2f GB/s + %.0f us\n",
                   p.data_plane.c_str(), between.error().message.c_str(),
                   planner::unmeasured_process_link.bandwidth_bytes_per_s / 1e9,
                   planner::unmeasured_process_link.latency_s * 1e6);
    }
  }
  planner::plan_request request = p;  // the tables priced as the runtime will run them
  request.sparse_tables = job.sparse_tables && kernels::sparse_update_problem(job.optimizer).empty();
  return planner::prepare_planning(job.model, state_slots(job.optimizer), job.batch, threads, request,
                                   std::move(profile), path);
}

namespace {

result<training_result> train_serial(const training_job& job, loop_state& loop) {
  graph g;
  var loss = job.model(g, job.batch);
  if (auto st = g.check(); !st) return st.error();
  const std::string not_sparse = job.sparse_tables ? kernels::sparse_update_problem(job.optimizer) : "";
  const bool sparse = job.sparse_tables && not_sparse.empty();
  auto tr = kernels::serial_trainer::create(
      g, loss, {.optimizer = job.optimizer, .seed = job.seed, .threads = job.threads, .sparse_tables = sparse});
  if (!tr) return tr.error();
  if (!job.note.empty()) std::fprintf(stderr, "%s\n", job.note.c_str());
  if (!not_sparse.empty())
    std::fprintf(stderr, "%s: embedding tables updated densely: %s\n", job.app.c_str(), not_sparse.c_str());
  for (std::int64_t step = 0; step < job.steps; ++step) {
    for (auto& [name, t] : job.data(step)) (*tr)->input(name).copy_from(t);
    auto l = (*tr)->step();
    if (!l) return make_error(l.error().code, "step " + std::to_string(step + 1) + ": " + l.error().message);
    loop.on_step(step, *l);
    if (job.evaluate_every > 0 && (step + 1) % job.evaluate_every == 0)
      if (auto st = evaluate_between_steps(job, loop, step + 1, (*tr)->parameters()); !st) return st.error();
  }
  loop.finish();
  loop.out.parameters = (*tr)->parameters();
  loop.out.plan = {{"mode", "serial"}, {"ranks", 1}};
  if (job.sparse_tables) loop.out.plan["sparse_tables"] = sparse;
  return std::move(loop.out);
}

}  // namespace

result<training_result> train(const training_job& job, const plan_options& plan,
                              const std::vector<std::string>& caf_arguments) {
  if (!plan.schedule.empty())
    if (auto s = planner::parse_schedule(plan.schedule); !s) return s.error();
  if ((plan.recompute || plan.always_recompute || plan.half_precision || !plan.assume_overlap.empty() ||
       plan.assume_sequence_parallel || plan.assume_f32_gradients || plan.assume_f32_loss || plan.assume_even_layers) &&
      plan.cluster_file.empty())
    return make_error(errc::invalid_argument,
                      "--plan.recompute, --plan.always-recompute, --plan.assume-overlap, "
                      "--plan.assume-sequence-parallel, --plan.assume-f32-gradients, --plan.assume-f32-loss, "
                      "--plan.assume-even-layers and --plan.half-precision plan "
                      "for a --cluster.file; "
                      "the runtime here trains in f32 without recomputation");
  if (plan.max_micro_batches < 1 || plan.ranks < 0)
    return make_error(errc::invalid_argument,
                      "--plan.max-micro-batches must be positive and --plan.ranks not negative");
  if (job.evaluate_every < 0) return make_error(errc::invalid_argument, "--eval.every must not be negative");
  if (job.evaluate_every > 0 && !job.evaluate)
    return make_error(errc::invalid_argument, "--eval.every: " + job.app + " has nothing to evaluate here");
  if (plan.mode == planner::plan_mode::serial &&
      (plan.checkpoint.every > 0 || plan.checkpoint.resumes() || !plan.checkpoint.init_from.empty()))
    return make_error(errc::invalid_argument,
                      "--checkpoint.every, --checkpoint.resume and --init.from need the actor runtime: "
                      "--plan.mode=serial runs the reference trainer");
  if (job.sparse_tables && plan.mode != planner::plan_mode::serial && !plan.only && plan.dist.reports())
    if (const std::string why = kernels::sparse_update_problem(job.optimizer); !why.empty())
      std::fprintf(stderr, "%s: embedding tables updated densely: %s\n", job.app.c_str(), why.c_str());
  training_job started = job;
  auto start = std::make_shared<start_point>();
  if (!plan.only && !plan.dist.replacement) {  // a replacement's state comes from the running job
    auto found = find_start(plan.checkpoint, job.steps, !plan.dist.reports());
    if (!found) return found.error();
    *start = std::move(*found);
    started.first_step = start->first_step;
  }
  if (plan.dist.multi_process()) {
    if (plan.mode == planner::plan_mode::serial)
      return make_error(errc::invalid_argument, "--plan.mode=serial runs in one process");
    return train_processes(started, plan, caf_arguments, start);
  }
  return train_here(started, plan, caf_arguments, start);
}

result<training_result> train_here(const training_job& job, const plan_options& plan,
                                   const std::vector<std::string>& caf_arguments,
                                   const std::shared_ptr<const start_point>& start) {
  loop_state loop(job);
  if (plan.mode == planner::plan_mode::serial) {
    if (!plan.change_at.empty())
      return make_error(errc::invalid_argument,
                        "--plan.change-at needs the actor runtime: --plan.mode=serial runs the reference trainer");
    if (plan.only || !plan.file.empty() || !plan.cluster_file.empty())
      return make_error(errc::invalid_argument,
                        "--plan.mode=serial takes no --plan.only, --plan.file or --cluster.file");
    if (auto st = loop.metrics.open(job.metrics_path); !st) return st.error();
    planner::plan_choice serial;
    serial.how = "serial (the reference trainer)";
    start_report(loop, plan, serial, 1);
    if (auto st = start_live_metrics(loop, plan, serial, 1, {}, {}, {}); !st) return st.error();
    return train_serial(job, loop);
  }
  const auto planning_start = std::chrono::steady_clock::now();
  if (plan.processes > 1 && !plan.only)
    return make_error(errc::invalid_argument,
                      "--plan.processes plans a job of several processes with --plan.only; --launch.nproc=" +
                          std::to_string(plan.processes) + " runs one");
  plan_options here = plan;  // --plan.processes: the job's threads, one rank per process unless told
  here.data_plane = to_string(plan.dist.transport);
  if (here.processes > 1 && here.ranks == 0 && here.mode == planner::plan_mode::automatic) here.ranks = here.processes;
  const int planned_threads = job.threads * static_cast<int>(here.processes);
  std::shared_ptr<planner::planning_setup> setup;
  result<planner::plan_choice> choice = make_error(errc::invalid_argument, "not planned");
  std::optional<joint_plan> joint;  // a model whose tables depend on the degree: chosen with the plan
  if (plans_jointly(job, here)) {
    auto j = plan_jointly(job, here, planned_threads);
    if (!j) return j.error();
    joint = std::move(*j);
    if (plan.dist.reports()) std::fprintf(stderr, "%s\n", joint->explanation.c_str());
    setup = joint->setup;
    choice = joint->choice;
  } else {
    auto prepared = prepare_planning(job, here, planned_threads);
    if (!prepared) return prepared.error();
    setup = std::make_shared<planner::planning_setup>(std::move(*prepared));
    choice = planner::choose_plan(*setup, here);
    if (!choice) return choice.error();
  }
  const training_job& chosen = joint ? joint->job : job;
  const double planning_s = seconds_since(planning_start);
  if (!plan.list.empty()) {
    std::FILE* f = std::fopen(plan.list.c_str(), "w");
    if (f == nullptr) return make_error(errc::io_error, "cannot write --plan.list file " + plan.list);
    for (const auto& c : choice->candidates)
      std::fprintf(f, "%s\n", planner::plan_choice::to_json(c, "candidate").dump().c_str());
    std::fclose(f);
  }
  if (plan.only) {
    const std::string over =
        here.processes > 1 ? " in " + std::to_string(here.processes) + " processes (" + here.data_plane + ")" : "";
    std::printf("planning for %s%d %s%s (%s)\n",
                !setup->cluster && here.ranks == 0 && setup->search.topo.devices > 1 ? "1 to " : "",
                setup->search.topo.devices, setup->cluster ? "devices" : "ranks on this machine", over.c_str(),
                setup->cluster ? plan.cluster_file.c_str() : planner::describe(setup->profile).c_str());
    if (setup->cluster)
      std::printf("device efficiencies: %s (%s)\n", setup->devices_profile.model.c_str(),
                  setup->devices_profile.source.c_str());
    if (!choice->table.empty()) std::printf("%s", choice->table.c_str());
    training_result r;
    r.plan_only = true;
    r.plan = choice->to_json();
    r.plan["planning_s"] = planning_s;  // calibration included when --cluster.calibrate
    // what the planner actor's re-plan costs: the same search again, from the cached analysis
    const auto replan_start = std::chrono::steady_clock::now();
    if (auto again = planner::choose_plan(*setup, plan); again) r.plan["replan_s"] = seconds_since(replan_start);
    r.plan["parameters"] = setup->analysis->param_bytes / 4.0;
    if (joint) {
      r.plan["by_tp"] = joint->candidates;
      r.model_summary = joint->model_summary;
    }
    if (setup->cluster) r.plan["device_profile"] = setup->devices_profile.source;
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
  start_report(loop, plan, *choice, 1);
  if (auto st = start_live_metrics(loop, plan, *choice, 1, {}, {}, {}); !st) return st.error();
  training_job with_note = chosen;
  char line[320];
  if (choice->predicted)
    std::snprintf(line, sizeof line, "plan: %s (%s, predicted %.4g ms per step)",
                  planner::describe(choice->plan).c_str(), choice->how.c_str(), choice->predicted->step_s * 1e3);
  else
    std::snprintf(line, sizeof line, "plan: %s (%s)", planner::describe(choice->plan).c_str(), choice->how.c_str());
  with_note.note = chosen.note.empty() ? line : chosen.note + "\n" + line;
  // the online refit is the planner actor's: once after 10 timed steps (saved, so a run that is
  // stopped later still leaves it behind), and from every timed step at the end
  auto refit =
      std::make_shared<planner::online_refit>(*choice, setup, plan.refit, job.first_step + job.warmup, job.steps);
  auto r = train_runtime(with_note, plan, *choice, caf_arguments, loop, *start, [&](actors::run_options& o) {
    o.changes = plan_changes(plan);
    o.planning = setup;
    o.refit = refit;
  });
  if (r && joint) {
    r->plan["by_tp"] = joint->candidates;
    r->model_summary = joint->model_summary;
  }
  if (r && loop.trace)
    if (auto st = write_trace(plan.trace.file, loop.trace->events(),
                              {{"plan", planner::describe(choice->plan)}, {"processes", 1}});
        !st)
      return st.error();
  return r;
}

}  // namespace cohort::apps
