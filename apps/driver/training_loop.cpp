// One run on the actor runtime, with the progress/metrics bookkeeping of apps/training_loop.hpp.
#include "apps/driver/training_loop.hpp"

#include "apps/driver/plan_step_times.hpp"

#include "actors/actor_system.hpp"
#include "apps/driver/metrics_server.hpp"
#include "kernels/optimizer.hpp"
#include "transport/auth.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace cohort::apps {

status start_live_metrics(loop_state& loop, const plan_options& p, const planner::plan_choice& choice, int processes,
                          std::function<std::uint64_t()> data_plane_bytes,
                          std::function<std::uint64_t()> control_plane_bytes, std::function<int()> live_processes) {
  if (!p.prometheus.on()) return {};
  auto secret = transport::load_job_secret();
  if (!secret) return secret.error();
  auto live = std::make_shared<live_metrics>();
  live->start(loop.job.app, choice.how.rfind("serial", 0) == 0 ? "serial" : planner::describe(choice.plan), processes,
              std::string(loop.job.rate_unit) == "tokens/s" ? "tokens" : "samples",
              choice.predicted ? choice.predicted->step_s : 0.0, loop.job.steps);
  live->sources(std::move(data_plane_bytes), std::move(control_plane_bytes), std::move(live_processes));
  auto server = metrics_server::start(p.prometheus.listen, *secret, [live] { return live->text(); });
  if (!server) return server.error();
  if (!loop.quiet)
    std::fprintf(
        stderr, "metrics: http://%s/metrics\n",
        (p.prometheus.listen.substr(0, p.prometheus.listen.rfind(':')) + ":" + std::to_string((*server)->port()))
            .c_str());
  loop.live = live;
  loop.out.metrics_endpoint = std::shared_ptr<metrics_server>(std::move(*server));
  return {};
}

void start_report(loop_state& loop, const plan_options& p, const planner::plan_choice& choice, int processes) {
  if (!p.report.on()) return;
  auto r = std::make_shared<run_record>();
  r->app = loop.job.app;
  r->plan = choice.how.rfind("serial", 0) == 0 ? "serial" : planner::describe(choice.plan);
  r->how = choice.how;
  r->table = choice.table;
  if (choice.predicted) r->predicted = choice.to_json()["predicted"];
  r->layout = choice.plan;
  r->processes = processes;
  r->total_steps = loop.job.steps;
  r->first_step = loop.job.first_step;
  r->warmup = loop.job.warmup;
  r->rate_unit = loop.job.rate_unit;
  loop.report = r;
  loop.report_path = p.report.file;
  loop.report_every_s = p.report.every_s;
  loop.out.report_page = r;
}

// (the clocks move on by the evaluation's time, as the PyTorch peers leave theirs out)
status evaluate_between_steps(const training_job& job, loop_state& loop, std::int64_t steps_done,
                              const parameter_store& params) {
  const auto began = std::chrono::steady_clock::now();
  auto figures = job.evaluate(params);
  if (!figures)
    return make_error(figures.error().code,
                      "evaluation after step " + std::to_string(steps_done) + ": " + figures.error().message);
  const auto spent = std::chrono::steady_clock::now() - began;
  loop.start += spent;
  loop.timed_start += spent;
  json rec = {{"event", "evaluation"}, {"step", steps_done}, {"samples", job.first_step * job.batch + loop.samples}};
  std::string line;
  for (auto& [k, v] : figures->items()) {
    rec[k] = v;
    char b[96];
    std::snprintf(b, sizeof b, "%s%s %.4f", line.empty() ? "" : ", ", k.c_str(), v.is_number() ? v.get<double>() : 0.0);
    line += b;
  }
  loop.metrics.write(rec);
  if (!loop.quiet)
    std::fprintf(stderr, "\n%s: after step %lld: %s\n", job.app.c_str(), static_cast<long long>(steps_done),
                 line.c_str());
  return {};
}

