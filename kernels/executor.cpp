// Buffer planning by liveness, then straight-line execution.
#include "kernels/executor.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

namespace cohort::kernels {
namespace {

constexpr std::size_t never_freed = std::numeric_limits<std::size_t>::max();

std::size_t bytes_of(const value_type& t) { return static_cast<std::size_t>(t.shape.numel()) * size_of(t.type); }

// Slots are reusable buffers; sizes grow while planning, storage is allocated after.
class slot_planner {
 public:
  int acquire(std::size_t bytes) {
    int best = -1;
    for (int s : free_) {  // smallest free slot that fits, else the largest (it grows)
      bool fits = sizes_[static_cast<std::size_t>(s)] >= bytes;
      if (best < 0) {
        best = s;
        continue;
      }
      std::size_t bs = sizes_[static_cast<std::size_t>(best)], ss = sizes_[static_cast<std::size_t>(s)];
      bool best_fits = bs >= bytes;
      if ((fits && (!best_fits || ss < bs)) || (!fits && !best_fits && ss > bs)) best = s;
    }
    if (best < 0) {
      sizes_.push_back(bytes);
      return static_cast<int>(sizes_.size() - 1);
    }
    free_.erase(std::find(free_.begin(), free_.end(), best));
    sizes_[static_cast<std::size_t>(best)] = std::max(sizes_[static_cast<std::size_t>(best)], bytes);
    return best;
  }
  void release(int slot) { free_.push_back(slot); }
  const std::vector<std::size_t>& sizes() const { return sizes_; }

 private:
  std::vector<std::size_t> sizes_;
  std::vector<int> free_;
};

}  // namespace

result<executor> executor::create(const graph& g, const parameter_store& params, const std::vector<value_id>& keep,
                                  executor_options opts) {
  if (auto st = g.check(); !st) return st.error();
  if (opts.kernels == nullptr) return make_error(errc::invalid_argument, "executor: no dispatch table");
  const auto& nodes = g.nodes();
  for (const auto& n : nodes)
    if ((*opts.kernels)[n.kind] == nullptr)
      return make_error(errc::unsupported, std::string("executor: table '") + opts.kernels->name() +
                                               "' has no kernel for " + to_string(n.kind));
  const std::size_t nv = g.num_values();
  executor ex;
  ex.graph_ = &g;
  ex.opts_ = opts;
  ex.values_.resize(nv);
  ex.readable_.assign(nv, false);

  // 1. Alias roots: a reshape's output lives in its input's buffer.
  std::vector<value_id> root(nv);
  for (std::size_t v = 0; v < nv; ++v) root[v] = static_cast<value_id>(v);
  for (const auto& n : nodes)
    if (n.kind == op_kind::reshape)
      root[static_cast<std::size_t>(n.outputs[0])] = root[static_cast<std::size_t>(n.inputs[0])];

  // 2. Last use of each root; persistent roots are never freed.
  std::vector<std::size_t> last_use(nv, 0);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (auto v : nodes[i].inputs)
      last_use[static_cast<std::size_t>(root[static_cast<std::size_t>(v)])] =
          std::max(last_use[static_cast<std::size_t>(root[static_cast<std::size_t>(v)])], i);
    for (auto v : nodes[i].outputs)
      last_use[static_cast<std::size_t>(root[static_cast<std::size_t>(v)])] =
          std::max(last_use[static_cast<std::size_t>(root[static_cast<std::size_t>(v)])], i);
  }
  for (auto v : keep) {
    if (v < 0 || static_cast<std::size_t>(v) >= nv)
      return make_error(errc::invalid_argument, "executor: kept value %" + std::to_string(v) + " does not exist");
    last_use[static_cast<std::size_t>(root[static_cast<std::size_t>(v)])] = never_freed;
    ex.readable_[static_cast<std::size_t>(v)] = true;
  }

  // 3. Inputs get their own buffers; parameters are bound by name.
  for (std::size_t v = 0; v < nv; ++v) {
    const auto& info = g.value(static_cast<value_id>(v));
    if (info.kind == value_kind::input) {
      ex.values_[v] = tensor::zeros(info.type.shape, info.type.type);
      ex.readable_[v] = true;
    } else if (info.kind == value_kind::parameter) {
      auto it = params.find(info.name);
      if (it == params.end())
        return make_error(errc::not_found, "executor: parameter '" + info.name + "' has no tensor");
      if (it->second.shape() != info.type.shape || !it->second.is_contiguous())
        return make_error(errc::shape_mismatch, "executor: parameter '" + info.name + "' is " +
                                                    it->second.shape().to_string() + ", the graph expects " +
                                                    info.type.shape.to_string());
      ex.values_[v] = it->second;
      ex.readable_[v] = true;
    }
  }

