// The step loop of a worker: tasks in schedule order, transfers, reduction, update.
#include "actors/worker_step.hpp"

#include <time.h>

#include <algorithm>

#include "transport/collectives.hpp"

namespace cohort::actors {
namespace {

constexpr std::uint64_t pipeline_tag_space = 2;
constexpr std::uint64_t dp_tag_space = 3;
constexpr std::uint64_t sparse_tag_space = 4;

std::uint64_t transfer_tag(int micro_batch, value_id serial) {
  return (pipeline_tag_space << 40) | (static_cast<std::uint64_t>(micro_batch) << 24) |
         static_cast<std::uint64_t>(serial);
}

error in_task(const error& e, const task& t, const worker_place& at) {
  return make_error(e.code, "stage " + std::to_string(at.stage) + " (dp " + std::to_string(at.dp_rank) + ", tp " +
                                std::to_string(at.tp_rank) + ") task " + to_string(t) + ": " + e.message);
}

}  // namespace

double burn_slower(double used, double factor) {
  if (factor <= 1) return used;
  const double until = thread_cpu_seconds() + (factor - 1) * used;
  for (volatile std::uint64_t spin = 0; thread_cpu_seconds() < until;) spin = spin + 1;
  return used * factor;
}

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

range owned_piece(const planner::parallel_plan& plan, std::int64_t flat_size, int dp_rank) {
  if (!plan.shard_params) return {0, flat_size};
  return shard_range(flat_size, plan.dp, dp_rank);
}

std::vector<sparse_table_grad> sparse_table_grads(stage_worker& w, std::int64_t piece_begin) {
  std::vector<sparse_table_grad> out;
  for (const auto& t : w.sparse_tables())
    out.push_back({w.param_range(t.param).begin - piece_begin, t.rows, t.dim, t.first, t.count, t.first_row});
  return out;
}

tensor params_piece(stage_worker& w, const planner::parallel_plan& plan, int dp_rank) {
  range r = owned_piece(plan, w.flat_params().numel(), dp_rank);
  return w.flat_params().slice(0, r.begin, r.end);
}

result<step_report> run_worker_step(stage_worker& w, const std::vector<task>& order, const planner::parallel_plan& plan,
                                    std::int64_t batch, const worker_place& at, step_io& io, std::uint64_t step,
                                    std::chrono::milliseconds timeout) {
  const stage_program& prog = w.program();
  transport::channel& ch = *w.comm().channel;
  const planner::batch_split split{batch, plan.dp, plan.micro_batches};
  // each micro-batch's loss counts by its rows: the step's loss is the batch mean
  auto seed = [&](int mb) { return split.weight(at.dp_rank, mb); };
  step_report report;
  report.reports_loss = prog.loss != no_value && at.tp_rank == 0;
  const planner::rank_layout layout(plan);
  auto peer = [&](int pipeline_rank) { return layout.rank_of({at.dp_rank, pipeline_rank, at.tp_rank}); };
  auto receive = [&](int slot, int mb, bool backward, int chunk) -> status {
    for (const auto& r : prog.recvs) {
      if (r.backward != backward || r.chunk != chunk) continue;
      auto got = ch.recv(peer(r.peer_rank), transfer_tag(mb, r.serial), timeout);
      if (!got) return got.error();
      tensor& dst = w.input(slot, r.local);
      if (got->shape() != dst.shape())
        return make_error(errc::invalid_argument,
                          "received " + got->shape().to_string() + " for an input of " + dst.shape().to_string());
      dst.copy_from(*got);
    }
    return {};
  };
  auto send = [&](int slot, int mb, bool backward, int chunk, std::int64_t& bytes) -> status {
    for (const auto& s : prog.sends) {
      if (s.backward != backward || s.chunk != chunk) continue;
      bytes += w.value(slot, s.local).numel() * static_cast<std::int64_t>(sizeof(float));
      // a copy: the slot's buffer is reused by a later micro-batch
      if (auto st = ch.send(peer(s.peer_rank), transfer_tag(mb, s.serial), w.value(slot, s.local).clone(), timeout);
          !st)
        return st;
    }
    return {};
  };

  const std::vector<int> dp_group = layout.group(layout.rank_of(at), "dp");
  transport::collective_options dp_opt{.tag = (dp_tag_space << 40) | (step & ((1ull << 40) - 1)), .timeout = timeout};
  w.zero_grads();
  w.begin_sparse_step(plan.micro_batches, plan.dp, at.dp_rank);
  double gather_s = 0;  // the sharded plan's all-gather: the amplifier's too, reported with its task
  if (plan.shard_params) {
    // Every rank owns a piece, updated at the last commit: gather the others'.
    const auto gather_start = std::chrono::steady_clock::now();
    range mine = owned_piece(plan, w.flat_params().numel(), at.dp_rank);
    const tensor own = w.flat_params().slice(0, mine.begin, mine.end);  // already in place
    if (auto st = transport::all_gather_ring(ch, dp_group, own, w.flat_params(), dp_opt); !st)
      return in_task(st.error(), {task_kind::update, -1}, at);
    const auto gather_end = std::chrono::steady_clock::now();
    gather_s = std::chrono::duration<double>(gather_end - gather_start).count();
    if (io.trace) {
      const auto ns = [](std::chrono::steady_clock::time_point p) {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(p.time_since_epoch()).count();
      };
      report.spans.push_back({task_kind::update, gather_micro_batch, ns(gather_start), ns(gather_start), ns(gather_end),
                              ns(gather_end), w.flat_params().numel() * static_cast<std::int64_t>(sizeof(float))});
    }
  }
  for (std::size_t index = 0; index < order.size(); ++index) {
    const task& t = order[index];
    if (io.before_task) io.before_task(t, index);
    // A task's time is its own work: waiting for data or for another stage's tensor is left
    // out (the planner's simulator models those waits; its refit needs the work alone). The
    // amplifier's time is its gradient reduction (with a sharded plan's all-gather at the
    // step's start), which the refit sets against the modelled collectives: handing the piece
    // to the parameter owner is the runtime's own cost.
    auto start = std::chrono::steady_clock::now();
    auto end = start, worked = start;  // worked: its own work done, before its sends
    const std::int64_t wait_ns = io.trace ? trace_clock_ns() : 0;
    std::int64_t bytes = 0;
    const int slot = t.micro_batch < 0 ? 0 : t.micro_batch % w.slots();
    status st;
    if (t.kind == task_kind::forward) {
      w.use_smaller(slot, split.rows(at.dp_rank, t.micro_batch) < split.largest());
      const bool reads_data =
          std::find(prog.data_chunks.begin(), prog.data_chunks.end(), t.chunk) != prog.data_chunks.end();
      if (reads_data) {
        auto data = io.inputs(t.micro_batch);
        if (!data) return in_task(data.error(), t, at);
        for (std::size_t k = 0; k < prog.data_inputs.size(); ++k) {
          if (prog.data_chunks[k] != t.chunk) continue;
          const auto& [name, id] = prog.data_inputs[k];
          auto it = data->find(name);
          if (it == data->end()) return in_task(make_error(errc::not_found, "no data for input '" + name + "'"), t, at);
          w.input(slot, id).copy_from(it->second);
        }
      }
      st = receive(slot, t.micro_batch, false, t.chunk);
      start = std::chrono::steady_clock::now();
      const double cpu = thread_cpu_seconds();
      if (st) st = w.forward(slot, t.chunk);
      report.cpu_s += burn_slower(thread_cpu_seconds() - cpu, io.slow_factor);
      worked = std::chrono::steady_clock::now();
      if (st) st = send(slot, t.micro_batch, false, t.chunk, bytes);
      if (st && report.reports_loss && t.chunk == prog.loss_chunk)
        report.loss_share += static_cast<double>(w.value(slot, prog.loss).data<float>()[0]) * seed(t.micro_batch);
    } else if (t.kind == task_kind::backward) {
      st = receive(slot, t.micro_batch, true, t.chunk);
      start = std::chrono::steady_clock::now();
      const double cpu = thread_cpu_seconds();
      if (st) st = w.backward(slot, seed(t.micro_batch), t.chunk);
      report.cpu_s += burn_slower(thread_cpu_seconds() - cpu, io.slow_factor);
      worked = std::chrono::steady_clock::now();
      if (st) st = send(slot, t.micro_batch, true, t.chunk, bytes);
    } else {
      // The amplifier: sum gradients over the data-parallel replicas, hand over the piece.
      // Sparse tables' entries are gathered instead: every replica updates the same rows.
      tensor& grads = w.flat_grads();
      tensor piece = grads;
      const bool sparse = !w.sparse_tables().empty();
      const bool local = io.local_tables && sparse && plan.dp > 1 && !plan.shard_params;
      range mine{0, grads.numel()};
      if (plan.dp > 1 && !plan.shard_params) {
        for (const range& r : w.dense_runs()) {
          if (!st) break;
          tensor run = grads.slice(0, r.begin, r.end);
          bytes += r.size() * static_cast<std::int64_t>(sizeof(float));
          st = transport::allreduce(ch, dp_group, run, dp_opt);
        }
      }
      if (st && plan.shard_params) {
        if (sparse) w.zero_table_grads();  // reduce-scattered whole: zeros there
        mine = owned_piece(plan, grads.numel(), at.dp_rank);
        piece = w.grad_piece(mine.size());
        bytes = grads.numel() * static_cast<std::int64_t>(sizeof(float));
        st =
            transport::reduce_scatter_ring_consuming(ch, dp_group, grads, piece, dp_opt);  // grads are zeroed next step
      }
      if (st && sparse && plan.dp > 1 && !local) {
        transport::collective_options sparse_opt = dp_opt;
        sparse_opt.tag = (sparse_tag_space << 40) | (step & ((1ull << 40) - 1));
        bytes += w.sparse_entries().numel() * static_cast<std::int64_t>(sizeof(float));
        report.sparse_bytes += (plan.dp - 1) * w.sparse_block_size() * static_cast<std::int64_t>(sizeof(float));
        st = transport::all_gather_ring(ch, dp_group, w.sparse_block(), w.sparse_entries(), sparse_opt);
      }
      end = worked = std::chrono::steady_clock::now();
      piece_gradient out;
      out.dense = piece;
      if (sparse) {
        out.entries = local ? w.sparse_block() : w.sparse_entries();
        out.blocks = local ? 1 : plan.dp;
        out.block_size = w.sparse_block_size();
        out.tables = sparse_table_grads(w, mine.begin);
        out.local = local;
        out.delay = io.table_delay;
      }
      if (st) st = io.submit(out);
    }
    if (!st) return in_task(st.error(), t, at);
    if (t.kind != task_kind::update) end = std::chrono::steady_clock::now();
    const double took = std::chrono::duration<double>(end - start).count();
    if (io.trace) {
      const auto ns = [](std::chrono::steady_clock::time_point p) {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(p.time_since_epoch()).count();
      };
      report.spans.push_back({t.kind, t.micro_batch, std::min(wait_ns, ns(start)), ns(start), ns(worked),
                              std::max(ns(worked), ns(std::chrono::steady_clock::now())), bytes, t.chunk});
    }
    if (t.kind == task_kind::forward)
      report.seconds.forward_s += took;
    else if (t.kind == task_kind::backward)
      report.seconds.backward_s += took;
    else
      report.seconds.update_s += took + gather_s;
  }
  return report;
}

}  // namespace cohort::actors
