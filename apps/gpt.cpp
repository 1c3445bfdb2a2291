// gpt: trains the tiny byte-level GPT of ../shared/bench/gpt_torch.py (build_gpt,
// apps/models/gpt.hpp) on any text file. Everything else is the driver's (apps/driver/app.hpp).
//
//   build/apps/gpt                                     # GPL-3 text, 33 steps
//   build/apps/gpt --data.name=moby-dick --train.steps=300
//   build/apps/gpt --plan.tp=2 --plan.pp=2 --plan.micro-batches=4
//   build/apps/gpt --init.from=gpt.safetensors --generate.prompt="The " --generate.tokens=200
//   build/apps/gpt --plan.only=true --cluster.file=configs/cluster_gpu_64.json --model.layers=96
//       --model.d=12288 --model.heads=96 --model.seq=2048 --model.vocab=50257 --train.batch=64
#include <cstdio>
#include <memory>

#include "apps/data/datasets.hpp"
#include "apps/data/samplers.hpp"
#include "apps/driver/app.hpp"
#include "apps/driver/generate.hpp"
#include "apps/models/gpt.hpp"

using namespace cohort;
using namespace cohort::apps;

int main(int argc, char** argv) {
  app a("gpt",
        "Trains a byte-level GPT (decoder-only transformer, pre-LN, GELU MLP, learned\n"
        "positions, AdamW) on a text file.",
        {.steps = 33,
         .batch = 16,
         .warmup = 3,
         .optimizer = optimizer_kind::adamw,
         .lr = 1e-3,
         .beta1 = 0.9,
         .beta2 = 0.95,
         .weight_decay = 0.1});
  std::string data_name = "gpl3", file, data_dir = default_data_dir();
  gpt_config model;
  std::string prompt, attention = "unfused", head = "replicated";
  sampling sample;
  a.options()
      .add("data.name", data_name, "gpl3 (/usr/share/common-licenses/GPL-3) or moby-dick (data/text)")
      .add("data.file", file, "any text file; overrides data.name")
      .add("data.dir", data_dir, "where scripts/fetch-data.sh put the files ($COHORT_DATA_DIR)")
      .add("model.layers", model.layers, "transformer blocks")
      .add("model.d", model.d, "model width")
      .add("model.heads", model.heads, "attention heads (must divide model.d)")
      .add("model.seq", model.seq, "context length in bytes")
      .add("model.vocab", model.vocab, "vocabulary (bytes: 256; larger only to plan for big models)")
      .add("model.attention", attention,
           "unfused (scores, mask, softmax and product as separate ops) or fused (one attention op: the "
           "scores are never stored, as flash attention; on the CPU its reference kernel, slow: for planning)")
      .add("model.head", head,
           "replicated (every tp rank computes the whole output layer) or column (split over tp by vocabulary, "
           "the logits gathered for the loss)")
      .add("generate.prompt", prompt, "train nothing: continue this text with the model of --init.from")
      .add("generate.tokens", sample.tokens, "bytes to generate")
      .add("generate.temperature", sample.temperature, "0: greedy; higher: more random")
      .add("generate.top-k", sample.top_k, "sample among the k most likely bytes (0: all)");

  std::vector<std::uint8_t> text;
  std::unique_ptr<window_sampler> sampler;
  return a.run(argc, argv, [&](const app& a) -> result<job> {
    if (model.layers < 1 || model.d < 1 || model.heads < 1 || model.seq < 1 || model.d % model.heads != 0)
      return make_error(errc::invalid_argument,
                        "--model.layers, --model.d, --model.heads and --model.seq must be positive, heads dividing d");
    if (attention != "unfused" && attention != "fused")
      return make_error(errc::invalid_argument, "--model.attention must be unfused or fused, got '" + attention + "'");
    model.fused_attention = attention == "fused";
    if (head != "replicated" && head != "column")
      return make_error(errc::invalid_argument, "--model.head must be replicated or column, got '" + head + "'");
    model.column_parallel_head = head == "column";
    if (model.vocab < 256)
      return make_error(errc::invalid_argument,
                        "--model.vocab must be at least 256 (the data is bytes), got " + std::to_string(model.vocab));
    std::string path = file;
    if (path.empty() && data_name == "gpl3")
      path = "/usr/share/common-licenses/GPL-3";
    else if (path.empty() && data_name == "moby-dick")
      path = data_dir + "/text/moby-dick.txt";
    else if (path.empty())
      return make_error(errc::invalid_argument,
                        "--data.name must be gpl3 or moby-dick (or give --data.file), got '" + data_name + "'");
    auto bytes = load_bytes(path);
    if (!bytes) return bytes.error();
    text = std::move(*bytes);
    if (static_cast<std::int64_t>(text.size()) < model.seq + 2)
      return make_error(errc::invalid_argument, path + " has " + std::to_string(text.size()) + " bytes; --model.seq=" +
                                                    std::to_string(model.seq) + " needs at least seq+2");
    sampler = std::make_unique<window_sampler>(text, a.train().batch, model.seq,
                                               static_cast<std::uint64_t>(a.train().seed) + 1);

    job j;
    j.model = [&](graph& g, std::int64_t rows) { return build_gpt(g, model, rows).loss; };
    j.data = [&](std::int64_t step) { return sampler->batch_at(step); };
    j.items_per_sample = model.seq;
    j.rate_unit = "tokens/s";
    j.summary = {{"data", path},     {"layers", model.layers}, {"d", model.d},           {"heads", model.heads},
                 {"seq", model.seq}, {"vocab", model.vocab},   {"attention", attention}, {"head", head}};
    if (!prompt.empty()) {  // sample from a trained model: the continuation on stdout, then the summary
      j.evaluate_only = true;
      sample.seed = static_cast<std::uint64_t>(a.train().seed);
      sample.threads = static_cast<int>(a.train().threads);
      j.evaluate = [&](const parameter_store& trained) -> result<json> {
        std::vector<std::int32_t> tokens(prompt.begin(), prompt.end());
        for (auto& t : tokens) t &= 0xff;  // bytes
        auto more = continue_tokens([&](graph& g) { return build_gpt(g, model, 1).logits; }, model.seq, trained, tokens,
                                    sample);
        if (!more) return more.error();
        std::string text(more->begin(), more->end());
        std::printf("%s%s\n", prompt.c_str(), text.c_str());
        return json{{"prompt", prompt},
                    {"generated", text},
                    {"generated_tokens", *more},
                    {"temperature", sample.temperature},
                    {"top_k", sample.top_k}};
      };
    }
    return j;
  });
}
