// The in-process channel's contract: zero copy, FIFO per (sender, tag), matching by tag,
// bounded waits, bad peers rejected.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "transport/in_process.hpp"

using namespace cohort;
using namespace cohort::transport;
using namespace std::chrono_literals;

TEST_CASE("a send hands the receiver the sender's storage (zero copy)") {
  in_process_fabric f(2);
  tensor t = tensor::full({1024}, 3.f);
  const float* data = t.data<float>();
  REQUIRE(f.endpoint(0).send(1, 1, t, 1s).ok());
  auto got = f.endpoint(1).recv(0, 1, 1s);
  REQUIRE(got.ok());
  CHECK(got->data<float>() == data);
}

TEST_CASE("messages are FIFO per sender and tag, and matched by tag") {
  in_process_fabric f(2);
  for (int i = 0; i < 5; ++i) REQUIRE(f.endpoint(0).send(1, 100, tensor::full({1}, static_cast<float>(i)), 1s).ok());
  REQUIRE(f.endpoint(0).send(1, 200, tensor::full({1}, 99.f), 1s).ok());
  CHECK(f.endpoint(1).recv(0, 200, 1s)->at(0) == 99.f);  // a later tag is not blocked by earlier ones
  for (int i = 0; i < 5; ++i) CHECK(f.endpoint(1).recv(0, 100, 1s)->at(0) == static_cast<float>(i));
}

TEST_CASE("a receive with nothing to take times out with a message naming both ranks") {
  in_process_fabric f(2);
  auto got = f.endpoint(1).recv(0, 5, 20ms);
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().code == errc::timeout);
  CHECK(got.error().message == "recv: rank 1 waited 20 ms for rank 0 (tag 5)");
}

TEST_CASE("nonexistent peers are rejected") {
  in_process_fabric f(2);
  CHECK(f.endpoint(0).send(2, 1, tensor::zeros({1}), 1s).error().code == errc::invalid_argument);
  CHECK(f.endpoint(0).recv(-1, 1, 1s).error().code == errc::invalid_argument);
}
