// Crash safety of the index builders (issue 8, "Reliability"): real `searchctl index` and
// `searchctl import-ciff` processes are killed with SIGKILL, 20 of each at random moments (fixed
// seed; uniform over the measured duration of an uninterrupted build, plus kills right at the
// start and around the end) and 6 more at the moments the output changes state, which random
// times rarely hit (found by polling: DIR.tmp-<pid> created, its shard-0 created, its
// manifest.json written, DIR published; 0 or 0.5 ms later). The output directory is then checked
// with more real processes:
//
//   * either it does not load at all, with a clear error (`searchctl verify` and `searchctl query`
//     exit 1 with a message),
//   * or `searchctl verify` passes (every shard's SST checksum matches the manifest) AND the index
//     holds exactly what an uninterrupted build holds: the same `stats --checksum` content CRC
//     (every key and value of every column family), the same manifest apart from checksums and
//     `created_by`, and the same `searchctl query` answers (ids, scores, order) in and/or modes.
//
// Never: loads with other contents, verify passing with other contents, verify or query crashing
// (killed by a signal) or hanging (a 60 s limit). Leftover DIR.tmp-<pid> directories are checked the
// same way (a leftover that holds a manifest must be a complete, correct index). Then the natural
// recovery: the same command run again must succeed and build the correct index when DIR is
// absent (removing the leftovers of the killed build), or refuse cleanly ("already exists") when
// the killed build had already published, after which `--force` must rebuild it correctly.
// A third scenario kills `--force` rebuilds over an existing index of other contents: DIR must
// then always hold one of the two complete indexes, never a mix and never nothing.
//
// Reproducing a failure: the failure message prints the command, the kill time after fork
// (milliseconds) or the event, and the trial number; the corpus is fixed (seed 8). Each run prints
// every trial's outcome and the distributions (no index / leftover / complete index).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../scale/scale_fixture.hpp"
#include "tools_fixture.hpp"

