// The communication kernels partitioning inserts (allreduce, all_gather, reduce_scatter),
// backed by a transport channel. They are added to a copy of a math dispatch table; the
// executor hands each call the comm_context of its rank.
//
//   kernels::dispatch_table table = kernels::cpu_kernels();
//   add_comm_kernels(table);                                // allreduce, all_gather, reduce_scatter
//   transport::in_process_fabric fabric(2);                 // this rank's channel: its fabric's endpoint
//   int rank = 0;
//   comm_context ctx{.channel = &fabric.endpoint(rank), .groups = {{"tp", {0, 1}}}, .timeout = 30s};
//   auto cm = compile(tiny_mlp, {.tp = 2}, /*batch=*/64);
//   if (!cm) return cm.error();
//   auto prog = cm->program(/*stage=*/0, /*tp_rank=*/rank);
//   if (!prog) return prog.error();
//   parameter_store params = init_parameters(prog->g, /*seed=*/0);   // stage_worker slices the serial ones
//   kernels::thread_pool pool(1);
//   auto ex = kernels::executor::create(prog->g, params, prog->kept(), {.kernels = &table, .pool = &pool, .context = &ctx});
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"
#include "transport/channel.hpp"

namespace cohort::actors {

struct comm_context {
  transport::channel* channel = nullptr;
  std::map<std::string, std::vector<int>> groups;  // mesh axis -> this rank's group (global ranks)
  std::chrono::milliseconds timeout{30000};
  std::uint64_t tag_space = 1;  // high bits of every tag these kernels use
  std::uint64_t calls = 0;      // collectives run so far; every rank of a group runs the same sequence
};

/// Sets the kernels of allreduce, all_gather and reduce_scatter in `table`.
void add_comm_kernels(kernels::dispatch_table& table);

}  // namespace cohort::actors
