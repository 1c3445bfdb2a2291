// Option parsing: typed conversion from CLI text and from CAF config values.
#include "apps/driver/options.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/config_value.hpp>
#include <caf/settings.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <iostream>

namespace cohort::apps {
namespace {

// Sections that belong to CAF itself; their keys are forwarded to the actor system.
const char* const caf_sections[] = {"scheduler", "middleman", "logger", "stream", "work-stealing", "openssl", "caf"};

bool is_caf_section(const std::string& section) {
  return std::find(std::begin(caf_sections), std::end(caf_sections), section) != std::end(caf_sections);
}

bool parse_int(const std::string& s, std::int64_t& out) {
  const char* b = s.data();
  const char* e = b + s.size();
  auto [p, ec] = std::from_chars(b, e, out);
  return ec == std::errc() && p == e && !s.empty();
}

bool parse_real(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

bool parse_bool(const std::string& s, bool& out) {
  if (s == "true" || s == "1" || s == "yes" || s == "on") return out = true, true;
  if (s == "false" || s == "0" || s == "no" || s == "off") return out = false, true;
  return false;
}

bool parse_int_list(std::string s, std::vector<std::int64_t>& out) {
  if (s.size() >= 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
  std::vector<std::int64_t> values;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    std::int64_t v = 0;
    if (!parse_int(item, v)) return false;
    values.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  out = std::move(values);
  return true;
}

std::string type_word(const std::variant<std::int64_t*, double*, std::string*, bool*, std::vector<std::int64_t>*>& t) {
  switch (t.index()) {
    case 0:
      return "an integer";
    case 1:
      return "a number";
    case 2:
      return "a string";
    case 3:
      return "true or false";
    default:
      return "a list of integers like 784,128,10";
  }
}

std::string metavar(std::size_t index) {
  const char* names[] = {"INT", "NUM", "STR", "BOOL", "INTS"};
  return names[index];
}

// CAF's config value rendered back to the text form our CLI parser accepts.
std::string as_text(const caf::config_value& v) {
  if (auto s = caf::get_if<std::string>(&v)) return *s;
  if (auto l = caf::get_if<caf::config_value::list>(&v)) {
    std::string out;
    for (std::size_t i = 0; i < l->size(); ++i) {
      if (i > 0) out += ',';
      out += as_text((*l)[i]);
    }
    return out;
  }
  return caf::to_string(v);
}

}  // namespace

option_set::option_set(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

option_set& option_set::add_option(const std::string& key, target where, std::string help) {
  std::string def;
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>)
          def = p->empty() ? "\"\"" : *p;
        else if constexpr (std::is_same_v<T, bool>)
          def = *p ? "true" : "false";
        else if constexpr (std::is_same_v<T, double>) {
          def = std::to_string(*p);
          def.erase(def.find_last_not_of('0') + 1);
          if (!def.empty() && def.back() == '.') def.pop_back();
          if (*p != 0 && std::abs(*p) < 1e-3) def = caf::to_string(caf::config_value{*p});
        } else if constexpr (std::is_same_v<T, std::int64_t>)
          def = std::to_string(*p);
        else {
          for (std::size_t i = 0; i < p->size(); ++i) {
            if (i > 0) def += ',';
            def += std::to_string((*p)[i]);
          }
          if (def.empty()) def = "none";  // the help says what an empty list means (model.dims: by data set)
        }
      },
      where);
  options_.push_back({key, where, std::move(help), std::move(def)});
  return *this;
}

option_set& option_set::add(const std::string& key, std::int64_t& t, std::string help) {
  return add_option(key, &t, std::move(help));
}
option_set& option_set::add(const std::string& key, double& t, std::string help) {
  return add_option(key, &t, std::move(help));
}
option_set& option_set::add(const std::string& key, std::string& t, std::string help) {
  return add_option(key, &t, std::move(help));
}
option_set& option_set::add(const std::string& key, bool& t, std::string help) {
  return add_option(key, &t, std::move(help));
}
option_set& option_set::add(const std::string& key, std::vector<std::int64_t>& t, std::string help) {
  return add_option(key, &t, std::move(help));
}

const option_set::option* option_set::find(const std::string& key) const {
  for (const auto& o : options_)
    if (o.key == key) return &o;
  return nullptr;
}

bool option_set::was_set(const std::string& key) const {
  return std::find(set_keys_.begin(), set_keys_.end(), key) != set_keys_.end();
}

status option_set::set_from_text(const option& o, const std::string& text, const std::string& origin) {
  bool ok = std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::int64_t>)
          return parse_int(text, *p);
        else if constexpr (std::is_same_v<T, double>)
          return parse_real(text, *p);
        else if constexpr (std::is_same_v<T, std::string>) {
          *p = text;
          return true;
        } else if constexpr (std::is_same_v<T, bool>)
          return parse_bool(text, *p);
        else
          return parse_int_list(text, *p);
      },
      o.where);
  if (!ok)
    return make_error(errc::invalid_argument,
                      origin + ": " + o.key + " must be " + type_word(o.where) + ", got '" + text + "'");
  set_keys_.push_back(o.key);
  return {};
}