namespace search {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// CRASH_SAFETY_SEARCHCTL overrides the binary: a way to check that this test catches a
// deliberately broken builder (a wrapper script that `exec`s searchctl).
const std::string kSearchctl = [] {
  const char* v = std::getenv("CRASH_SAFETY_SEARCHCTL");
  return std::string(v != nullptr && *v != '\0' ? v : SEARCHCTL_PATH);
}();
constexpr double kCheckTimeoutS = 60;  // verify / query / stats: longer means a hang
constexpr int kTrials = 20;            // killed builds per scenario (the number)
constexpr int kForceTrials = 2;        // --force rebuilds killed at random times, per builder
constexpr uint64_t kKillSeed = 20240808;

// ---------------------------------------------------------------------------------------------
// Processes.

struct Exec {
  bool exited = false;     // exited normally (then `code` is its status)
  int code = -1;
  int signal = 0;          // the signal that ended it, when not exited
  bool timed_out = false;  // killed by us after the limit
  bool killed_by_us = false;
  double seconds = 0;      // fork to reap
  std::string out, err;
};

std::string Describe(const Exec& e) {
  if (e.timed_out) return "HUNG (killed after " + std::to_string(e.seconds) + " s)";
  if (e.killed_by_us) return "killed by the test";
  if (!e.exited) return "CRASHED with signal " + std::to_string(e.signal) + " (" + strsignal(e.signal) + ")";
  return "exit " + std::to_string(e.code);
}

// A run the test tried to kill either finished on its own (then with exit 0) or died of the
// SIGKILL; it never hung.
void ExpectFinishedOrKilled(const Exec& e, const std::string& ctx) {
  if (e.exited) {
    EXPECT_EQ(e.code, 0) << ctx << "the build failed on its own: " << e.err;
  } else {
    EXPECT_EQ(e.signal, SIGKILL) << ctx << Describe(e);
    EXPECT_FALSE(e.timed_out) << ctx << "the build hung";
  }
}

std::string Quoted(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// When to kill a build: `at_s` seconds after the fork, or `delay_s` after `event(pid)` first
// holds (polled every ~100 us), or never (at_s < 0 and no event).
struct KillPlan {
  double at_s = -1;
  std::function<bool(pid_t)> event;
  double delay_s = 0;
};

// Runs argv (argv[0] a path) with stdout and stderr in files `io_base`.out/.err, sending SIGKILL
// as `kill` says unless the process has exited by then; a process still running after
// `timeout_s` is killed and marked timed out.
Exec Run(const std::vector<std::string>& argv, const std::string& io_base, const KillPlan& kill, double timeout_s) {
  const std::string out_path = io_base + ".out", err_path = io_base + ".err";
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) ::_exit(126);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  Exec r;
  if (pid < 0) {
    r.err = "fork failed";
    return r;
  }
  int status = 0;
  bool reaped = false;
  const auto after = [&](double seconds) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  const auto kill_now = [&] {
    reaped = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!reaped) {
      ::kill(pid, SIGKILL);
      r.killed_by_us = true;
      ::waitpid(pid, &status, 0);
      reaped = true;
    }
  };
  if (kill.at_s >= 0) {
    std::this_thread::sleep_until(after(kill.at_s));
    kill_now();
  }
  const auto deadline = after(timeout_s);
  while (!reaped) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      reaped = true;
      break;
    }
    if (kill.event && kill.event(pid)) {
      if (kill.delay_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(kill.delay_s));
      kill_now();
      break;
    }
    if (Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      reaped = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(kill.event ? 100 : 500));
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) {
    r.exited = true;
    r.code = WEXITSTATUS(status);
    r.killed_by_us = false;  // it beat the kill
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  r.out = testing::ReadText(out_path);
  r.err = testing::ReadText(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return r;
}

// ---------------------------------------------------------------------------------------------
// What an index directory holds, seen through the real tools.

struct Expected {
  std::string content_crc;           // stats --checksum
  Json manifest;                     // without checksums and created_by
  std::vector<std::string> answers;  // per mode, per query: the query and its hits
};

Json ComparableManifest(const std::string& dir, std::string* error) {
  Json m;
  try {
    m = Json::parse(testing::ReadText(dir + "/manifest.json"));
    m.erase("created_by");
    for (auto& s : m.at("shards")) s.erase("checksum");
  } catch (const std::exception& e) {
    *error = std::string("manifest.json does not parse: ") + e.what();
  }
  return m;
}

class Checker {
 public:
  Checker(std::string work, std::string queries) : work_(std::move(work)), queries_(std::move(queries)) {}

  Exec Ctl(std::vector<std::string> args, const KillPlan& kill = {}) {
    args.insert(args.begin(), kSearchctl);
    return Run(args, work_ + "/io-" + std::to_string(counter_++), kill, kCheckTimeoutS);
  }

  // Reads what `dir` holds through verify, stats and query. On a directory that verifies, fills
  // `got` and returns ""; on one that does not load, returns "" with `*loads` false; returns a
  // description of what is wrong otherwise (a crash, a hang, an unclear error, loading though
  // verify fails).
  std::string Inspect(const std::string& dir, bool* loads, Expected* got) {
    *loads = false;
    const Exec v = Ctl({"verify", "--index", dir});
    if (!v.exited || (v.code != 0 && v.code != 1)) return "verify " + Describe(v) + ": " + v.out + v.err;
    if (v.code == 1) {
      if (v.out.empty() && v.err.empty()) return "verify failed without saying why";
      // It must not load either: LocalIndex::Open (inside query) must refuse it, clearly.
      const Exec q = Ctl({"query", "--index", dir, "--query", "w1 w2"});
      if (!q.exited || (q.code != 0 && q.code != 1)) return "query on an unverifiable index " + Describe(q) + ": " + q.err;
      if (q.code == 0)
        return "verify fails (" + v.out + ") but LocalIndex::Open loads it and answers: " + q.out.substr(0, 300);
      if (q.err.find("error") == std::string::npos) return "query refused it without a clear error: " + q.err;
      last_refusal_ = v.out;
      return "";
    }
    if (v.out != "OK\n") return "verify exit 0 but printed " + v.out;
    *loads = true;
    std::string error;
    got->manifest = ComparableManifest(dir, &error);
    if (!error.empty()) return "verify passed but " + error;
    const Exec s = Ctl({"stats", "--index", dir, "--checksum"});
    if (!s.exited || s.code != 0) return "stats on a verified index: " + Describe(s) + ": " + s.err;
    try {
      got->content_crc = Json::parse(s.out).at("content_crc32c").get<std::string>();
    } catch (const std::exception& e) {
      return std::string("stats output does not parse: ") + e.what() + ": " + s.out;
    }
    got->answers.clear();
    for (const char* mode : {"or", "and"}) {
      const Exec q = Ctl({"query", "--index", dir, "--queries", queries_, "--mode", mode, "--k", "10", "--threads", "2"});
      if (!q.exited || q.code != 0) return std::string("query --mode ") + mode + " on a verified index: " + Describe(q) + ": " + q.err;
      for (const auto& line : testing::Lines(q.out)) {
        try {
          const Json j = Json::parse(line);
          got->answers.push_back(std::string(mode) + " " + j.at("query").dump() + " -> " + j.at("hits").dump());
        } catch (const std::exception& e) {
          return std::string("query output does not parse: ") + e.what() + ": " + line;
        }
      }
    }
    return "";
  }

  // "" when `got` equals `want`, else the first difference.
  static std::string Diff(const Expected& want, const Expected& got) {
    if (got.content_crc != want.content_crc)
      return "content CRC " + got.content_crc + ", the uninterrupted build's is " + want.content_crc;
    if (got.manifest != want.manifest)
      return "manifest " + got.manifest.dump() + ", the uninterrupted build's is " + want.manifest.dump();
    if (got.answers.size() != want.answers.size())
      return std::to_string(got.answers.size()) + " answers, expected " + std::to_string(want.answers.size());
    for (size_t i = 0; i < got.answers.size(); ++i) {
      if (got.answers[i] != want.answers[i]) return "answer " + got.answers[i] + ", expected " + want.answers[i];
    }
    return "";
  }

  const std::string& last_refusal() const { return last_refusal_; }

 private:
  std::string work_, queries_;
  int counter_ = 0;
  std::string last_refusal_;
};

// Entries of `parent` named `base` + ".tmp-" / ".old-" + digits.
std::vector<std::string> Leftovers(const std::string& parent, const std::string& base) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(parent)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(base + ".tmp-", 0) == 0 || name.rfind(base + ".old-", 0) == 0) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Kill times (seconds after fork) for `n` trials of a build lasting `d` seconds: one right at the
// fork, one a millisecond later (inside process start-up), stratified uniform draws over [0, d)
// (stratum i of n-6 holds one draw), and four in [0.9 d, 1.1 d) around the end.
std::vector<double> KillTimes(int n, double d, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> t = {0.0, 0.001};
  const int strata = n - 6;
  for (int i = 0; i < strata; ++i) t.push_back(d * (i + u(rng)) / strata);
  for (int i = 0; i < 4; ++i) t.push_back(d * (0.9 + 0.2 * u(rng)));
  t.resize(n);
  return t;
}

