// The serial graph and the model DSL's handle type. A graph is a list of nodes in the order
// they were built (which is a topological order); each node reads values and produces new
// ones. Inputs are fed per step, parameters are persistent and initialized from a seed.
// Shape errors do not throw: the first one is recorded, later ops on its result are no-ops,
// and check() returns it.
//
//   graph g;
//   var x = g.input("x", {32, 64});
//   var y = g.input("y", {32}, dtype::i32);
//   var h = relu(linear(x, 128, "fc1"));          // creates fc1.weight [64,128], fc1.bias [128]
//   var loss = softmax_cross_entropy(linear(h, 10, "fc2"), y);
//   if (auto st = g.check(); !st) return st;      // the first shape error, naming op and shapes
//   auto grads = autodiff(g, loss);                 // appends the backward nodes (graph/autodiff.hpp)
//   std::cout << g.to_string();   // "%3 = matmul(%0 'x' [32,64], %2 'fc1.weight' [64,128]) -> [32,128]  # fc1." ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/dtype.hpp"
#include "graph/error.hpp"
#include "graph/op.hpp"
#include "graph/placement.hpp"
#include "graph/shape.hpp"
#include "graph/shape_inference.hpp"

namespace cohort {

using value_id = std::int32_t;
constexpr value_id no_value = -1;

enum class value_kind : std::uint8_t { input, parameter, activation };

/// How a parameter is initialized. uniform: U(-a, a); normal: N(0, a^2); constant: a.
struct init_spec {
  enum class kind : std::uint8_t { constant, uniform, normal } how = kind::constant;
  float a = 0.f;
  static init_spec zeros() { return {kind::constant, 0.f}; }
  static init_spec ones() { return {kind::constant, 1.f}; }
  static init_spec uniform(float bound) { return {kind::uniform, bound}; }
  static init_spec normal(float stddev) { return {kind::normal, stddev}; }
};

struct value_info {
  value_type type;
  value_kind kind = value_kind::activation;
  std::string name;            // inputs and parameters; empty for activations
  std::int32_t producer = -1;  // index of the producing node, -1 for inputs/parameters
  bool requires_grad = false;  // parameters, and activations that depend on one
  init_spec init;              // parameters only
  /// Placements the model asked for, per mesh axis name (e.g. {"tp", shard{1}}); completion
  /// derives every other value's placement from these.
  std::vector<std::pair<std::string, placement>> annotations;
};

struct node {
  op_kind kind;
  op_attrs attrs;
  std::vector<value_id> inputs;
  std::vector<value_id> outputs;
  std::string scope;  // name scope at build time, for dumps and errors
  /// For nodes autodiff emits: the forward node whose gradient rule produced it (pipeline
  /// stages put a backward node on its forward node's stage). -1 for forward nodes.
  std::int32_t origin = -1;
};

class graph;

/// A handle to a value of a graph under construction. Cheap to copy.
struct var {
  graph* g = nullptr;
  value_id id = no_value;

  bool valid() const { return g != nullptr && id != no_value; }
  const cohort::shape& shape() const;
  dtype type() const;
};

class graph {
 public:
  graph() = default;
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  graph(graph&&) = default;
  graph& operator=(graph&&) = default;

  // -- building ------------------------------------------------------------------------
  var input(const std::string& name, cohort::shape s, dtype t = dtype::f32);
  var parameter(const std::string& name, cohort::shape s, init_spec init);
  /// One rank's piece of a parameter (partitioning): as parameter(), but a piece may hold no
  /// elements (a table sharded table-wise has none of its rows on the ranks it is not on).
  var parameter_piece(const std::string& name, cohort::shape s, init_spec init);
  /// Appends a node after checking its operands; on error records it and returns invalid vars.
  std::vector<var> apply(op_kind kind, op_attrs attrs, const std::vector<var>& inputs);
  var apply1(op_kind kind, op_attrs attrs, const std::vector<var>& inputs) {
    auto out = apply(kind, std::move(attrs), inputs);
    return out.empty() ? var{this, no_value} : out[0];
  }

  /// Name scopes: parameters created while a scope is open are named "scope.name".
  class scope_guard {
   public:
    explicit scope_guard(graph& g) : g_(&g) {}
    scope_guard(const scope_guard&) = delete;
    scope_guard& operator=(const scope_guard&) = delete;
    ~scope_guard() { g_->scopes_.pop_back(); }

   private:
    graph* g_;
  };
  [[nodiscard]] scope_guard scope(const std::string& name) {
    scopes_.push_back(name);
    return scope_guard(*this);
  }
  std::string scoped_name(const std::string& name) const;

  /// Asks for `p` on mesh axis `axis` for value `v` (replacing an earlier request).
  void annotate(var v, const std::string& axis, placement p);
  /// The requested placement of `id` on `axis`, or replicate when none was requested.
  placement annotation(value_id id, const std::string& axis) const;
  /// Nodes appended from now on record `origin` (autodiff sets it; -1 restores normal).
  void set_origin(std::int32_t origin) { origin_ = origin; }

  /// Records an error raised outside of apply() (e.g. by a DSL helper's own checks).
  void fail(error err);
  /// The first error recorded, if any.
  status check() const;

  // -- reading -------------------------------------------------------------------------
  const std::vector<node>& nodes() const { return nodes_; }
  const value_info& value(value_id id) const { return values_[static_cast<std::size_t>(id)]; }
  std::size_t num_values() const { return values_.size(); }
  std::vector<value_id> parameters() const;
  std::vector<value_id> inputs() const;
  /// The input or parameter called `name`, or no_value.
  value_id find(const std::string& name) const;
  var handle(value_id id) { return var{this, id}; }
  /// One line per node: "%5 = matmul(%1 [32,64], %2 [64,128]) -> [32,128]".
  std::string to_string() const;

 private:
  value_id add_value(value_info info);

  std::vector<value_info> values_;
  std::vector<node> nodes_;
  std::vector<std::string> scopes_;
  std::int32_t origin_ = -1;
  error first_error_;
  bool failed_ = false;
};

}  // namespace cohort
