// One worker's part of one training step: its stage's task order (forward and backward per
// micro-batch, then the amplifier), with pipeline transfers to the neighbouring stages of
// its replica and tensor-parallel rank, and the gradient reduction over its data-parallel
// group. The amplifier hands the reduced gradient piece to the parameter owner (submit);
// the owner applies it only when the whole step has succeeded (commit), into the worker's
// own parameter storage, so a step that fails half-way leaves every parameter untouched
// and is simply redone. With shard_params each rank owns a piece; the next step starts by
// all-gathering the updated pieces.
//
// The caller supplies where inputs come from (the data actor) and who takes the gradient
// (the parameter actor), so the same code runs under the actor runtime and in thread tests.
//
//   auto cm = compile(tiny_mlp, {.dp = 1}, /*batch=*/64);
//   if (!cm) return cm.error();
//   auto program = cm->program(0, 0);
//   if (!program) return program.error();
//   kernels::dispatch_table table = kernels::cpu_kernels();
//   add_comm_kernels(table);
//   auto w = stage_worker::create(std::move(*program), /*slots=*/1, &table, nullptr, comm_context{});
//   if (!w) return w.error();
//   if (auto st = (*w)->load_initial_parameters(*cm->serial, 0); !st) return st;
//   worker_place at{.dp_rank = 0, .stage = 0, .tp_rank = 0};
//   auto batch = tiny_batch(/*step=*/0);              // this replica's rows (one micro-batch here)
//   tensor pending;
//   step_io io;
//   io.inputs = [&](int /*mb*/) -> result<std::map<std::string, tensor>> { return batch; };
//   io.submit = [&](const piece_gradient& g) { pending = g.dense.clone(); return status{}; };   // the parameter actor's part
//   auto r = run_worker_step(**w, cm->schedule[0], cm->plan, cm->batch, at, io, /*step=*/0, 30s);
//   if (!r) return r.error();
//   // ... after every worker is done: the owner applies `pending` (param_shard::update)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actors/param_shard.hpp"
#include "actors/stage_worker.hpp"
#include "actors/task_trace.hpp"
#include "graph/mesh.hpp"
#include "planner/batch_split.hpp"
#include "planner/plan.hpp"
#include "planner/rank_layout.hpp"
#include "planner/schedule.hpp"
#include "planner/task_seconds.hpp"

namespace cohort::actors {

using planner::build_schedule;
using planner::task;
using planner::task_kind;
using planner::to_string;

using worker_place = planner::rank_place;

struct step_io {
  /// The data inputs this stage reads, for micro-batch `mb` of this replica (by input name).
  std::function<result<std::map<std::string, tensor>>(int mb)> inputs;
  /// Takes this worker's piece of the step's summed gradient (valid until the next step
  /// starts); the owner applies it to params_piece() once the step has committed.
  std::function<status(const piece_gradient& grad_piece)> submit;
  /// Called before each task with its index in the order (the runtime's failure injection).
  std::function<void(const task&, std::size_t index)> before_task;
  /// A slower CPU, simulated (the --fault.slow-rank test hook): after each forward and backward
  /// task the thread burns that task's CPU time (slow_factor - 1) times again, so the rank's
  /// compute takes slow_factor times as long while its waits stay as they are (the worker
  /// actor does the same after the optimizer update).
  double slow_factor = 1;
  /// Record each task's span in step_report::spans (a traced step).
  bool trace = false;
  /// Geo mode between exchanges (table_exchange.hpp): the sparse tables' entries are not
  /// gathered; the replica's own go to its parameter owner alone (piece_gradient::local).
  bool local_tables = false;
  /// Async mode: the steps the tables' entries wait after the commit (piece_gradient::delay).
  std::int64_t table_delay = 0;
};

struct step_report {
  /// sum over micro-batches of loss x rows / batch: this replica's share of the
  /// step's loss; only the last stage's tp rank 0 reports one (others leave it at 0).
  double loss_share = 0;
  bool reports_loss = false;
  /// A task's own work in seconds, by kind: forward and backward without waiting for their
  /// inputs; the amplifier's gradient reduction (and a sharded plan's all-gather) without the
  /// hand-over to the parameter owner.
  planner::task_seconds seconds;
  /// The forward and backward tasks' own work in CPU seconds of the worker's thread (its
  /// kernels' threads beside it not counted).
  double cpu_s = 0;
  /// What the forward and backward tasks and the optimizer update of the committed step (at
  /// the step's start) take as one rank alone here, the straggler watch's pace (set by the
  /// worker actor): their CPU seconds where the worker's kernels run on its thread alone —
  /// ranks that share the cores do not lengthen it, a slower core does — else their wall
  /// seconds (the worker has cores of its own). The reduction is left out: it waits for peers.
  double alone_s = 0;
  /// Each task's span, in order, when step_io::trace asked for them.
  std::vector<task_span> spans;
  /// Bytes this worker sent to exchange sparse tables' rows (sync's gather, geo's exchange).
  std::int64_t sparse_bytes = 0;
  /// The version of the tables this step's lookups read: the steps whose table updates were
  /// in them (-1: the stage has no sparse tables). Async mode's staleness is step - version.
  std::int64_t table_version = -1;
};

/// The CPU seconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds();
/// The test hook's slower CPU (step_io::slow_factor): `used` CPU seconds of work become
/// `used * factor` (the thread burns the rest); returns the CPU seconds as the slower CPU took them.
double burn_slower(double used, double factor);

/// `batch` is the step's global batch: micro-batch mb of this replica has split.rows(dp_rank,
/// mb) rows and its loss seed is their share of the batch (planner::batch_split).
result<step_report> run_worker_step(stage_worker& w, const std::vector<task>& order, const planner::parallel_plan& plan,
                                    std::int64_t batch, const worker_place& at, step_io& io, std::uint64_t step,
                                    std::chrono::milliseconds timeout);

/// The [begin, end) of the flat parameter buffer a data-parallel rank updates: all of it,
/// or its near-equal piece with shard_params.
range owned_piece(const planner::parallel_plan& plan, std::int64_t flat_size, int dp_rank);

/// The worker's sparse tables as its parameter owner sees them, for a piece that starts at
/// element `piece_begin` of the flat buffer.
std::vector<sparse_table_grad> sparse_table_grads(stage_worker& w, std::int64_t piece_begin);

/// The worker's parameters that its parameter owner updates (a view of flat_params()).
tensor params_piece(stage_worker& w, const planner::parallel_plan& plan, int dp_rank);

}  // namespace cohort::actors
