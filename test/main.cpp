// The one doctest main shared by every test binary. A run that was asked for test cases and
// ran none fails: ctest runs each case by name (`--test-case=NAME`), and a name that the
// discovery split (CMake lists break at ';') or that matches nothing would otherwise pass
// without testing anything.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned cases_run = 0;

// Listens for the end of the run and keeps how many test cases passed the filters.
struct count_cases : doctest::IReporter {
  explicit count_cases(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override { cases_run = s.numTestCasesPassingFilters; }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("count_cases", 1, count_cases);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit()) return rc;  // --help, --list-test-cases, ...
  if (rc == 0 && cases_run == 0) {
    std::fprintf(
        stderr,
        "no test case matched the filters: nothing was tested (a test name with ';' is split by ctest's discovery)\n");
    return 1;
  }
  return rc;
}
