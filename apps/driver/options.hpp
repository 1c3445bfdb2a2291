// Command-line and config-file options for the apps, on top of CAF's config system: the
// file is CAF's INI format (`[train]` then `steps=100`, strings in quotes), read with CAF's
// own parser, and every option also works as `--section.key=value`; the command line wins.
// Unlike CAF alone, a wrong-typed or unknown option is an error, not silently dropped.
// CAF's own sections (scheduler, middleman, logger, ...) are collected for the actor system.
//
//   int main(int argc, char** argv) {
//     std::int64_t steps = 100;  std::string name = "digits";
//     option_set opts("mlp", "Trains a multi-layer perceptron.");
//     opts.add("train.steps", steps, "optimizer steps");
//     opts.add("data.name", name, "digits, fashion, mnist or synth");
//     auto r = opts.parse(argc, argv);      // --train.steps=5, --config-file=run.ini, CAF's --scheduler.*
//     if (!r) return fail("mlp", r.error().message, 2);   // one line: the option and what is wrong
//     if (*r == parse_outcome::help_shown) return 0;
//     return steps > 0 ? 0 : 2;
//   }
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "graph/error.hpp"

namespace cohort::apps {

enum class parse_outcome { run, help_shown };

class option_set {
 public:
  option_set(std::string program, std::string summary);

  option_set& add(const std::string& key, std::int64_t& target, std::string help);
  option_set& add(const std::string& key, double& target, std::string help);
  option_set& add(const std::string& key, std::string& target, std::string help);
  option_set& add(const std::string& key, bool& target, std::string help);
  option_set& add(const std::string& key, std::vector<std::int64_t>& target, std::string help);

  /// Reads --config-file=F (if given) and then the command line into the targets.
  /// `--help` prints help_text() to stdout and returns help_shown.
  result<parse_outcome> parse(int argc, char** argv);
  result<parse_outcome> parse(const std::vector<std::string>& args);

  std::string help_text() const;
  /// `--section.key=value` arguments for CAF's own sections, in the order given.
  const std::vector<std::string>& caf_arguments() const { return caf_args_; }
  /// Keys the user set explicitly (file or command line), e.g. "train.steps".
  bool was_set(const std::string& key) const;
  /// Whether this program has the option at all.
  bool has(const std::string& key) const { return find(key) != nullptr; }

 private:
  using target = std::variant<std::int64_t*, double*, std::string*, bool*, std::vector<std::int64_t>*>;
  struct option {
    std::string key;
    target where;
    std::string help;
    std::string default_text;
  };
  option_set& add_option(const std::string& key, target where, std::string help);
  const option* find(const std::string& key) const;
  status set_from_text(const option& o, const std::string& text, const std::string& origin);
  status read_config_file(const std::string& path);

  std::string program_, summary_;
  std::vector<option> options_;
  std::vector<std::string> caf_args_;
  std::vector<std::string> set_keys_;
};

/// A string option's comma-separated list as written: "a,b" gives {"a", "b"}, "" none, an
/// empty item stays empty (its caller names it).
std::vector<std::string> split_commas(const std::string& text);

}  // namespace cohort::apps