  // 4. Bound values live in the caller's tensors; the rest get slots: assign slots to
  //    activations, release them after their last use.
  ex.bound_.assign(nv, false);
  for (auto& [v, t] : opts.bound) {
    if (v < 0 || static_cast<std::size_t>(v) >= nv || g.value(v).kind != value_kind::activation)
      return make_error(errc::invalid_argument,
                        "executor: bound value %" + std::to_string(v) + " is not computed by the graph");
    if (root[static_cast<std::size_t>(v)] != v) continue;  // an alias: computed in its root's buffer
    if (t.shape() != g.value(v).type.shape || !t.is_contiguous())
      return make_error(errc::shape_mismatch, "executor: bound tensor " + t.shape().to_string() + " for value %" +
                                                  std::to_string(v) + " of " + g.value(v).type.shape.to_string());
    ex.values_[static_cast<std::size_t>(v)] = t;
    ex.bound_[static_cast<std::size_t>(v)] = true;
    ex.readable_[static_cast<std::size_t>(v)] = true;
  }
  slot_planner planner;
  std::vector<int> slot_of(nv, -1);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (auto v : nodes[i].outputs) {
      auto r = static_cast<std::size_t>(root[static_cast<std::size_t>(v)]);
      if (r != static_cast<std::size_t>(v)) continue;  // alias
      if (ex.bound_[r]) continue;
      slot_of[r] = planner.acquire(bytes_of(g.value(v).type));
    }
    auto release_if_dead = [&](value_id v) {
      auto r = static_cast<std::size_t>(root[static_cast<std::size_t>(v)]);
      if (slot_of[r] >= 0 && last_use[r] == i) {
        planner.release(slot_of[r]);
        last_use[r] = never_freed - 1;  // released once
      }
    };
    for (auto v : nodes[i].inputs) release_if_dead(v);
    for (auto v : nodes[i].outputs) release_if_dead(v);
  }

  // 5. Allocate slots and make each activation a view at the start of its slot.
  std::vector<std::shared_ptr<storage>> slots;
  for (auto bytes : planner.sizes()) {
    slots.push_back(std::make_shared<storage>(bytes));
    ex.arena_bytes_ += bytes;
  }
  for (const auto& n : nodes)
    for (auto v : n.outputs) {
      const auto& info = g.value(v);
      auto r = static_cast<std::size_t>(root[static_cast<std::size_t>(v)]);
      if (ex.bound_[static_cast<std::size_t>(v)]) continue;
      if (slot_of[r] >= 0 && r == static_cast<std::size_t>(v))
        ex.values_[static_cast<std::size_t>(v)] =
            tensor(slots[static_cast<std::size_t>(slot_of[r])], info.type.shape, info.type.type);
      else  // alias of an earlier value (activation, input, parameter or bound value)
        ex.values_[static_cast<std::size_t>(v)] = ex.values_[r].reshape(info.type.shape);
    }

  // 6. Operand lists per node, built once.
  ex.node_in_.resize(nodes.size());
  ex.node_out_.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    for (auto v : nodes[i].inputs) ex.node_in_[i].push_back(ex.values_[static_cast<std::size_t>(v)]);
    for (auto v : nodes[i].outputs) ex.node_out_[i].push_back(ex.values_[static_cast<std::size_t>(v)]);
  }
  return ex;
}

bool executor::is_bound(value_id id) const {
  return id >= 0 && static_cast<std::size_t>(id) < bound_.size() && bound_[static_cast<std::size_t>(id)];
}

tensor& executor::input(value_id id) {
  if (id < 0 || static_cast<std::size_t>(id) >= values_.size() || graph_->value(id).kind != value_kind::input)
    throw std::invalid_argument("executor::input: %" + std::to_string(id) + " is not an input");
  return values_[static_cast<std::size_t>(id)];
}

status executor::run() { return run(0, graph_->nodes().size()); }

status executor::run(std::size_t begin, std::size_t end) {
  const auto& nodes = graph_->nodes();
  end = std::min(end, nodes.size());
  for (std::size_t i = begin; i < end; ++i) {
    kernel_call call{nodes[i], node_in_[i], node_out_[i], opts_.pool, opts_.context};
    if (auto st = (*opts_.kernels)[nodes[i].kind](call); !st) {
      return make_error(st.error().code, "node " + std::to_string(i) + " (" + to_string(nodes[i].kind) +
                                             (nodes[i].scope.empty() ? "" : " in " + nodes[i].scope) +
                                             "): " + st.error().message);
    }
  }
  return {};
}

const tensor& executor::value(value_id id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= values_.size() || !readable_[static_cast<std::size_t>(id)])
    throw std::invalid_argument("executor::value: %" + std::to_string(id) + " is not kept");
  return values_[static_cast<std::size_t>(id)];
}

}  // namespace cohort::kernels