status option_set::read_config_file(const std::string& path) {
  if (!std::ifstream(path)) return make_error(errc::not_found, "cannot open config file '" + path + "'");
  auto parsed = caf::actor_system_config::parse_config_file(path.c_str());
  if (!parsed)
    return make_error(errc::invalid_argument, "config file '" + path + "': " + caf::to_string(parsed.error()) +
                                                  " (INI format: [section] then key=value; strings need quotes)");
  for (const auto& [section, value] : *parsed) {
    const auto* entries = caf::get_if<caf::settings>(&value);
    if (entries == nullptr)
      return make_error(errc::invalid_argument,
                        "config file '" + path + "': '" + section + "' must be a [section], not a top-level key");
    for (const auto& [key, v] : *entries) {
      std::string full = section + "." + key;
      if (is_caf_section(section)) {
        caf_args_.push_back("--" + full + "=" + caf::to_string(v));
        continue;
      }
      const option* o = find(full);
      if (o == nullptr)
        return make_error(errc::invalid_argument,
                          "config file '" + path + "': unknown option " + full + " (see --help)");
      // Type check against CAF's parsed value before converting.
      bool type_ok = std::visit(
          [&](auto* p) {
            using T = std::remove_pointer_t<decltype(p)>;
            if constexpr (std::is_same_v<T, std::int64_t>)
              return caf::holds_alternative<caf::config_value::integer>(v);
            else if constexpr (std::is_same_v<T, double>)
              return caf::holds_alternative<caf::config_value::real>(v) ||
                     caf::holds_alternative<caf::config_value::integer>(v);
            else if constexpr (std::is_same_v<T, std::string>)
              return caf::holds_alternative<std::string>(v);
            else if constexpr (std::is_same_v<T, bool>)
              return caf::holds_alternative<bool>(v);
            else
              return caf::holds_alternative<caf::config_value::list>(v) || caf::holds_alternative<std::string>(v) ||
                     caf::holds_alternative<caf::config_value::integer>(v);
          },
          o->where);
      if (!type_ok)
        return make_error(errc::invalid_argument, "config file '" + path + "': " + full + " must be " +
                                                      type_word(o->where) + ", got " + v.type_name() + " " +
                                                      caf::to_string(v));
      std::string text = as_text(v);
      if (auto st = set_from_text(*o, text, "config file '" + path + "'"); !st) return st;
    }
  }
  return {};
}

result<parse_outcome> option_set::parse(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse(args);
}

result<parse_outcome> option_set::parse(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << help_text();
      return parse_outcome::help_shown;
    }
  // The config file first, so that the command line overrides it.
  for (const auto& a : args)
    if (a.rfind("--config-file=", 0) == 0)
      if (auto st = read_config_file(a.substr(14)); !st) return st.error();
  for (const auto& a : args) {
    if (a.rfind("--config-file=", 0) == 0) continue;
    if (a.rfind("--", 0) != 0)
      return make_error(errc::invalid_argument,
                        "unexpected argument '" + a + "' (options look like --section.key=value)");
    auto eq = a.find('=');
    std::string key = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto dot = key.find('.');
    if (dot != std::string::npos && is_caf_section(key.substr(0, dot))) {
      caf_args_.push_back(a);
      continue;
    }
    const option* o = find(key);
    if (o == nullptr) return make_error(errc::invalid_argument, "unknown option --" + key + " (see --help)");
    if (eq == std::string::npos) {
      if (!std::holds_alternative<bool*>(o->where))
        return make_error(errc::invalid_argument, "--" + key + " needs a value: --" + key + "=VALUE");
      *std::get<bool*>(o->where) = true;
      set_keys_.push_back(key);
      continue;
    }
    if (auto st = set_from_text(*o, a.substr(eq + 1), "command line"); !st) return st.error();
  }
  return parse_outcome::run;
}

std::string option_set::help_text() const {
  std::string out =
      "usage: " + program_ + " [--config-file=FILE] [--section.key=VALUE ...]\n\n" + summary_ + "\n\noptions:\n";
  for (const auto& o : options_) {
    std::string left = "  --" + o.key + "=" + metavar(o.where.index());
    if (left.size() < 32)
      left.resize(32, ' ');
    else
      left += "\n" + std::string(32, ' ');
    out += left + o.help + " (default: " + o.default_text + ")\n";
  }
  out +=
      "  --config-file=FILE              read options from a CAF INI file: [train] then steps=100;\n"
      "                                  strings in quotes; the command line overrides the file\n"
      "  --help                          this text\n\n"
      "CAF's own options (--scheduler.*, --middleman.*, --logger.*) are passed to the actor system.\n";
  return out;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; !text.empty() && at <= text.size();) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    out.push_back(text.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

}  // namespace cohort::apps
