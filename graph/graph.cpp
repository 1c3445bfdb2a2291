// Graph construction: values, nodes, scopes and the first-error rule.
#include "graph/graph.hpp"

namespace cohort {

const shape& var::shape() const { return g->value(id).type.shape; }
dtype var::type() const { return g->value(id).type.type; }

value_id graph::add_value(value_info info) {
  values_.push_back(std::move(info));
  return static_cast<value_id>(values_.size() - 1);
}

std::string graph::scoped_name(const std::string& name) const {
  std::string out;
  for (const auto& s : scopes_) out += s + ".";
  return out + name;
}

var graph::input(const std::string& name, cohort::shape s, dtype t) {
  std::string full = scoped_name(name);
  if (find(full) != no_value) {
    fail(make_error(errc::invalid_argument, "input: name '" + full + "' is already used"));
    return var{this, no_value};
  }
  for (auto d : s.dims())
    if (d < 0) {
      fail(make_error(errc::invalid_argument, "input '" + full + "': negative extent in " + s.to_string()));
      return var{this, no_value};
    }
  value_info v;
  v.type = {std::move(s), t};
  v.kind = value_kind::input;
  v.name = full;
  return var{this, add_value(std::move(v))};
}

var graph::parameter(const std::string& name, cohort::shape s, init_spec init) {
  for (auto d : s.dims())
    if (d <= 0) {
      fail(make_error(errc::invalid_argument,
                      "parameter '" + scoped_name(name) + "': extents must be positive, got " + s.to_string()));
      return var{this, no_value};
    }
  return parameter_piece(name, std::move(s), init);
}

var graph::parameter_piece(const std::string& name, cohort::shape s, init_spec init) {
  std::string full = scoped_name(name);
  if (find(full) != no_value) {
    fail(make_error(errc::invalid_argument, "parameter: name '" + full + "' is already used"));
    return var{this, no_value};
  }
  for (auto d : s.dims())
    if (d < 0) {
      fail(make_error(errc::invalid_argument, "parameter '" + full + "': a negative extent in " + s.to_string()));
      return var{this, no_value};
    }
  value_info v;
  v.type = {std::move(s), dtype::f32};
  v.kind = value_kind::parameter;
  v.name = full;
  v.requires_grad = true;
  v.init = init;
  return var{this, add_value(std::move(v))};
}

std::vector<var> graph::apply(op_kind kind, op_attrs attrs, const std::vector<var>& inputs) {
  std::vector<value_type> types;
  bool needs_grad = false;
  for (const auto& in : inputs) {
    if (!in.valid() || in.g != this) {
      if (in.g != nullptr && in.g != this)
        fail(make_error(errc::invalid_argument, std::string(cohort::to_string(kind)) + ": operand from another graph"));
      if (in.g == nullptr)
        fail(make_error(errc::invalid_argument, std::string(cohort::to_string(kind)) + ": operand is an empty var"));
      return {};  // an earlier error already explains this
    }
    types.push_back(value(in.id).type);
    needs_grad = needs_grad || value(in.id).requires_grad;
  }
  auto out_types = infer_shapes(kind, attrs, types);
  if (!out_types) {
    error e = out_types.error();
    if (!scopes_.empty()) e.message = "in " + scoped_name("").substr(0, scoped_name("").size() - 1) + ": " + e.message;
    fail(std::move(e));
    return {};
  }
  node n{kind, std::move(attrs), {}, {}, scopes_.empty() ? "" : scoped_name(""), origin_};
  for (const auto& in : inputs) n.inputs.push_back(in.id);
  std::vector<var> result;
  auto producer = static_cast<std::int32_t>(nodes_.size());
  for (auto& t : *out_types) {
    value_info v;
    v.type = std::move(t);
    v.producer = producer;
    v.requires_grad = needs_grad;
    value_id id = add_value(std::move(v));
    n.outputs.push_back(id);
    result.push_back(var{this, id});
  }
  nodes_.push_back(std::move(n));
  return result;
}

void graph::annotate(var v, const std::string& axis, placement p) {
  if (!v.valid() || v.g != this) return;  // an earlier error explains the invalid var
  auto& notes = values_[static_cast<std::size_t>(v.id)].annotations;
  for (auto& [a, q] : notes)
    if (a == axis) {
      q = p;
      return;
    }
  notes.emplace_back(axis, p);
}

placement graph::annotation(value_id id, const std::string& axis) const {
  for (const auto& [a, p] : value(id).annotations)
    if (a == axis) return p;
  return replicate{};
}

void graph::fail(error err) {
  if (failed_) return;
  failed_ = true;
  first_error_ = std::move(err);
}

status graph::check() const {
  if (failed_) return first_error_;
  return {};
}

std::vector<value_id> graph::parameters() const {
  std::vector<value_id> out;
  for (std::size_t i = 0; i < values_.size(); ++i)
    if (values_[i].kind == value_kind::parameter) out.push_back(static_cast<value_id>(i));
  return out;
}

std::vector<value_id> graph::inputs() const {
  std::vector<value_id> out;
  for (std::size_t i = 0; i < values_.size(); ++i)
    if (values_[i].kind == value_kind::input) out.push_back(static_cast<value_id>(i));
  return out;
}

value_id graph::find(const std::string& name) const {
  for (std::size_t i = 0; i < values_.size(); ++i)
    if (values_[i].kind != value_kind::activation && values_[i].name == name) return static_cast<value_id>(i);
  return no_value;
}

std::string graph::to_string() const {
  std::string out;
  for (const auto& n : nodes_) {
    for (std::size_t i = 0; i < n.outputs.size(); ++i) {
      out += i ? ", %" : "%";
      out += std::to_string(n.outputs[i]);
    }
    out += std::string(" = ") + cohort::to_string(n.kind) + "(";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const auto& v = value(n.inputs[i]);
      out += i ? ", %" : "%";
      out += std::to_string(n.inputs[i]);
      if (!v.name.empty()) out += " '" + v.name + "'";
      out += ' ';
      out += v.type.shape.to_string();
    }
    out += ") ->";
    for (auto o : n.outputs) {
      out += ' ';
      out += value(o).type.shape.to_string();
    }
    if (!n.scope.empty()) out += "  # " + n.scope;
    out += "\n";
  }
  return out;
}

}  // namespace cohort
