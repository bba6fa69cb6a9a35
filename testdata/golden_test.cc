// Golden-file test runner for commir-opt (see testdata/README.md).
//
// Every `.commir` file under testdata/ is a case. Its header (or, for inputs that must stay
// byte-identical to an external copy, a sidecar `NAME.run`) says how to run commir-opt:
//
//   // RUN: commir-opt %s --pass-pipeline=cse     (required, exactly one)
//   // EXIT: 1                                     (expected exit status; default 0)
//   // STREAM: stdout | stderr | both              (what NAME.golden holds; default stdout
//                                                   when EXIT is 0, stderr otherwise)
//   // ROUNDTRIP: no | yes                        (no: stdout is not CommIR, e.g. --emit=dot; yes,
//                                                   after a commir-search RUN: it is)
//
// For each case the runner checks the exit status, compares the selected stream with
// NAME.golden (printing a unified diff on mismatch), requires the other stream to be
// empty, and checks the canonical-printer contract: commir-opt applied to its own output
// reproduces it byte for byte, both for the case's stdout and for the plain print of every
// input file that parses.
//
// Under `bazel test` the cases are split over the target's shards (TEST_TOTAL_SHARDS).
//
// Usage:
//   golden_test --commir-opt=PATH [--root=DIR] [--update] [CASE_OR_DIR...]
// --root is the directory that holds testdata/ (default: the working directory, which under
// `bazel test` is the runfiles tree). --update rewrites the goldens instead of comparing.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace fs = std::filesystem;

namespace {

constexpr int kTimeoutSeconds = 20;
constexpr absl::string_view kRegenerate = "testdata/update_goldens.sh";

enum class Stream { kStdout, kStderr, kBoth };

struct Case {
  std::string input;        // path relative to the root, e.g. testdata/ops/add.commir
  std::string header_file;  // where the header was read (the input or its .run sidecar)
  std::string golden;       // testdata/ops/add.golden
  // The tool the RUN line names: commir-opt, or commir-search (its output is a table, so
  // there is no round trip of it).
  std::string tool = "commir-opt";
  std::vector<std::string> args;  // after the tool's name, with %s substituted
  std::string stdin_path;         // from `< FILE`, empty for /dev/null
  int exit_code = 0;
  Stream stream = Stream::kStdout;
  bool roundtrip = true;
  std::vector<std::string> errors;  // problems with the header itself
};

struct RunResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string out;
  std::string err;
  std::string failure;  // set when the process could not be run or was killed
};

struct Options {
  std::string commir_opt;
  std::string commir_search;  // optional: cases that run commir-search need it
  std::string root = ".";
  bool update = false;
  std::vector<std::string> filters;
};

std::optional<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

bool WriteFile(const fs::path& path, absl::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  return static_cast<bool>(out);
}

std::string TempDir() {
  static const std::string dir = [] {
    const char* env = std::getenv("TEST_TMPDIR");
    std::string base = env != nullptr && *env != '\0' ? env : "/tmp";
    std::error_code ec;
    fs::create_directories(base, ec);  // `bazel run` names a TEST_TMPDIR it does not create
    std::string pattern = absl::StrCat(base, "/commir_golden.XXXXXX");
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (mkdtemp(buffer.data()) == nullptr) {
      std::perror("mkdtemp");
      std::exit(2);
    }
    return std::string(buffer.data());
  }();
  return dir;
}

// ---- Running commir-opt -------------------------------------------------------------

// Runs `commir_opt args...` in `cwd` with stdin from `stdin_path` (or /dev/null) and
// captures both streams.
RunResult Run(const Options& options, const std::vector<std::string>& args,
              const std::string& stdin_path, const std::string& tool_path = "") {
  const std::string& binary = tool_path.empty() ? options.commir_opt : tool_path;
  RunResult result;
  static int counter = 0;
  std::string base = absl::StrCat(TempDir(), "/run", counter++);
  std::string out_path = base + ".out", err_path = base + ".err";
  pid_t pid = fork();
  if (pid < 0) {
    result.failure = absl::StrCat("fork failed: ", std::strerror(errno));
    return result;
  }
  if (pid == 0) {
    if (chdir(options.root.c_str()) != 0) _exit(126);
    int in = open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(binary.c_str()));
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    alarm(kTimeoutSeconds);  // survives exec: a hung tool is killed by SIGALRM
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      result.failure = absl::StrCat("waitpid failed: ", std::strerror(errno));
      return result;
    }
  }
  result.out = ReadFile(out_path).value_or("");
  result.err = ReadFile(err_path).value_or("");
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (result.exit_code == 127 || result.exit_code == 126) {
      result.failure = absl::StrCat("could not run ", binary, " (exit ",
                                    result.exit_code, ")");
    }
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    result.failure = sig == SIGALRM
                         ? absl::StrCat("timed out after ", kTimeoutSeconds, " s")
                         : absl::StrCat("killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return result;
}