result<training_result> train_runtime(const training_job& job, const plan_options& p,
                                      const planner::plan_choice& choice, const std::vector<std::string>& caf_arguments,
                                      loop_state& loop, const start_point& start,
                                      const std::function<void(actors::run_options&)>& customize) {
  actors::run_options o;
  o.plan = choice.plan;
  o.batch = job.batch;
  if (p.dist.batch_mode == "scale") o.scale_base_dp = choice.plan.dp;  // --train.batch is the first plan's
  o.steps = job.steps;
  o.optimizer = job.optimizer;
  o.seed = job.seed;
  o.threads = job.threads;
  o.timeout = std::chrono::milliseconds(p.timeout_ms);
  o.max_restarts = static_cast<int>(p.max_restarts);
  o.stage_cuts = choice.cuts;
  o.compile.sparse_tables = job.sparse_tables && kernels::sparse_update_problem(job.optimizer).empty();
  o.exchange = job.exchange;
  o.inject = {static_cast<int>(p.inject_rank), p.inject_step, static_cast<std::size_t>(p.inject_task)};
  if (p.trace.on()) loop.trace = std::make_shared<trace_recorder>(loop.process);
  if (loop.trace || loop.report) {
    // the report's timeline takes three steps after the warm-up (of the traced ones, when tracing)
    const std::int64_t first = job.first_step + job.warmup;
    o.trace = loop.trace ? p.trace.steps_from(job.first_step) : actors::trace_window{first, first + 2};
    o.on_spans = [trace = loop.trace, report = loop.report](int rank, const planner::rank_place& at, std::int64_t step,
                                                            std::vector<actors::task_span>& spans) {
      if (report) report->add_spans(rank, at, step, spans);
      if (trace) trace->add_spans(rank, at, step, spans);
    };
  }
  // each plan's step times and prediction, for its transition's before and after
  auto times = std::make_shared<plan_step_times>();
  auto awaiting_after = std::make_shared<std::optional<std::size_t>>();  // the transition to complete
  auto predicted = std::make_shared<double>(choice.predicted ? choice.predicted->step_s : 0.0);
  auto fill_after = [&loop, times, awaiting_after] {
    if (!*awaiting_after || !times->median()) return;
    auto& t = loop.out.transitions[**awaiting_after];
    t["measured_step_s_after"] = *times->median();
    t["measured_steps_after"] = times->count();
    awaiting_after->reset();
  };
  o.on_step = [&, times, awaiting_after, fill_after](const actors::step_metrics& m) {
    times->add(m.seconds);
    if (*awaiting_after && times->count() >= plan_step_times::after_steps) fill_after();
    // per-step timings in the metrics file: the slowest worker's task seconds and every rank's
    double busiest = 0;
    json tasks = json::array();
    for (const auto& t : m.task_seconds) {
      busiest = std::max(busiest, t.total());
      tasks.push_back({t.forward_s, t.backward_s, t.update_s});
    }
    loop.on_step(
        m.step, static_cast<float>(m.loss),
        {{"step_s", m.seconds}, {"busiest_worker_s", busiest}, {"task_s", tasks}, {"generation", m.generation}}, &m);
  };
  o.on_transition = [&](const actors::transition_record& t) {
    if (loop.report) loop.report->mark(t.step, "plan change", t.from + " -> " + t.to);
    if (loop.live) loop.live->transition(t.to);
    if (loop.trace)
      loop.trace->mark("plan change", {{"step", t.step},
                                       {"cause", t.cause},
                                       {"from", t.from},
                                       {"to", t.to},
                                       {"seconds", t.seconds},
                                       {"bytes_moved", t.bytes_moved}});
    loop.out.transitions.push_back(
        {{"step", t.step},
         {"cause", t.cause},
         {"from", t.from},
         {"to", t.to},
         {"seconds", t.seconds},
         {"replan_s", t.replan_seconds},
         {"prepare_s", t.prepare_seconds},
         {"move_s", t.move_seconds},
         {"connect_s", t.connect_seconds},
         {"bytes_moved", t.bytes_moved},
         {"bytes_across_processes", t.bytes_across_processes},
         {"param_actors", {{"kept", t.params_kept}, {"spawned", t.params_spawned}, {"retired", t.params_retired}}},
         {"workers", {{"spawned", t.workers_spawned}, {"retired", t.workers_retired}}},
         {"plan", t.plan}});
    if (!t.leaving.empty()) loop.out.transitions.back()["leaving"] = t.leaving;
    if (!t.joining.empty()) loop.out.transitions.back()["joining"] = t.joining;
    if (t.batch > 0) loop.out.transitions.back()["batch"] = t.batch, loop.out.transitions.back()["lr"] = t.lr;
    if (!t.moved.empty()) loop.out.transitions.back()["moved"] = t.moved, loop.out.transitions.back()["why"] = t.why;
    {                // predicted and measured step time before and after (the after once the new plan has run)
      fill_after();  // a change before the last one's steps were counted: what there is
      auto& rec = loop.out.transitions.back();
      rec["predicted_step_s_before"] = *predicted > 0 ? json(*predicted) : json(nullptr);
      rec["predicted_step_s_after"] = t.predicted_step_s > 0 ? json(t.predicted_step_s) : json(nullptr);
      rec["measured_step_s_before"] = times->median() ? json(*times->median()) : json(nullptr);
      rec["measured_step_s_after"] = nullptr;
      *predicted = t.predicted_step_s;  // unknown for a plan kept on fewer processes
      times->restart();
      *awaiting_after = loop.out.transitions.size() - 1;
      if (!loop.quiet) {  // an event line in the metrics file, beside the steps (its "after" in the summary)
        json event = rec;
        event.erase("plan");
        event["event"] = "transition";
        loop.metrics.write(event);
      }
    }
    const std::string why = t.cause == "loss"    ? " (for the processes that remain)"
                            : t.cause == "leave" ? " (" + t.leaving + " leaves the job)"
                            : t.cause == "join"  ? " (" + t.joining + " joined the job)"
                            : !t.moved.empty()   ? " (" + t.moved + ": " + t.why + ")"
                                                 : "";
    if (!loop.quiet)
      std::fprintf(stderr,
                   "\nplan change after step %lld%s: %s -> %s in %.3f s (re-plan %.3f s, %.0f bytes moved, %d of "
                   "%d parameter actors kept)\n",
                   static_cast<long long>(t.step), why.c_str(), t.from.c_str(), t.to.c_str(), t.seconds,
                   t.replan_seconds, t.bytes_moved, t.params_kept, t.params_kept + t.params_spawned);
  };
  set_checkpointing(p.checkpoint, start, o);
  if (o.checkpoint)  // the writer's bytes, shown on the training line while it writes
    o.checkpoint->write_progress = [meter = loop.writing](std::int64_t done, std::int64_t total) {
      if (meter->total.load() != total || done < meter->done.load())  // a new file
        meter->started_ns = std::chrono::steady_clock::now().time_since_epoch().count();
      meter->total = total;
      meter->done = done;
    };
  if (start.checkpoint) loop.out.resumed_from = {{"path", start.checkpoint->dir}, {"step", start.first_step}};
  o.on_checkpoint = [&](const actors::checkpoint_record& c) {
    json rec = {{"step", c.step}, {"snapshot_s", c.snapshot_seconds}};
    if (c.error.empty()) {
      rec["path"] = c.path;
      rec["write_s"] = c.write_seconds;
      rec["bytes"] = c.bytes;
    } else {
      rec["error"] = c.error;
    }
    loop.out.checkpoints.push_back(rec);
    if (loop.trace) loop.trace->mark("checkpoint", rec);
    if (loop.report) loop.report->mark(c.step, "checkpoint", c.error.empty() ? c.path : "failed: " + c.error);
    if (loop.live) loop.live->checkpoint(c.error.empty());
    if (loop.quiet) return;
    if (c.error.empty())
      std::fprintf(stderr,
                   "\ncheckpoint after step %lld: %s (%.0f bytes here, snapshot %.4f s, write %.3f s, %.0f MB/s)\n",
                   static_cast<long long>(c.step), c.path.c_str(), c.bytes, c.snapshot_seconds, c.write_seconds,
                   c.write_seconds > 0 ? c.bytes / c.write_seconds / 1e6 : 0.0);
    else
      std::fprintf(stderr, "\ncheckpoint after step %lld FAILED: %s (the previous checkpoints are kept)\n",
                   static_cast<long long>(c.step), c.error.c_str());
  };
  o.on_recovery = [&](const actors::recovery_record& c) {
    if (loop.report) loop.report->mark(c.step, "recovery", c.lost + " lost (" + c.cause + "), from a " + c.source);
    if (loop.live) loop.live->recovery();
    if (loop.trace)
      loop.trace->mark("recovery",
                       {{"step", c.step}, {"lost", c.lost}, {"cause", c.cause}, {"recover_s", c.recover_s}});
    loop.out.recoveries.push_back({{"step", c.step},
                                   {"lost", c.lost},
                                   {"cause", c.cause},
                                   {"detect_s", c.detect_s},
                                   {"recover_s", c.recover_s},
                                   {"steps_redone", c.steps_redone},
                                   {"interrupted", c.interrupted},
                                   {"plan_before", c.plan_before},
                                   {"plan_after", c.plan_after},
                                   {"source", c.source},
                                   {"bytes_moved", c.bytes_moved}});
    if (!c.restored_from.empty()) loop.out.recoveries.back()["restored_from"] = c.restored_from;
    if (!c.replan.empty()) loop.out.recoveries.back()["replan"] = c.replan;
    if (!c.replacement.empty()) loop.out.recoveries.back()["replacement"] = c.replacement;
    if (!c.tables.empty()) loop.out.recoveries.back()["tables"] = c.tables;
    if (!loop.quiet) {  // an event line in the metrics file too, beside the steps
      json event = loop.out.recoveries.back();
      event["event"] = "recovery";
      loop.metrics.write(event);
    }
    if (!loop.quiet) {
      const std::string from = c.restored_from.empty() ? "" : " (" + c.restored_from + ")";
      const std::string redone =
          c.source == "checkpoint"         ? "the " + std::to_string(c.steps_redone) + " steps since it redone"
          : c.interrupted == "plan change" ? "the plan change it interrupted dropped (asked for again), no step redone"
                                           : "the interrupted step redone";
      std::fprintf(stderr,
                   "\nrecovered at step %lld: %s lost (%s); its ranks restored from a %s%s on the processes that "
                   "remain in %.3f s, %s\n",
                   static_cast<long long>(c.step), c.lost.c_str(), c.cause.c_str(), c.source.c_str(), from.c_str(),
                   c.recover_s, redone.c_str());
    }
    if (!loop.quiet && !c.replacement.empty())
      std::fprintf(stderr, "a replacement took the place of %s: the plan and the placement stay\n",
                   c.replacement.c_str());
    if (!loop.quiet && !c.tables.empty()) std::fprintf(stderr, "embedding tables: %s\n", c.tables.c_str());
    if (!loop.quiet && !c.replan.empty())
      std::fprintf(stderr, "re-plan for the processes that remain: %s\n", c.replan.c_str());
  };
  o.on_start = [&] {
    if (!job.note.empty() && !loop.quiet) std::fprintf(stderr, "%s\n", job.note.c_str());
  };
  if (job.evaluate_every > 0 && job.evaluate) {  // every process gathers; the coordinator evaluates
    o.evaluate_every = job.evaluate_every;
    // asked on every process, answered where the job's reports are: process 0, or the process
    // that took over from it (loop.quiet turns false there)
    o.on_evaluate = [&job, &loop](std::int64_t steps_done, const parameter_store& params) -> status {
      if (loop.quiet) return {};
      return evaluate_between_steps(job, loop, steps_done, params);
    };
  }
  if (customize) customize(o);

  auto cfg = actors::system_config(job.threads, caf_arguments);
  if (!cfg) return cfg.error();
  caf::actor_system sys{**cfg};
  auto data = job.data;
  auto r = actors::train(
      sys, job.model, [data](std::int64_t step) -> result<std::map<std::string, tensor>> { return data(step); }, o);
  if (!r) return r.error();
  fill_after();  // the last change's steps, however few
  loop.finish();
  loop.out.restarts = r->restarts;
  loop.out.left_after = r->left_after;
  if (!r->prediction.empty()) loop.out.prediction = std::move(r->prediction);
  loop.out.parameters = std::move(r->parameters);
  loop.out.plan = choice.to_json();
  loop.out.plan["cuts"] = r->cuts;  // what ran: the planner's cuts (compile() asks it when none were given)
  if (job.sparse_tables) loop.out.plan["sparse_tables"] = o.compile.sparse_tables;
  if (job.sparse_tables) {
    loop.out.plan["exec"] = {{"mode", actors::to_string(o.exchange.mode)}};
    if (o.exchange.geo()) {
      loop.out.plan["exec"]["geo_steps"] = o.exchange.geo_steps;
      loop.out.plan["exec"]["geo_deltas"] = o.exchange.geo_deltas == actors::delta_encoding::bf16 ? "bf16" : "f32";
    }
    if (o.exchange.mode == actors::exchange_mode::async) loop.out.plan["exec"]["staleness"] = o.exchange.staleness;
  }
  loop.out.sparse_bytes = r->sparse_bytes;
  loop.out.max_table_staleness = r->max_table_staleness;
  return std::move(loop.out);
}

}  // namespace cohort::apps
