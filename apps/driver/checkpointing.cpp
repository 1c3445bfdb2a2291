// The checkpoint options, where a run starts, and the export.
#include "apps/driver/checkpointing.hpp"

#include "apps/driver/report.hpp"

#include <cstdio>
#include <filesystem>

namespace cohort::apps {

void checkpoint_options::add_to(option_set& opts) {
  opts.add("checkpoint.dir", dir, "write checkpoints into this directory (DIR/step-000123/, safetensors + manifest)")
      .add("checkpoint.every", every, "write a checkpoint after every this many steps (0: never)")
      .add("checkpoint.keep", keep, "keep the newest this many checkpoints")
      .add("checkpoint.resume", resume,
           "auto (the newest checkpoint in --checkpoint.dir that verifies; none there: start fresh), "
           "none, or a checkpoint directory; any plan and process count loads any checkpoint")
      .add("checkpoint.on-error", on_error, "a checkpoint that cannot be written: warn (train on) or stop")
      .add("checkpoint.export", export_file, "write the trained parameters to this safetensors file at the end")
      .add("init.from", init_from,
           "start the model's parameters from this safetensors file (an export) or checkpoint directory");
}

status checkpoint_options::finish() const {
  if (every < 0) return make_error(errc::invalid_argument, "--checkpoint.every must not be negative");
  if (every > 0 && dir.empty()) return make_error(errc::invalid_argument, "--checkpoint.every needs --checkpoint.dir");
  if (keep < 1) return make_error(errc::invalid_argument, "--checkpoint.keep must be at least 1");
  if (on_error != "warn" && on_error != "stop")
    return make_error(errc::invalid_argument, "--checkpoint.on-error must be warn or stop, got '" + on_error + "'");
  if (resume.empty()) return make_error(errc::invalid_argument, "--checkpoint.resume must be auto, none or a path");
  return {};
}

result<start_point> find_start(const checkpoint_options& o, std::int64_t steps, bool quiet) {
  start_point s;
  if (o.resumes()) {
    if (o.resume == "auto") {
      phase_progress verifying("resume: verifying the newest checkpoint in " + o.dir, "B", quiet);
      auto found = actors::checkpoint::find_newest(o.dir, verifying.callback());
      if (found.ck) verifying.finish(found.ck->dir + " verified");
      for (const auto& why : found.refused)
        if (!quiet) std::fprintf(stderr, "checkpoint refused: %s; trying the one before\n", why.c_str());
      if (found.ck) s.checkpoint = std::move(*found.ck);
    } else {
      phase_progress verifying("resume: verifying " + o.resume, "B", quiet);
      auto ck = actors::checkpoint::open(o.resume, verifying.callback());
      if (!ck) return make_error(errc::invalid_argument, "--checkpoint.resume: " + ck.error().message);
      verifying.finish("verified");
      s.checkpoint = std::move(*ck);
    }
  }
  if (s.checkpoint) {
    s.first_step = s.checkpoint->step;
    if (s.first_step >= steps)
      return make_error(errc::invalid_argument, s.checkpoint->dir + " has done " + std::to_string(s.first_step) +
                                                    " steps, --train.steps is " + std::to_string(steps) +
                                                    ": nothing left to train");
    if (!quiet)
      std::fprintf(stderr, "resuming from %s after step %lld\n", s.checkpoint->dir.c_str(),
                   static_cast<long long>(s.first_step));
  } else {
    s.init_from = o.init_from;
  }
  return s;
}

void set_checkpointing(const checkpoint_options& o, const start_point& start, actors::run_options& r) {
  if (o.every > 0) {
    actors::checkpointing c;
    c.dir = o.dir;
    c.every = o.every;
    c.keep = static_cast<int>(o.keep);
    c.stop_on_error = o.on_error == "stop";
    r.checkpoint = c;
  }
  r.first_step = start.first_step;
  r.first_sample = start.checkpoint ? start.checkpoint->next_sample : -1;
  const auto slots = static_cast<std::size_t>(state_slots(r.optimizer));
  const auto optimizer = r.optimizer;
  if (start.checkpoint) {
    auto ck = std::make_shared<const actors::checkpoint::opened>(*start.checkpoint);
    r.initial_state = [ck, slots, optimizer](
                          const std::vector<actors::piece_layout>& layouts,
                          const std::vector<bool>& local) -> result<std::vector<actors::piece_state>> {
      if (auto st = actors::checkpoint::check_compatible(*ck, layouts, optimizer); !st) return st.error();
      return actors::checkpoint::load_pieces(*ck, layouts, local, slots);
    };
  } else if (!start.init_from.empty()) {
    const std::string path = start.init_from;
    r.initial_state = [path, slots](const std::vector<actors::piece_layout>& layouts,
                                    const std::vector<bool>& local) -> result<std::vector<actors::piece_state>> {
      auto whole = load_parameters(path);
      if (!whole) return make_error(errc::invalid_argument, "--init.from: " + whole.error().message);
      return actors::checkpoint::pieces_from_tensors(*whole, layouts, local, slots, path);
    };
  }
}

result<parameter_store> load_parameters(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return actors::safetensors::read_file(path);
  auto ck = actors::checkpoint::open(path);
  if (!ck) return ck.error();
  return actors::checkpoint::whole_parameters(*ck);
}

status export_parameters(const std::string& path, const parameter_store& params) {
  std::vector<actors::safetensors::named_tensor> out;
  for (const auto& [name, t] : params) out.push_back({name, t});
  return actors::safetensors::write_file(path, out, {{"format", "pt"}}, /*sync=*/true);
}

}  // namespace cohort::apps