// Runs commir-opt on `text` through stdin (`commir-opt -`).
RunResult RunOnText(const Options& options, absl::string_view text) {
  static int counter = 0;
  std::string path = absl::StrCat(TempDir(), "/input", counter++, ".commir");
  WriteFile(path, text);
  RunResult result = Run(options, {"-"}, path);
  std::remove(path.c_str());
  return result;
}

// ---- Unified diff (LCS over lines) ----------------------------------------------------

std::vector<std::string> SplitLines(absl::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == absl::string_view::npos) {
      lines.push_back(absl::StrCat(text.substr(start), "\n\\ No newline at end of file"));
      break;
    }
    lines.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string UnifiedDiff(absl::string_view expected, absl::string_view actual,
                        absl::string_view expected_name, absl::string_view actual_name) {
  std::vector<std::string> a = SplitLines(expected), b = SplitLines(actual);
  size_t n = a.size(), m = b.size();
  // lcs[i][j]: length of the LCS of a[i..] and b[j..].
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  struct Edit {
    char tag;  // ' ', '-', '+'
    size_t ai, bi;
  };
  std::vector<Edit> edits;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      edits.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      edits.push_back({'-', i++, j});
    } else {
      edits.push_back({'+', i, j++});
    }
  }
  constexpr size_t kContext = 3;
  std::string out = absl::StrCat("--- ", expected_name, "\n+++ ", actual_name, "\n");
  size_t k = 0;
  while (k < edits.size()) {
    if (edits[k].tag == ' ') {
      ++k;
      continue;
    }
    // A hunk: from kContext before this change to kContext after the last change that is
    // within 2*kContext of the previous one.
    size_t begin = k >= kContext ? k - kContext : 0;
    size_t end = k;
    size_t last_change = k;
    while (end < edits.size()) {
      if (edits[end].tag != ' ') last_change = end;
      if (end - last_change > 2 * kContext) break;
      ++end;
    }
    end = std::min(edits.size(), last_change + kContext + 1);
    size_t a_start = edits[begin].ai, b_start = edits[begin].bi;
    size_t a_count = 0, b_count = 0;
    for (size_t e = begin; e < end; ++e) {
      if (edits[e].tag != '+') ++a_count;
      if (edits[e].tag != '-') ++b_count;
    }
    absl::StrAppend(&out, "@@ -", a_count == 0 ? a_start : a_start + 1, ",", a_count, " +",
                    b_count == 0 ? b_start : b_start + 1, ",", b_count, " @@\n");
    for (size_t e = begin; e < end; ++e) {
      const std::string& line = edits[e].tag == '+' ? b[edits[e].bi] : a[edits[e].ai];
      absl::StrAppend(&out, std::string(1, edits[e].tag), line, "\n");
    }
    k = end;
  }
  return out;
}

// ---- Case headers ---------------------------------------------------------------------

