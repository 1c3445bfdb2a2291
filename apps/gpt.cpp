// gpt: trains the tiny byte-level GPT of ../shared/bench/gpt_torch.py (pre-LN, GELU MLP,
// learned positions, AdamW) on any text file. The model is build_gpt() in models.cpp.
//
//   build/apps/gpt                                     # GPL-3 text, 33 steps
//   build/apps/gpt --data.name=moby-dick --train.steps=300
#include <cstring>

#include "apps/datasets.hpp"
#include "apps/models.hpp"
#include "apps/options.hpp"
#include "apps/report.hpp"
#include "graph/random.hpp"
#include "kernels/threads.hpp"
#include "kernels/trainer.hpp"

using namespace cohort;
using namespace cohort::apps;

namespace {

struct gpt_options {
  std::string data = "gpl3";
  std::string file;  // overrides data.name
  std::string data_dir = default_data_dir();
  gpt_config model;
  std::int64_t steps = 33, batch = 16, warmup = 3;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.95, weight_decay = 0.1;
  std::int64_t threads = kernels::available_cores(), seed = 0;
  std::string metrics;
};

}  // namespace

int main(int argc, char** argv) {
  gpt_options o;
  option_set opts("gpt", "Trains a byte-level GPT (decoder-only transformer, pre-LN, GELU MLP, learned\n"
                         "positions, AdamW) on a text file.");
  opts.add("data.name", o.data, "gpl3 (/usr/share/common-licenses/GPL-3) or moby-dick (data/text)")
      .add("data.file", o.file, "any text file; overrides data.name")
      .add("data.dir", o.data_dir, "where scripts/fetch-data.sh put the files ($COHORT_DATA_DIR)")
      .add("model.layers", o.model.layers, "transformer blocks")
      .add("model.d", o.model.d, "model width")
      .add("model.heads", o.model.heads, "attention heads (must divide model.d)")
      .add("model.seq", o.model.seq, "context length in bytes")
      .add("train.steps", o.steps, "optimizer steps")
      .add("train.batch", o.batch, "sequences per step")
      .add("train.lr", o.lr, "AdamW learning rate")
      .add("train.beta1", o.beta1, "AdamW beta1")
      .add("train.beta2", o.beta2, "AdamW beta2")
      .add("train.weight-decay", o.weight_decay, "AdamW decoupled weight decay")
      .add("train.warmup", o.warmup, "first steps left out of the throughput figure")
      .add("train.threads", o.threads, "threads for OpenBLAS and cohort's kernels together")
      .add("train.seed", o.seed, "seed for initialization and batch sampling")
      .add("metrics.file", o.metrics, "write one JSON object per step to this file");
  auto parsed = opts.parse(argc, argv);
  if (!parsed) return fail("gpt", parsed.error().message, 2);
  if (*parsed == parse_outcome::help_shown) return 0;
  if (o.steps < 1 || o.batch < 1 || o.threads < 1 || o.warmup < 0 || o.lr <= 0)
    return fail("gpt", "--train.steps, --train.batch, --train.threads and --train.lr must be positive", 2);
  if (o.model.layers < 1 || o.model.d < 1 || o.model.heads < 1 || o.model.seq < 1 || o.model.d % o.model.heads != 0)
    return fail("gpt", "--model.layers, --model.d, --model.heads and --model.seq must be positive, heads dividing d", 2);

  std::string path = o.file;
  if (path.empty()) {
    if (o.data == "gpl3") path = "/usr/share/common-licenses/GPL-3";
    else if (o.data == "moby-dick") path = o.data_dir + "/text/moby-dick.txt";
    else return fail("gpt", "--data.name must be gpl3 or moby-dick (or give --data.file), got '" + o.data + "'", 2);
  }
  auto text = load_bytes(path);
  if (!text) return fail("gpt", text.error().message, 2);
  if (static_cast<std::int64_t>(text->size()) < o.model.seq + 2)
    return fail("gpt", path + " has " + std::to_string(text->size()) + " bytes; --model.seq=" +
                           std::to_string(o.model.seq) + " needs at least seq+2", 2);

  graph g;
  gpt_model m = build_gpt(g, o.model, o.batch);
  if (auto st = g.check(); !st) return fail("gpt", st.error().message, 2);
  adamw_config opt{.lr = static_cast<float>(o.lr), .beta1 = static_cast<float>(o.beta1),
                   .beta2 = static_cast<float>(o.beta2), .weight_decay = static_cast<float>(o.weight_decay)};
  auto tr = kernels::serial_trainer::create(g, m.loss, {.optimizer = opt, .seed = static_cast<std::uint64_t>(o.seed),
                                                        .threads = static_cast<int>(o.threads)});
  if (!tr) return fail("gpt", tr.error().message, 1);
  metrics_file metrics;
  if (auto st = metrics.open(o.metrics); !st) return fail("gpt", st.error().message, 2);

  tensor& tokens = (*tr)->input("tokens");
  tensor& targets = (*tr)->input("targets");
  rng sampler(static_cast<std::uint64_t>(o.seed) + 1);
  const std::int64_t T = o.model.seq;
  const auto starts = static_cast<std::uint64_t>(static_cast<std::int64_t>(text->size()) - T - 1);

  progress_line progress("gpt", o.steps);
  auto start = std::chrono::steady_clock::now(), timed_start = start;
  float loss = 0, first_loss = 0;
  for (std::int64_t step = 1; step <= o.steps; ++step) {
    if (step == o.warmup + 1) timed_start = std::chrono::steady_clock::now();
    for (std::int64_t b = 0; b < o.batch; ++b) {  // random windows, targets shifted by one
      auto at = static_cast<std::int64_t>(sampler.below(starts));
      for (std::int64_t t = 0; t < T; ++t) {
        tokens.data<std::int32_t>()[b * T + t] = (*text)[static_cast<std::size_t>(at + t)];
        targets.data<std::int32_t>()[b * T + t] = (*text)[static_cast<std::size_t>(at + t + 1)];
      }
    }
    auto l = (*tr)->step();
    if (!l) return fail("gpt", "step " + std::to_string(step) + ": " + l.error().message, 1);
    loss = *l;
    if (step == 1) first_loss = loss;
    double elapsed = seconds_since(start);
    double rate = static_cast<double>(step * o.batch * T) / elapsed;
    progress.update(step, loss, rate, "tokens/s");
    metrics.write({{"step", step}, {"loss", loss}, {"lr", o.lr}, {"time", elapsed}, {"tokens_per_s", rate}});
  }
  progress.finish();
  std::int64_t timed_steps = o.steps > o.warmup ? o.steps - o.warmup : o.steps;
  if (o.steps <= o.warmup) timed_start = start;
  double tokens_per_s = static_cast<double>(timed_steps * o.batch * T) / seconds_since(timed_start);
  print_summary({{"app", "gpt"}, {"data", path}, {"layers", o.model.layers}, {"d", o.model.d},
                 {"heads", o.model.heads}, {"seq", T}, {"batch", o.batch}, {"steps", o.steps},
                 {"first_loss", first_loss}, {"final_loss", loss}, {"tokens_per_s", tokens_per_s},
                 {"threads", o.threads}});
  return 0;
}
