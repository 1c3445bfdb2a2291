// Classification accuracy with the serial executor.
#include "apps/driver/evaluate.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/dispatch.hpp"
#include "kernels/executor.hpp"
#include "kernels/thread_pool.hpp"
#include "kernels/threads.hpp"

namespace cohort::apps {

result<double> classification_accuracy(const std::function<var(graph&, std::int64_t rows)>& logits, const tensor& x,
                                       const tensor& y, const parameter_store& params, int threads) {
  const std::int64_t n = x.shape()[0], features = x.shape()[1];
  const std::int64_t chunk = std::min<std::int64_t>(n, 1000);
  if (chunk < 1) return 0.0;
  kernels::thread_pool pool(std::max(1, threads));
  kernels::set_math_threads(std::max(1, threads));
  graph g;
  var out = logits(g, chunk);
  if (auto st = g.check(); !st) return st.error();
  const value_id input = g.find("x");
  if (input == no_value) return make_error(errc::not_found, "accuracy: the model has no input named 'x'");
  auto table = kernels::cpu_kernels();
  auto ex = kernels::executor::create(g, params, {out.id}, {&table, &pool});
  if (!ex) return ex.error();
  const std::int64_t classes = g.value(out.id).type.shape.at(-1);
  std::int64_t correct = 0, seen = 0;
  const tensor xs = x.contiguous(), ys = y.contiguous();
  for (std::int64_t begin = 0; begin + chunk <= n; begin += chunk) {
    std::memcpy(ex->input(input).data<float>(), xs.data<float>() + begin * features,
                static_cast<std::size_t>(chunk * features) * sizeof(float));
    if (auto st = ex->run(); !st) return st.error();
    const float* rows = ex->value(out.id).data<float>();
    for (std::int64_t i = 0; i < chunk; ++i) {
      const float* row = rows + i * classes;
      correct += (std::max_element(row, row + classes) - row) == ys.data<std::int32_t>()[begin + i] ? 1 : 0;
    }
    seen += chunk;
  }
  return static_cast<double>(correct) / static_cast<double>(seen);
}

}  // namespace cohort::apps
