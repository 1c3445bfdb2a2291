// cohort-embedding: the embedding path alone, as issue 19 item 8 measures it: DLRM's 26 sum-pooled
// tables of a Criteo file's sizes (the full Kaggle tables: 33.8 M rows, 2.16 GB), each step
// looking up a batch's ids, taking the sparse gradient of sum(outputs) and applying plain SGD to
// the touched rows (the serial trainer with sparse tables). Rows per second = looked-up rows
// (batch x 26) per second; the batches are the file's, in order, as the PyTorch side
// (bench/embedding_torch.py) takes them. --hugepages asks the kernel for transparent huge pages
// on the tables (madvise; an A/B of TLB misses on tables far larger than the caches); --fused=false
// writes and reads the gradient entries instead of the fused path (an A/B of the fusion).
//
//   build/apps/cohort-embedding --data.file=/tmp/cohort-criteo/bench_train.tsv --batch=2048
//   {"bench":"cohort_embedding","rows_per_s":...,"batch":2048,"steps":200,"table_rows":33762577,...}
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/data/criteo.hpp"
#include "apps/driver/options.hpp"
#include "graph/dsl.hpp"
#include "kernels/trainer.hpp"

using namespace cohort;
using namespace cohort::apps;

int main(int argc, char** argv) {
  option_set opts("cohort-embedding",
                  "Rows per second through DLRM's embedding path alone (lookup, sparse gradient, SGD on the\n"
                  "touched rows) on a Criteo file's tables; one JSON line on stdout.");
  std::string file;
  std::vector<std::int64_t> rows;
  std::int64_t batch = 2048, steps = 200, warmup = 10, dim = 16;
  bool hugepages = false, fused = true;
  opts.add("data.file", file, "a Criteo TSV file (its .meta.json gives the table sizes); required")
      .add("model.rows", rows, "table sizes or one cap, as dlrm's (default: the file's .meta.json)")
      .add("model.dim", dim, "embedding dimension")
      .add("batch", batch, "samples per step")
      .add("steps", steps, "timed steps")
      .add("warmup", warmup, "untimed steps first")
      .add("hugepages", hugepages, "madvise(MADV_HUGEPAGE) on the tables")
      .add("fused", fused,
           "sum the touched rows straight from the bags' output gradient (the serial trainer's fused\n"
           "path); false: write and read the gradient entries, as the actor runtime sends them");
  auto parsed = opts.parse(argc, argv);
  if (!parsed) {
    std::fprintf(stderr, "cohort-embedding: error: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (*parsed == parse_outcome::help_shown) return 0;
  auto fail = [](const std::string& m, int code) {
    std::fprintf(stderr, "cohort-embedding: error: %s\n", m.c_str());
    return code;
  };
  if (file.empty()) return fail("--data.file is required", 2);
  if (batch < 1 || steps < 1 || warmup < 0 || dim < 1) return fail("--batch, --steps, --model.dim must be positive", 2);
  auto table_rows = criteo_table_rows(file, rows);
  if (!table_rows) return fail(table_rows.error().message, 2);
  auto data = read_criteo(file, *table_rows);
  if (!data) return fail(data.error().message, 2);
  in_order_sampler sampler(data->columns, batch);

  graph g;
  var loss;
  std::int64_t total_rows = 0;
  for (int t = 0; t < criteo_tables; ++t) {
    const std::int64_t n = (*table_rows)[static_cast<std::size_t>(t)];
    total_rows += n;
    var table = g.parameter("emb." + criteo_table_input(t), {n, dim},
                            init_spec::uniform(static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)))));
    // d loss / d output = 1: every looked-up row is updated
    var part = sum(embedding_bag(table, g.input(criteo_table_input(t), {batch, 1}, dtype::i32)));
    loss = t == 0 ? part : loss + part;
  }
  auto tr = kernels::serial_trainer::create(
      g, loss,
      {.optimizer = sgd_config{.lr = 0.01f}, .seed = 1, .threads = 1, .sparse_tables = true, .fused_tables = fused});
  if (!tr) return fail(tr.error().message, 1);
  if (hugepages)
    for (auto& [name, t] : (*tr)->parameters()) {
      const auto page = static_cast<std::uintptr_t>(4096);
      auto begin = (reinterpret_cast<std::uintptr_t>(t.data<float>()) + page - 1) & ~(page - 1);
      auto end = reinterpret_cast<std::uintptr_t>(t.data<float>() + t.numel()) & ~(page - 1);
      if (end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) != 0)
        return fail("madvise(MADV_HUGEPAGE) failed for " + name, 1);
    }
  std::chrono::steady_clock::time_point start;
  for (std::int64_t s = 0; s < warmup + steps; ++s) {
    if (s == warmup) start = std::chrono::steady_clock::now();
    for (auto& [name, t] : sampler.batch_at(s))
      if (name != "dense" && name != "label") (*tr)->input(name).copy_from(t);
    if (auto l = (*tr)->step(); !l) return fail(l.error().message, 1);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double looked_up = static_cast<double>(steps * batch * criteo_tables);
  nlohmann::json out = {{"bench", "cohort_embedding"},
                        {"rows_per_s", looked_up / seconds},
                        {"step_ms", 1000 * seconds / static_cast<double>(steps)},
                        {"batch", batch},
                        {"steps", steps},
                        {"dim", dim},
                        {"table_rows", total_rows},
                        {"table_MB", static_cast<double>(total_rows * dim * 4) / 1e6},
                        {"hugepages", hugepages},
                        {"fused", fused},
                        {"threads", 1}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