// Splits a RUN command like a shell would for the simple cases we allow: whitespace
// separates words; '...' and "..." quote.
std::optional<std::vector<std::string>> SplitCommand(absl::string_view command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '\'' || c == '"') {
      size_t close = command.find(c, i + 1);
      if (close == absl::string_view::npos) return std::nullopt;
      word.append(command.data() + i + 1, close - i - 1);
      in_word = true;
      i = close;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// Reads `// KEY: value` directives from `text` into `c`.
void ParseHeader(absl::string_view text, Case& c) {
  int runs = 0;
  bool has_stream = false;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "//")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    absl::string_view key = line.substr(0, colon);
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    std::string where = absl::StrCat(c.header_file, ":", line_number, ": ");
    if (key == "RUN") {
      ++runs;
      std::optional<std::vector<std::string>> words = SplitCommand(value);
      if (!words || words->empty() ||
          ((*words)[0] != "commir-opt" && (*words)[0] != "commir-search")) {
        c.errors.push_back(absl::StrCat(where, "RUN must be `commir-opt ARGS...` or `commir-search ARGS...`"));
        continue;
      }
      c.tool = (*words)[0];
      if (c.tool == "commir-search") c.roundtrip = false;
      for (size_t i = 1; i < words->size(); ++i) {
        std::string word = (*words)[i];
        for (size_t p = word.find("%s"); p != std::string::npos; p = word.find("%s", p)) {
          word.replace(p, 2, c.input);
          p += c.input.size();
        }
        if (word == "<") {
          if (i + 1 >= words->size()) {
            c.errors.push_back(absl::StrCat(where, "'<' needs a file"));
            break;
          }
          std::string file = (*words)[++i];
          if (file == "%s") file = c.input;
          c.stdin_path = file;
          continue;
        }
        c.args.push_back(word);
      }
    } else if (key == "EXIT") {
      if (!absl::SimpleAtoi(value, &c.exit_code)) {
        c.errors.push_back(absl::StrCat(where, "EXIT needs an integer"));
      }
    } else if (key == "STREAM") {
      has_stream = true;
      if (value == "stdout") {
        c.stream = Stream::kStdout;
      } else if (value == "stderr") {
        c.stream = Stream::kStderr;
      } else if (value == "both") {
        c.stream = Stream::kBoth;
      } else {
        c.errors.push_back(absl::StrCat(where, "STREAM must be stdout, stderr or both"));
      }
    } else if (key == "ROUNDTRIP") {
      if (value == "no") {
        c.roundtrip = false;
      } else if (value == "yes") {
        c.roundtrip = true;  // after RUN: a commir-search case that prints CommIR
      } else {
        c.errors.push_back(absl::StrCat(where, "ROUNDTRIP must be yes or no"));
      }
    }
  }
  if (runs != 1) {
    c.errors.push_back(absl::StrCat(c.header_file, ": needs exactly one `// RUN: commir-opt ...` "
                                    "line, found ", runs));
  }
  if (!has_stream) c.stream = c.exit_code == 0 ? Stream::kStdout : Stream::kStderr;
}

bool HasRunLine(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "//") &&
        absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "RUN:")) {
      return true;
    }
  }
  return false;
}

// Finds every case under ROOT/testdata, sorted by path.
std::vector<Case> DiscoverCases(const Options& options, std::vector<std::string>& problems) {
  fs::path root(options.root);
  std::vector<std::string> inputs, sidecars;
  std::error_code ec;
  fs::recursive_directory_iterator it(root / "testdata",
                                      fs::directory_options::follow_directory_symlink, ec);
  if (ec) {
    problems.push_back(absl::StrCat("cannot list ", (root / "testdata").string(), ": ",
                                    ec.message()));
    return {};
  }
  for (const fs::directory_entry& entry : it) {
    if (entry.is_directory()) continue;
    // Lexically: under Bazel the files are symlinks into the source tree, and resolving
    // them would give paths outside the runfiles root.
    std::string rel =
        "testdata/" + entry.path().lexically_relative(root / "testdata").generic_string();
    if (absl::EndsWith(rel, ".commir")) inputs.push_back(rel);
    if (absl::EndsWith(rel, ".run")) sidecars.push_back(rel);
  }
  std::sort(inputs.begin(), inputs.end());
  for (const std::string& sidecar : sidecars) {
    std::string input = absl::StrCat(absl::StripSuffix(sidecar, ".run"), ".commir");
    if (!std::binary_search(inputs.begin(), inputs.end(), input)) {
      problems.push_back(absl::StrCat(sidecar, ": no matching ", input));
    }
  }
  std::vector<Case> cases;
  for (const std::string& input : inputs) {
    Case c;
    c.input = input;
    std::string stem(absl::StripSuffix(input, ".commir"));
    c.golden = stem + ".golden";
    std::string text = ReadFile(root / input).value_or("");
    c.header_file = input;
    std::string run_file = stem + ".run";
    if (!HasRunLine(text) && fs::exists(root / run_file)) {
      c.header_file = run_file;
      text = ReadFile(root / run_file).value_or("");
    } else if (fs::exists(root / run_file)) {
      c.errors.push_back(absl::StrCat(run_file, ": ", input, " has its own RUN line"));
    }
    ParseHeader(text, c);
    cases.push_back(std::move(c));
  }
  return cases;
}

bool MatchesFilters(const Options& options, const std::string& input) {
  if (options.filters.empty()) return true;
  for (const std::string& filter : options.filters) {
    if (input == filter || absl::StartsWith(input, absl::StrCat(filter, "/")) ||
        absl::StrCat(absl::StripSuffix(input, ".commir"), ".golden") == filter ||
        absl::StrCat(absl::StripSuffix(input, ".commir"), ".run") == filter) {
      return true;
    }
  }
  return false;
}

// ---- Checking ---------------------------------------------------------------------------

