// Process 0's view of the running job, as a replacement receives it from the network: it
// round-trips, and every malformed field is refused naming it before anything is used.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "actors/joining.hpp"

using namespace cohort;
using namespace cohort::actors;

namespace {

joining_state dp2_pp2() {
  joining_state s;
  s.plan.plan.dp = 2;
  s.plan.plan.pp = 2;
  s.plan.plan.micro_batches = 2;
  s.plan.cuts = {3};
  s.owner_before = {0, 0, 1, 1};
  s.live_before = {true, true, false};
  s.replaced_before = 1;
  s.committed = 11;
  return s;
}

std::string refusal(const std::string& text) {
  auto r = joining_from_text(text, 3);
  return r ? std::string("accepted") : r.error().message;
}

}  // namespace

TEST_CASE("a replacement's view of the running job round-trips") {
  const auto s = dp2_pp2();
  auto back = joining_from_text(to_text(s), 3);
  REQUIRE_MESSAGE(back, (back ? "" : back.error().message));
  CHECK(back->plan.plan.dp == 2);
  CHECK(back->plan.plan.pp == 2);
  CHECK(back->plan.plan.micro_batches == 2);
  CHECK(back->plan.cuts == std::vector<std::size_t>{3});
  CHECK(back->owner_before == s.owner_before);
  CHECK(back->live_before == s.live_before);
  CHECK(back->replaced_before == 1);
  CHECK(back->committed == 11);
}

TEST_CASE("a malformed view of the running job is refused naming the field") {
  const auto good = nlohmann::json::parse(to_text(dp2_pp2()));
  auto with = [&](const char* field, const nlohmann::json& value) {
    auto j = good;
    j[field] = value;
    return j.dump();
  };
  auto without = [&](const char* field) {
    auto j = good;
    j.erase(field);
    return j.dump();
  };
  CHECK(refusal("not json").find("not a JSON object") != std::string::npos);
  CHECK(refusal("[1, 2]").find("not a JSON object") != std::string::npos);
  for (const char* f : {"plan", "owner_before", "live_before", "replaced_before", "committed"})
    CHECK(refusal(without(f)).find(std::string("no \"") + f + "\"") != std::string::npos);
  CHECK(refusal(with("owner_before", {0, 0, 1})).find("\"owner_before\" must name the process of each") !=
        std::string::npos);  // 3 owners for 4 ranks
  CHECK(refusal(with("owner_before", {0, 0, 1, 3})).find("not a process of 3") != std::string::npos);
  CHECK(refusal(with("owner_before", {0, 0, 1, -1})).find("not a process of 3") != std::string::npos);
  CHECK(refusal(with("owner_before", {0, 0, 1, "1"})).find("not a process of 3") != std::string::npos);
  CHECK(refusal(with("live_before", {true, true})).find("one flag per process") != std::string::npos);
  CHECK(refusal(with("live_before", {true, 1, false})).find("not true or false") != std::string::npos);
  CHECK(refusal(with("replaced_before", -1)).find("\"replaced_before\" must be a count") != std::string::npos);
  CHECK(refusal(with("committed", -2)).find("\"committed\" must be an integer >= -1") != std::string::npos);
  CHECK(refusal(with("committed", 1.5)).find("\"committed\" must be an integer >= -1") != std::string::npos);
  CHECK(refusal(with("plan", "dp2")) != "accepted");
}

TEST_CASE("a joining process's view carries the plan the job changes to, and a malformed one is refused") {
  auto s = dp2_pp2();
  s.next = planner::plan_choice{};
  s.next->plan.dp = 3;
  s.next_replan_s = 0.25;
  s.next_predicted_step_s = 0.5;
  auto back = joining_from_text(to_text(s), 3);
  REQUIRE_MESSAGE(back, (back ? "" : back.error().message));
  REQUIRE(back->next);
  CHECK(back->next->plan.dp == 3);
  CHECK(back->next_replan_s == 0.25);
  CHECK(back->next_predicted_step_s == 0.5);
  CHECK_FALSE(joining_from_text(to_text(dp2_pp2()), 3)->next);  // a replacement's: none
  auto j = nlohmann::json::parse(to_text(s));
  j["next_predicted_step_s"] = -1;
  CHECK(refusal(j.dump()).find("\"next_predicted_step_s\" must be a number >= 0") != std::string::npos);
  j = nlohmann::json::parse(to_text(s));
  j.erase("next_replan_s");
  CHECK(refusal(j.dump()).find("\"next_replan_s\"") != std::string::npos);
  j = nlohmann::json::parse(to_text(s));
  j["next"]["dp"] = 0;
  CHECK(refusal(j.dump()).find("next plan") != std::string::npos);
}
