// gpt: trains the tiny byte-level GPT of ../shared/bench/gpt_torch.py (pre-LN, GELU MLP,
// learned positions, AdamW) on any text file. The model is build_gpt() in models.cpp.
//
//   build/apps/gpt                                     # GPL-3 text, 33 steps
//   build/apps/gpt --data.name=moby-dick --train.steps=300
//   build/apps/gpt --plan.tp=2 --plan.pp=2 --plan.micro-batches=4
//   build/apps/gpt --plan.only=true --cluster.file=configs/cluster_gpu_64.json --model.layers=96
//       --model.d=12288 --model.heads=96 --model.seq=2048 --model.vocab=50257 --train.batch=64
#include <cstring>

#include "apps/datasets.hpp"
#include "apps/models.hpp"
#include "apps/options.hpp"
#include "apps/report.hpp"
#include "apps/samplers.hpp"
#include "apps/training.hpp"
#include "kernels/threads.hpp"

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
  plan_options plan;
  option_set opts("gpt", "Trains a byte-level GPT (decoder-only transformer, pre-LN, GELU MLP, learned\n"
                         "positions, AdamW) on a text file.");
  opts.add("data.name", o.data, "gpl3 (/usr/share/common-licenses/GPL-3) or moby-dick (data/text)")
      .add("data.file", o.file, "any text file; overrides data.name")
      .add("data.dir", o.data_dir, "where scripts/fetch-data.sh put the files ($COHORT_DATA_DIR)")
      .add("model.layers", o.model.layers, "transformer blocks")
      .add("model.d", o.model.d, "model width")
      .add("model.heads", o.model.heads, "attention heads (must divide model.d)")
      .add("model.seq", o.model.seq, "context length in bytes")
      .add("model.vocab", o.model.vocab, "vocabulary (bytes: 256; larger only to plan for big models)")
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
  plan.add_to(opts);
  auto parsed = opts.parse(argc, argv);
  if (!parsed) return fail("gpt", parsed.error().message, 2);
  if (*parsed == parse_outcome::help_shown) return 0;
  if (auto st = plan.finish(opts); !st) return fail("gpt", st.error().message, 2);
  if (plan.dist.launches()) return launch_processes(argc, argv, plan.dist, opts);
  if (o.steps < 1 || o.batch < 1 || o.threads < 1 || o.warmup < 0 || o.lr <= 0)
    return fail("gpt", "--train.steps, --train.batch, --train.threads and --train.lr must be positive", 2);
  if (o.model.layers < 1 || o.model.d < 1 || o.model.heads < 1 || o.model.seq < 1 || o.model.d % o.model.heads != 0)
    return fail("gpt", "--model.layers, --model.d, --model.heads and --model.seq must be positive, heads dividing d", 2);
  if (o.model.vocab < 256)
    return fail("gpt", "--model.vocab must be at least 256 (the data is bytes), got " + std::to_string(o.model.vocab), 2);

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

  window_sampler sampler(*text, o.batch, o.model.seq, static_cast<std::uint64_t>(o.seed) + 1);
  training_job job;
  job.app = "gpt";
  job.model = [&](graph& g, std::int64_t batch) { return build_gpt(g, o.model, batch).loss; };
  job.data = [&](std::int64_t step) { return sampler.batch_at(step); };
  job.batch = o.batch;
  job.steps = o.steps;
  job.warmup = o.warmup;
  job.items_per_sample = o.model.seq;
  job.rate_unit = "tokens/s";
  job.optimizer = adamw_config{.lr = static_cast<float>(o.lr), .beta1 = static_cast<float>(o.beta1),
                               .beta2 = static_cast<float>(o.beta2), .weight_decay = static_cast<float>(o.weight_decay)};
  job.seed = static_cast<std::uint64_t>(o.seed);
  job.threads = static_cast<int>(o.threads);
  job.metrics_path = o.metrics;
  auto r = train(job, plan, opts.caf_arguments());
  if (!r) return fail("gpt", r.error().message, exit_code_for(r.error()));
  if (!r->report) return 0;  // process 0 of the job reports
  if (r->plan_only) {
    print_summary({{"app", "gpt"}, {"plan", r->plan}});
    return 0;
  }
  json summary = {{"app", "gpt"}, {"data", path}, {"layers", o.model.layers}, {"d", o.model.d},
                  {"heads", o.model.heads}, {"seq", o.model.seq}, {"vocab", o.model.vocab}, {"batch", o.batch},
                  {"steps", o.steps}, {"first_loss", r->first_loss}, {"final_loss", r->final_loss},
                  {"tokens_per_s", r->items_per_s}, {"threads", o.threads}, {"plan", r->plan}, {"restarts", r->restarts}};
  if (!r->prediction.empty()) summary["prediction"] = r->prediction;
  print_summary(summary);
  return 0;
}