std::string StreamName(Stream stream) {
  switch (stream) {
    case Stream::kStdout: return "stdout";
    case Stream::kStderr: return "stderr";
    case Stream::kBoth: return "stdout+stderr";
  }
  return "";
}

std::string GoldenText(const Case& c, const RunResult& r) {
  switch (c.stream) {
    case Stream::kStdout: return r.out;
    case Stream::kStderr: return r.err;
    case Stream::kBoth:
      return absl::StrCat("// ----- stdout -----\n", r.out, "// ----- stderr -----\n", r.err);
  }
  return "";
}

std::string CommandLine(const Options&, const Case& c) {
  std::string line = absl::StrCat(c.tool, " ", absl::StrJoin(c.args, " "));
  if (!c.stdin_path.empty()) absl::StrAppend(&line, " < ", c.stdin_path);
  return line;
}

std::string Indent(absl::string_view text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(absl::StripSuffix(text, "\n"), '\n')) {
    absl::StrAppend(&out, "    | ", line, "\n");
  }
  return out;
}

// Checks that commir-opt reproduces `text` (its own output) byte for byte; appends a
// description of any failure to `failures`.
void CheckFixpoint(const Options& options, absl::string_view what, absl::string_view text,
                   std::vector<std::string>& failures) {
  RunResult again = RunOnText(options, text);
  if (!again.failure.empty() || again.exit_code != 0) {
    failures.push_back(absl::StrCat(
        "round trip: commir-opt rejects its own output (", what, "): ",
        again.failure.empty() ? absl::StrCat("exit ", again.exit_code) : again.failure, "\n",
        Indent(again.err)));
    return;
  }
  if (again.out != text) {
    failures.push_back(absl::StrCat(
        "round trip: commir-opt on its own output (", what, ") does not reproduce it:\n",
        UnifiedDiff(text, again.out, "first print", "second print")));
  }
}

// Runs one case; returns the failures (empty when it passes).
std::vector<std::string> CheckCase(const Options& options, const Case& c) {
  std::vector<std::string> failures = c.errors;
  if (!failures.empty()) return failures;
  if (c.tool == "commir-search" && options.commir_search.empty()) {
    failures.push_back(absl::StrCat(c.input, " runs commir-search: pass --commir-search=PATH"));
    return failures;
  }
  // The child opens stdin after changing to the root, so a root-relative path works.
  RunResult r = Run(options, c.args, c.stdin_path,
                    c.tool == "commir-search" ? options.commir_search : "");
  if (!r.failure.empty()) {
    failures.push_back(absl::StrCat("`", CommandLine(options, c), "` ", r.failure, "\n",
                                    Indent(r.err)));
    return failures;
  }
  std::string actual = GoldenText(c, r);
  if (r.exit_code != c.exit_code) {
    failures.push_back(absl::StrCat("exit status ", r.exit_code, ", expected ", c.exit_code,
                                    " (stderr follows)\n", Indent(r.err)));
  }
  if (c.stream == Stream::kStdout && !r.err.empty() && r.exit_code == c.exit_code) {
    failures.push_back(absl::StrCat("unexpected output on stderr:\n", Indent(r.err)));
  }
  if (c.stream == Stream::kStderr && !r.out.empty()) {
    failures.push_back(absl::StrCat("unexpected output on stdout:\n", Indent(r.out)));
  }
  fs::path golden_path = fs::path(options.root) / c.golden;
  if (options.update) {
    std::optional<std::string> old = ReadFile(golden_path);
    if (!old || *old != actual) {
      if (!WriteFile(golden_path, actual)) {
        failures.push_back(absl::StrCat("cannot write ", golden_path.string()));
      } else {
        std::cout << (old ? "updated " : "created ") << c.golden << "\n";
      }
    }
  } else {
    std::optional<std::string> expected = ReadFile(golden_path);
    if (!expected) {
      failures.push_back(absl::StrCat("missing golden file ", c.golden));
    } else if (*expected != actual) {
      failures.push_back(absl::StrCat(StreamName(c.stream), " differs from ", c.golden, ":\n",
                                      UnifiedDiff(*expected, actual, c.golden,
                                                  absl::StrCat("actual ", StreamName(c.stream)))));
    }
  }
  // The canonical printer: the case's own printed IR is a fixed point...
  if (c.roundtrip && r.exit_code == 0 && !r.out.empty()) {
    CheckFixpoint(options, "the case's stdout", r.out, failures);
  }
  // ...and so is the plain print of the input file, if it parses.
  bool plain = c.args.size() == 1 && c.args[0] == c.input && c.stdin_path.empty();
  if (!plain) {
    RunResult p = Run(options, {c.input}, "");
    if (!p.failure.empty()) {
      failures.push_back(absl::StrCat("`commir-opt ", c.input, "` ", p.failure));
    } else if (p.exit_code == 0) {
      CheckFixpoint(options, absl::StrCat("commir-opt ", c.input), p.out, failures);
    } else if (c.exit_code == 0) {
      failures.push_back(absl::StrCat("`commir-opt ", c.input, "` fails (exit ", p.exit_code,
                                      ") but the case expects success:\n", Indent(p.err)));
    }
  }
  return failures;
}