// ---------------------------------------------------------------------------------------------
// The fixture: one corpus, written as JSON lines and as CIFF; a query file.

class CrashSafetyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    // 12K documents, 5K-word Zipf vocabulary: a 3-shard build takes ~0.4-0.6 s on 2 cores.
    const auto docs = testing::RandomCorpus(12000, 5000, 80, 8);
    testing::WriteJsonl(*tmp_ / "corpus.jsonl", docs);
    // The first half: the "old" index that --force rebuilds replace.
    testing::WriteJsonl(*tmp_ / "half.jsonl", std::vector<testing::Doc>(docs.begin(), docs.begin() + docs.size() / 2));
    // The same text as CIFF, twice over (24K documents) so an import lasts long enough to be hit.
    std::vector<scaletest::TextDoc> texts;
    for (int copy = 0; copy < 2; ++copy) {
      for (const auto& d : docs) texts.push_back({d.id + "/" + std::to_string(copy), d.contents});
    }
    scaletest::WriteBytes(*tmp_ / "corpus.ciff", scaletest::MakeCiff(texts, scaletest::Invert(texts), 5));
    texts.resize(texts.size() / 4);
    scaletest::WriteBytes(*tmp_ / "quarter.ciff", scaletest::MakeCiff(texts, scaletest::Invert(texts), 6));
    std::string q;
    for (const auto& text : scaletest::RandomQueries(30, 5000, 9)) q += text + "\n";
    q += "w0 w1\nw3 w4 w5\nw4990\nabsentword w2\n";
    testing::WriteText(*tmp_ / "queries.txt", q);
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }

  // The command that builds into `out` (argv without the binary).
  using Command = std::function<std::vector<std::string>(const std::string& input, const std::string& out)>;

  static std::vector<std::string> IndexCmd(const std::string& input, const std::string& out) {
    return {"index", "--input", input, "--out", out, "--shards", "3", "--threads", "2", "--quiet"};
  }
  static std::vector<std::string> ImportCmd(const std::string& input, const std::string& out) {
    return {"import-ciff", input, "--out", out, "--shards", "3", "--threads", "2"};
  }

  // Builds `input` uninterrupted `runs` times (1 or 2; two builds must agree: the comparison
  // relies on it) and returns what the index holds; `*seconds` is the mean duration.
  Expected Reference(const Command& cmd, const std::string& input, const std::string& name, int runs, double* seconds) {
    Checker c(tmp_->path(), *tmp_ / "queries.txt");
    Expected first, second;
    double total = 0;
    for (Expected* e : {&first, &second}) {
      if (e == &second && runs < 2) break;
      const std::string dir = *tmp_ / (name + (e == &first ? "-ref1" : "-ref2"));
      fs::remove_all(dir);
      const Exec b = c.Ctl(cmd(input, dir));
      EXPECT_TRUE(b.exited && b.code == 0) << Quoted(cmd(input, dir)) << ": " << Describe(b) << ": " << b.err;
      total += b.seconds;
      bool loads = false;
      const std::string bad = c.Inspect(dir, &loads, e);
      EXPECT_EQ(bad, "") << dir;
      EXPECT_TRUE(loads) << dir;
      fs::remove_all(dir);
    }
    if (runs >= 2) {
      EXPECT_EQ(Checker::Diff(first, second), "") << "two uninterrupted builds of " << input << " differ";
    }
    size_t nonempty = 0;
    for (const auto& a : first.answers) nonempty += a.find("\"id\"") != std::string::npos ? 1 : 0;
    EXPECT_GT(nonempty, first.answers.size() / 2) << "the query comparison would be nearly vacuous";
    *seconds = total / std::min(runs, 2);
    return first;
  }

  // `kTrials` killed builds of `input` into a fresh directory at random times, then kills at the
  // moments where the directory changes state (the temporary directory created, the first shard
  // created, manifest.json written, DIR published), each followed by the checks and the re-run.
  // Prints the outcome distributions.
  void KilledBuilds(const std::string& what, const Command& cmd, const std::string& input) {
    double d = 0;
    const Expected want = Reference(cmd, input, what, /*runs=*/2, &d);
    ASSERT_FALSE(HasFailure());
    std::printf("[%s] uninterrupted build: %.3f s (mean of 2); kill times uniform over it, seed %llu\n", what.c_str(), d,
                static_cast<unsigned long long>(kKillSeed));
    const std::string parent = *tmp_ / (what + "-trials");
    const std::string dir = parent + "/idx";
    struct Trial {
      std::string label;
      KillPlan plan;
      bool timed;
    };
    std::vector<Trial> trials;
    for (double t : KillTimes(kTrials, d, kKillSeed)) {
      char label[96];
      std::snprintf(label, sizeof(label), "kill at %.1f ms (%.1f%% of the build)", t * 1e3, d > 0 ? 100 * t / d : 0.0);
      KillPlan plan;
      plan.at_s = t;
      trials.push_back({label, plan, true});
    }
    const auto tmp_of = [dir](pid_t pid) { return dir + ".tmp-" + std::to_string(pid); };
    const std::vector<std::pair<std::string, std::function<bool(pid_t)>>> events = {
        {"DIR.tmp-<pid> created", [tmp_of](pid_t pid) { return fs::exists(tmp_of(pid)); }},
        {"DIR.tmp-<pid>/shard-0 created", [tmp_of](pid_t pid) { return fs::exists(tmp_of(pid) + "/shard-0"); }},
        {"DIR.tmp-<pid>/manifest.json written", [tmp_of](pid_t pid) { return fs::exists(tmp_of(pid) + "/manifest.json"); }},
        {"DIR published", [dir](pid_t) { return fs::exists(dir); }},
    };
    for (const auto& [name, event] : events) {
      for (double delay : {0.0, 0.0005}) {
        if (delay > 0 && name.find("created") != std::string::npos) continue;
        KillPlan plan;
        plan.event = event;
        plan.delay_s = delay;
        trials.push_back({"kill " + std::to_string(static_cast<int>(delay * 1e6)) + " us after " + name, plan, false});
      }
    }
    std::map<std::string, int> timed_outcomes, event_outcomes;
    for (size_t i = 0; i < trials.size(); ++i) {
      const Trial& trial = trials[i];
      fs::remove_all(parent);
      fs::create_directories(parent);
      Checker c(parent, *tmp_ / "queries.txt");
      const auto argv = cmd(input, dir);
      const std::string ctx = "[" + what + " trial " + std::to_string(i) + ": " + trial.label + "] searchctl " +
                              Quoted(argv) + ": ";

      const Exec killed = c.Ctl(argv, trial.plan);
      ExpectFinishedOrKilled(killed, ctx);
      std::string outcome = killed.exited ? "finished before the kill" : "";
      // DIR.
      bool loads = false;
      Expected got;
      EXPECT_EQ(c.Inspect(dir, &loads, &got), "") << ctx << "DIR";
      if (loads) {
        EXPECT_EQ(Checker::Diff(want, got), "") << ctx << "DIR loads with other contents than the uninterrupted build";
        if (outcome.empty()) outcome = "killed: complete index at DIR";
      } else if (outcome.empty()) {
        outcome = fs::exists(dir) ? "killed: DIR exists but does not load" : "killed: no DIR";
      } else {
        ADD_FAILURE() << ctx << "the build exited 0 but DIR does not load: " << c.last_refusal();
      }
      // Leftovers: one that holds a manifest must be complete and correct, the others must not load.
      const auto left = Leftovers(parent, "idx");
      EXPECT_LE(left.size(), 1u) << ctx;
      for (const auto& l : left) {
        bool l_loads = false;
        Expected l_got;
        EXPECT_EQ(c.Inspect(l, &l_loads, &l_got), "") << ctx << "leftover " << l;
        if (l_loads) {
          EXPECT_EQ(Checker::Diff(want, l_got), "") << ctx << "leftover " << l << " loads with other contents";
          outcome += ", DIR.tmp-<pid> left holding a complete index (killed before the rename)";
        } else {
          outcome += fs::exists(l + "/manifest.json") ? ", DIR.tmp-<pid> left with a manifest that does not verify"
                                                       : ", DIR.tmp-<pid> left (does not load)";
        }
      }
      ++(trial.timed ? timed_outcomes : event_outcomes)[outcome];

      // Recovery: the same command again (then with --force when DIR was already complete).
      const Exec again = c.Ctl(argv);
      if (loads) {
        EXPECT_TRUE(again.exited && again.code == 1) << ctx << "re-run over a complete DIR: " << Describe(again);
        EXPECT_NE(again.err.find("already exists"), std::string::npos) << ctx << again.err;
        auto forced = argv;
        forced.push_back("--force");
        const Exec f = c.Ctl(forced);
        EXPECT_TRUE(f.exited && f.code == 0) << ctx << "re-run with --force: " << Describe(f) << ": " << f.err;
      } else {
        EXPECT_TRUE(again.exited && again.code == 0) << ctx << "re-run: " << Describe(again) << ": " << again.err;
        if (!left.empty()) {
          EXPECT_NE(again.err.find("removed leftover"), std::string::npos) << ctx << "re-run: " << again.err;
        }
      }
      Expected rebuilt;
      bool r_loads = false;
      EXPECT_EQ(c.Inspect(dir, &r_loads, &rebuilt), "") << ctx << "after the re-run";
      EXPECT_TRUE(r_loads) << ctx << "after the re-run DIR does not load: " << c.last_refusal();
      if (r_loads) {
        EXPECT_EQ(Checker::Diff(want, rebuilt), "") << ctx << "the re-run built other contents";
      }
      EXPECT_TRUE(Leftovers(parent, "idx").empty()) << ctx << "leftovers remain after the re-run";
      std::printf("[%s trial %2zu] %-52s -> %s (process ran %.1f ms)\n", what.c_str(), i, trial.label.c_str(),
                  outcome.c_str(), killed.seconds * 1e3);
      std::fflush(stdout);
    }
    fs::remove_all(parent);
    std::printf("[%s] outcomes of %d builds killed at random times:\n", what.c_str(), kTrials);
    for (const auto& [o, n] : timed_outcomes) std::printf("  %3d  %s\n", n, o.c_str());
    std::printf("[%s] outcomes of %zu builds killed at state changes:\n", what.c_str(), trials.size() - kTrials);
    for (const auto& [o, n] : event_outcomes) std::printf("  %3d  %s\n", n, o.c_str());
    std::fflush(stdout);
  }

  // `kForceTrials` `--force` rebuilds of `input` over a complete index of `old_input`, killed at
  // random times and at the state changes (new manifest written, DIR swapped): DIR must hold the
  // old index or the new one, complete either way; the same command then rebuilds it correctly.
  void KilledForcedRebuilds(const std::string& what, const Command& cmd, const std::string& old_input,
                            const std::string& input) {
    double d_old = 0, d = 0;
    const Expected want_old = Reference(cmd, old_input, what + "-old", /*runs=*/1, &d_old);
    const Expected want = Reference(cmd, input, what + "-new", /*runs=*/1, &d);
    ASSERT_FALSE(HasFailure());
    ASSERT_NE(want_old.content_crc, want.content_crc);
    const std::string old_dir = *tmp_ / (what + "-old-index");
    {
      Checker c(tmp_->path(), *tmp_ / "queries.txt");
      fs::remove_all(old_dir);
      const Exec b = c.Ctl(cmd(old_input, old_dir));
      ASSERT_TRUE(b.exited && b.code == 0) << b.err;
    }
    const std::string parent = *tmp_ / (what + "-force-trials");
    const std::string dir = parent + "/idx";
    std::vector<std::pair<std::string, KillPlan>> trials;
    std::mt19937_64 rng(kKillSeed + 1);
    for (int i = 0; i < kForceTrials; ++i) {
      KillPlan plan;
      plan.at_s = d * (i + std::uniform_real_distribution<double>(0, 1)(rng)) / kForceTrials;
      char label[96];
      std::snprintf(label, sizeof(label), "kill at %.1f ms (%.1f%% of the build)", plan.at_s * 1e3,
                    d > 0 ? 100 * plan.at_s / d : 0.0);
      trials.push_back({label, plan});
    }
    ino_t old_manifest = 0;  // set before each trial: the copied old index's manifest
    const std::vector<std::pair<std::string, std::function<bool(pid_t)>>> events = {
        {"DIR.tmp-<pid>/manifest.json written",
         [dir](pid_t pid) { return fs::exists(dir + ".tmp-" + std::to_string(pid) + "/manifest.json"); }},
        {"DIR swapped (DIR/manifest.json is another file)",
         [dir, &old_manifest](pid_t) {
           struct stat st;
           return ::stat((dir + "/manifest.json").c_str(), &st) == 0 && st.st_ino != old_manifest;
         }},
    };
    for (const auto& [name, event] : events) {
      for (double delay : {0.0, 0.0005}) {
        if (delay > 0 && name.find("swapped") != std::string::npos) continue;
        KillPlan plan;
        plan.event = event;
        plan.delay_s = delay;
        trials.push_back({"kill " + std::to_string(static_cast<int>(delay * 1e6)) + " us after " + name, plan});
      }
    }
    std::map<std::string, int> outcomes;
    for (size_t i = 0; i < trials.size(); ++i) {
      const auto& [label, plan] = trials[i];
      fs::remove_all(parent);
      fs::create_directories(parent);
      fs::copy(old_dir, dir, fs::copy_options::recursive);
      struct stat st;
      ASSERT_EQ(::stat((dir + "/manifest.json").c_str(), &st), 0);
      old_manifest = st.st_ino;
      Checker c(parent, *tmp_ / "queries.txt");
      auto argv = cmd(input, dir);
      argv.push_back("--force");
      const std::string ctx =
          "[" + what + " --force trial " + std::to_string(i) + ": " + label + "] searchctl " + Quoted(argv) + ": ";
      const Exec killed = c.Ctl(argv, plan);
      ExpectFinishedOrKilled(killed, ctx);
      bool loads = false;
      Expected got;
      EXPECT_EQ(c.Inspect(dir, &loads, &got), "") << ctx << "DIR";
      EXPECT_TRUE(loads) << ctx << "a killed --force rebuild left no loadable index at DIR: " << c.last_refusal();
      std::string outcome = killed.exited ? "finished before the kill" : "killed";
      if (loads) {
        if (got.content_crc == want_old.content_crc) {
          EXPECT_EQ(Checker::Diff(want_old, got), "") << ctx << "DIR holds the old index, altered";
          outcome += ": the old index kept";
        } else {
          EXPECT_EQ(Checker::Diff(want, got), "") << ctx << "DIR is neither the old nor the new index";
          outcome += ": the new index in place";
        }
      }
      // A leftover is the new index being built or the swapped-out old one being removed: it may
      // not load, or load as one of the two complete indexes, nothing else.
      const auto left = Leftovers(parent, "idx");
      EXPECT_LE(left.size(), 1u) << ctx;
      for (const auto& l : left) {
        bool l_loads = false;
        Expected l_got;
        EXPECT_EQ(c.Inspect(l, &l_loads, &l_got), "") << ctx << "leftover " << l;
        if (l_loads) {
          const bool is_old = l_got.content_crc == want_old.content_crc;
          EXPECT_EQ(Checker::Diff(is_old ? want_old : want, l_got), "") << ctx << "leftover " << l << " loads wrong";
          outcome += is_old ? ", DIR.tmp-<pid> left holding the complete old index"
                            : ", DIR.tmp-<pid> left holding the complete new index";
        } else {
          outcome += ", DIR.tmp-<pid> left (does not load)";
        }
      }
      ++outcomes[outcome];
      // Recovery: the same --force command.
      const Exec again = c.Ctl(argv);
      EXPECT_TRUE(again.exited && again.code == 0) << ctx << "re-run: " << Describe(again) << ": " << again.err;
      Expected rebuilt;
      bool r_loads = false;
      EXPECT_EQ(c.Inspect(dir, &r_loads, &rebuilt), "") << ctx << "after the re-run";
      EXPECT_TRUE(r_loads) << ctx;
      if (r_loads) {
        EXPECT_EQ(Checker::Diff(want, rebuilt), "") << ctx << "the re-run built other contents";
      }
      EXPECT_TRUE(Leftovers(parent, "idx").empty()) << ctx << "leftovers remain after the re-run";
      std::printf("[%s --force trial %zu] %-58s -> %s (process ran %.1f ms)\n", what.c_str(), i, label.c_str(),
                  outcome.c_str(), killed.seconds * 1e3);
      std::fflush(stdout);
    }
    fs::remove_all(parent);
    fs::remove_all(old_dir);
    std::printf("[%s --force] outcomes of %zu killed rebuilds over an index of other contents:\n", what.c_str(),
                trials.size());
    for (const auto& [o, n] : outcomes) std::printf("  %3d  %s\n", n, o.c_str());
    std::fflush(stdout);
  }

  static testing::TempDir* tmp_;
};

testing::TempDir* CrashSafetyTest::tmp_ = nullptr;

TEST_F(CrashSafetyTest, KilledIndexBuildsNeverLeaveAWrongIndex) {
  KilledBuilds("index", IndexCmd, *tmp_ / "corpus.jsonl");
}

TEST_F(CrashSafetyTest, KilledCiffImportsNeverLeaveAWrongIndex) {
  KilledBuilds("import-ciff", ImportCmd, *tmp_ / "corpus.ciff");
}

TEST_F(CrashSafetyTest, KilledForcedRebuildsKeepTheOldOrTheNewIndex) {
  KilledForcedRebuilds("index", IndexCmd, *tmp_ / "half.jsonl", *tmp_ / "corpus.jsonl");
  KilledForcedRebuilds("import-ciff", ImportCmd, *tmp_ / "quarter.ciff", *tmp_ / "corpus.ciff");
}

}  // namespace
}  // namespace search
