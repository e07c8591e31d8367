// Runs ONNX backend test cases (model.onnx + test_data_set_N/{input,output}_K.pb)
// and compares with the stored outputs.
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "onnx/session.h"
#include "onnx/tensor_proto.h"
#include "tools/commands.h"

namespace fs = std::filesystem;

namespace wgnn::tools {
namespace {

HostTensor read_pb(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  onnx::TensorProto t;
  if (!in || !t.ParseFromIstream(&in)) throw Error(fmt::format("cannot parse tensor file '{}'", p.string()));
  return onnx_import::from_tensor_proto(t, p.parent_path().string());
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> v;
  for (int k = 0;; ++k) {
    fs::path p = dir / fmt::format("{}_{}.pb", prefix, k);
    if (!fs::exists(p)) break;
    v.push_back(p);
  }
  return v;
}

// "" if equal within tolerance, else what differs.
std::string compare(const HostTensor& got, const HostTensor& want, double rtol, double atol) {
  if (got.dtype != want.dtype) return fmt::format("dtype {} vs expected {}", dtype_name(got.dtype), dtype_name(want.dtype));
  if (got.shape != want.shape) return fmt::format("shape {} vs expected {}", shape_str(got.shape), shape_str(want.shape));
  const bool fl = got.dtype == DType::F32 || got.dtype == DType::F16;
  size_t bad = 0, first = 0;
  double worst = 0;
  for (size_t i = 0; i < size_t(got.numel()); ++i) {
    bool ok;
    if (fl) {
      const double a = got.get_double(i), b = want.get_double(i);
      if (std::isnan(b)) ok = std::isnan(a);
      else if (std::isinf(b)) ok = a == b;
      else {
        const double err = std::abs(a - b);
        ok = err <= atol + rtol * std::abs(b);
        if (!ok || std::isnan(a)) worst = std::max(worst, std::isnan(a) ? INFINITY : err);
      }
    } else {
      ok = got.get_int(i) == want.get_int(i);
    }
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return "";
  return fmt::format("{} of {} values differ (first at {}: {} vs {}; worst error {:.3g})", bad, got.numel(), first,
                     got.get_double(first), want.get_double(first), worst);
}

// One case's result as a pinned-list line: "pass NAME", "skip NAME: reason",
// "fail NAME: reason".
struct Pinned {
  std::string status;  // pass, skip, fail
  std::string reason;
};

// The message on one line: its lines joined ("has 2 unsupported nodes: node
// 'a' (...): ...; node 'b' ..."), cut at `max` characters.
std::string one_line(const std::string& s, size_t max = 200) {
  std::string l;
  size_t from = 0;
  while (from <= s.size()) {
    size_t to = s.find('\n', from);
    if (to == std::string::npos) to = s.size();
    std::string part = s.substr(from, to - from);
    part.erase(0, part.find_first_not_of(' '));
    if (!part.empty()) l += (l.empty() || l.back() == ':' ? (l.empty() ? "" : " ") : "; ") + part;
    from = to + 1;
  }
  if (l.size() > max) l = l.substr(0, max - 3) + "...";
  return l;
}

std::map<std::string, Pinned> read_expected(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot read the expected results '{}'", path));
  std::map<std::string, Pinned> m;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find(' ');
    const std::string status = line.substr(0, sp);
    if (sp == std::string::npos || (status != "pass" && status != "skip" && status != "fail")) {
      throw Error(fmt::format("{}:{}: expected 'pass NAME', 'skip NAME: reason' or 'fail NAME: reason', got '{}'",
                              path, n, line));
    }
    std::string rest = line.substr(sp + 1), name = rest, reason;
    if (const size_t c = rest.find(": "); c != std::string::npos) name = rest.substr(0, c), reason = rest.substr(c + 2);
    if (!m.emplace(name, Pinned{status, reason}).second) throw Error(fmt::format("{}:{}: '{}' listed twice", path, n, name));
  }
  return m;
}

}  // namespace

int conformance(gpu::Context& ctx, const ConformanceOptions& o) {
  std::vector<fs::path> cases;
  for (const std::string& d : o.dirs) {
    if (fs::exists(fs::path(d) / "model.onnx")) {
      cases.emplace_back(d);
      continue;
    }
    if (!fs::is_directory(d)) throw Error(fmt::format("'{}' is not a folder", d));
    std::vector<fs::path> sub;
    for (const auto& e : fs::directory_iterator(d)) {
      if (fs::exists(e.path() / "model.onnx")) sub.push_back(e.path());
    }
    std::sort(sub.begin(), sub.end());
    cases.insert(cases.end(), sub.begin(), sub.end());
  }
  if (!o.write_expected.empty() && !o.filter.empty()) {
    throw Error("--write-expected writes every case's line: run it without --filter");
  }
  std::map<std::string, Pinned> expected, previous;
  if (!o.expected.empty()) expected = read_expected(o.expected);
  if (!o.write_expected.empty() && fs::exists(o.write_expected)) previous = read_expected(o.write_expected);
  std::map<std::string, Pinned> got;
  int passed = 0, failed = 0, skipped = 0, expected_fail = 0;
  std::vector<std::string> moved;
  for (const fs::path& c : cases) {
    const std::string name = c.parent_path().filename().string() + "/" + c.filename().string();
    if (!o.filter.empty() && name.find(o.filter) == std::string::npos) continue;
    std::string status = "PASS", detail;
    try {
      onnx_import::SessionOptions so;
      so.fp16 = o.fp16;
      onnx_import::Session s(ctx, (c / "model.onnx").string(), so);
      std::vector<fs::path> sets;
      for (const auto& e : fs::directory_iterator(c)) {
        if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
      }
      std::sort(sets.begin(), sets.end());
      if (sets.empty()) throw Error("no test_data_set_N folder");
      for (const fs::path& set : sets) {
        std::map<std::string, HostTensor> inputs;
        const auto in_files = numbered(set, "input");
        if (in_files.size() != s.inputs().size()) {
          throw Error(fmt::format("{} input files for {} model inputs", in_files.size(), s.inputs().size()));
        }
        const auto out_files = numbered(set, "output");
        // Every output is compared: a case with fewer output files than
        // model outputs (none at all included) proves nothing.
        if (out_files.size() != s.outputs().size()) {
          throw Error(fmt::format("{}: {} output files for {} model outputs", set.filename().string(),
                                  out_files.size(), s.outputs().size()));
        }
        for (size_t k = 0; k < in_files.size(); ++k) inputs[s.inputs()[k].name] = read_pb(in_files[k]);
        auto outputs = s.run(inputs);
        for (size_t k = 0; k < out_files.size(); ++k) {
          const std::string diff = compare(outputs.at(s.outputs()[k].name), read_pb(out_files[k]), o.rtol, o.atol);
          if (!diff.empty()) {
            status = "FAIL";
            detail = fmt::format("{} output '{}': {}", set.filename().string(), s.outputs()[k].name, diff);
            break;
          }
        }
        if (status != "PASS") break;
      }
    } catch (const Unsupported& e) {
      status = "UNSUPPORTED";
      detail = e.what();
    } catch (const std::exception& e) {
      status = "FAIL";
      detail = e.what();
    }
    const std::string pinned = status == "PASS" ? "pass" : status == "FAIL" ? "fail" : "skip";
    // The reason names the case as the list does, not by this machine's path.
    std::string reason = detail;
    for (size_t at; (at = reason.find(c.string())) != std::string::npos;) reason.replace(at, c.string().size(), name);
    got[name] = Pinned{pinned, one_line(reason)};
    bool listed_fail = false;
    if (!o.expected.empty()) {
      const auto it = expected.find(name);
      if (it == expected.end()) {
        moved.push_back(fmt::format("{}: not listed, now {}{}{}", name, pinned, detail.empty() ? "" : ": ",
                                    got[name].reason));
      } else if (it->second.status != pinned) {
        moved.push_back(fmt::format("{}: expected {}, now {}{}{}", name, it->second.status, pinned,
                                    detail.empty() ? "" : ": ", got[name].reason));
      } else {
        listed_fail = pinned == "fail";
      }
    }
    if (status == "PASS") ++passed;
    else if (status == "FAIL") ++(listed_fail ? expected_fail : failed);
    else ++skipped;
    if (status == "PASS" || o.verbose || status == "FAIL" || !o.quiet_unsupported) {
      fmt::print("{:<11} {}{}{}{}\n", status, name, listed_fail ? " (expected)" : "", detail.empty() ? "" : ": ",
                 one_line(detail, 1000));
    }
  }
  const int ran = passed + failed + expected_fail + skipped;
  fmt::print("{} passed, {} failed, {} skipped", passed, failed + expected_fail, skipped);
  if (!o.expected.empty()) fmt::print(" ({} of the failures expected)", expected_fail);
  fmt::print("\n");
  int rc = failed ? 1 : 0;
  if (!o.expected.empty()) {
    for (const auto& [name, p] : expected) {
      if (got.count(name) || (!o.filter.empty() && name.find(o.filter) == std::string::npos)) continue;
      moved.push_back(fmt::format("{}: expected {}, but no such case ran", name, p.status));
    }
    if (!moved.empty()) {
      fmt::print("\n{} cases differ from the expected results in {}:\n", moved.size(), o.expected);
      for (const std::string& m : moved) fmt::print("  {}\n", m);
      fmt::print("If this change is intended, update the list (scripts/conformance-expected, docs/TESTING.md) "
                 "and commit it with the change.\n");
      rc = 1;
    }
  }
  if (ran < o.min_cases) {
    fmt::print("only {} cases ran, fewer than --min-cases {}\n", ran, o.min_cases);
    rc = 1;
  }
  if (!o.write_expected.empty()) {
    std::ofstream out(o.write_expected);
    if (!out) throw Error(fmt::format("cannot write '{}'", o.write_expected));
    out << "# wgnn conformance: the result each case must have (pass, skip or fail, with the reason).\n"
        << fmt::format("# {} mode, rtol {}, atol {}; {} passed, {} failed, {} skipped.\n", o.fp16 ? "float16" : "float32",
                       o.rtol, o.atol, passed, failed + expected_fail, skipped)
        << "# Regenerate with scripts/conformance-expected (docs/TESTING.md); 'fail' reasons are kept.\n";
    for (const auto& [name, p] : got) {
      std::string reason = p.reason;
      if (const auto it = previous.find(name); it != previous.end() && it->second.status == "fail" && p.status == "fail") {
        reason = it->second.reason;
      }
      out << p.status << " " << name << (p.status == "pass" ? "" : ": " + reason) << "\n";
    }
    if (!out) throw Error(fmt::format("cannot write '{}'", o.write_expected));
    fmt::print("wrote {} ({} cases)\n", o.write_expected, got.size());
  }
  return rc;
}

}  // namespace wgnn::tools