bool ParseArgs(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--commir-opt=")) {
      options.commir_opt = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--commir-search=")) {
      options.commir_search = fs::absolute(std::string(arg)).string();
    } else if (absl::ConsumePrefix(&arg, "--root=")) {
      options.root = std::string(arg);
    } else if (arg == "--update") {
      options.update = true;
    } else if (absl::StartsWith(arg, "-")) {
      std::cerr << "golden_test: unknown option " << arg << "\n";
      return false;
    } else {
      std::string filter(arg);
      while (absl::ConsumePrefix(&arg, "./")) filter = std::string(arg);
      while (!filter.empty() && filter.back() == '/') filter.pop_back();
      options.filters.push_back(filter);
    }
  }
  if (options.commir_opt.empty()) {
    std::cerr << "usage: golden_test --commir-opt=PATH [--root=DIR] [--update] [CASE...]\n";
    return false;
  }
  // The tool runs with the root as its working directory.
  options.commir_opt = fs::absolute(options.commir_opt).string();
  return true;
}

// Bazel's test sharding (shard_count in the BUILD file): each shard checks every
// TEST_TOTAL_SHARDS-th case, so every shard has its own timeout and the shards of one
// run may go in parallel. Outside Bazel there is one shard.
struct Shard {
  int index = 0;
  int total = 1;
};

Shard ShardFromEnvironment() {
  Shard shard;
  const char* total = std::getenv("TEST_TOTAL_SHARDS");
  const char* index = std::getenv("TEST_SHARD_INDEX");
  if (total == nullptr || index == nullptr) return shard;
  int t = 0, i = 0;
  if (!absl::SimpleAtoi(total, &t) || !absl::SimpleAtoi(index, &i) || t < 1 || i < 0 || i >= t) {
    return shard;
  }
  // Tell Bazel this runner understands sharding.
  if (const char* status = std::getenv("TEST_SHARD_STATUS_FILE")) {
    std::ofstream(status).flush();
  }
  shard.index = i;
  shard.total = t;
  return shard;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseArgs(argc, argv, options)) return 2;
  if (access(options.commir_opt.c_str(), X_OK) != 0) {
    std::cerr << "golden_test: " << options.commir_opt << " is not an executable\n";
    return 2;
  }
  std::vector<std::string> problems;
  std::vector<Case> cases = DiscoverCases(options, problems);
  const Shard shard = ShardFromEnvironment();
  int passed = 0, failed = 0, matching = 0;
  for (const Case& c : cases) {
    if (!MatchesFilters(options, c.input)) continue;
    if (matching++ % shard.total != shard.index) continue;
    std::vector<std::string> failures = CheckCase(options, c);
    if (failures.empty()) {
      ++passed;
      continue;
    }
    ++failed;
    std::cout << "FAIL: " << c.input << "\n  command: " << CommandLine(options, c) << "\n";
    for (const std::string& failure : failures) std::cout << failure << (absl::EndsWith(failure, "\n") ? "" : "\n");
    if (!options.update) {
      std::cout << "  If the new output is right, regenerate with: " << kRegenerate << " "
                << c.input << "\n";
    }
    std::cout << "\n";
  }
  for (const std::string& filter : options.filters) {
    bool matched = std::any_of(cases.begin(), cases.end(),
                               [&](const Case& c) {
                                 Options one;
                                 one.filters = {filter};
                                 return MatchesFilters(one, c.input);
                               });
    if (!matched) problems.push_back(absl::StrCat("no case matches ", filter));
  }
  for (const std::string& problem : problems) std::cout << "ERROR: " << problem << "\n";
  if (matching == 0 && problems.empty()) problems.push_back("no cases found");
  std::cout << passed << " passed, " << failed << " failed"
            << (options.update ? " (goldens updated)" : "") << "\n";
  std::error_code ec;
  fs::remove_all(TempDir(), ec);
  return failed == 0 && problems.empty() ? 0 : 1;
}
