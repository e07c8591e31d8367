// `wgnn bench` and `wgnn profile`: what a model costs per inference, and
// where the GPU time goes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "onnx/session.h"
#include "tools/commands.h"
#include "tools/model_inputs.h"
#include "util/host_memory.h"

using nlohmann::json;

namespace wgnn::tools {
namespace {

using clock = std::chrono::steady_clock;

double ms_since(clock::time_point t) { return std::chrono::duration<double, std::milli>(clock::now() - t).count(); }

double median(std::vector<double> v) {
  if (v.empty()) throw Error("median of no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

InputOptions input_options(const ModelInputArgs& a) {
  InputOptions io;
  io.files = a.inputs;
  io.shapes = a.shapes;
  io.seed = a.seed;
  parse_int_range(a.int_range, io);
  return io;
}

std::string model_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

json inputs_json(const std::map<std::string, HostTensor>& inputs) {
  json j = json::object();
  for (const auto& [name, t] : inputs) j[name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}};
  return j;
}

void require_model_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(fmt::format("model '{}': no such file", path));
}

// A rate for a table column, 3 significant digits (small ones on a CPU
// adapter stay readable); "-" where there is nothing to show.
std::string rate(double v) {
  if (!(v > 0)) return "-";
  if (v >= 100) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  if (v >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3g}", v);
}

// Kernel names carry their template values (WGSL expressions): long ones
// are cut in tables (the JSON and the trace keep them whole).
std::string cut(const std::string& s, size_t n = 72) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

struct Group {
  std::string key;
  double ms = 0;
  size_t count = 0;
  double bytes = 0, flops = 0;
  double gbps() const { return ms > 0 ? bytes / (ms * 1e6) : 0; }
  double tflops() const { return ms > 0 && flops > 0 ? flops / (ms * 1e9) : 0; }
};

// One dispatch of the profile: its node and median time over the runs.
struct Timed {
  size_t node = 0;
  double ms = 0;
};

std::vector<Group> group_by(const Graph& g, const std::vector<Timed>& timed, bool by_op) {
  std::map<std::string, Group> groups;
  for (const Timed& t : timed) {
    const DispatchNode& n = g.dispatches()[t.node];
    const std::string& key = by_op ? n.op : n.pipeline->name();
    Group& gr = groups[key];
    gr.key = key;
    gr.ms += t.ms;
    gr.count += 1;
    gr.bytes += double(g.bound_bytes(n));
    gr.flops += n.flops;
  }
  std::vector<Group> out;
  for (auto& [k, gr] : groups) out.push_back(gr);
  std::stable_sort(out.begin(), out.end(), [](const Group& a, const Group& b) { return a.ms > b.ms; });
  return out;
}

json groups_json(const std::vector<Group>& groups, double total, const char* key_name) {
  json arr = json::array();
  for (const Group& gr : groups) {
    arr.push_back({{key_name, gr.key},
                   {"ms", gr.ms},
                   {"percent", total > 0 ? 100.0 * gr.ms / total : 0.0},
                   {"count", gr.count},
                   {"bytes", gr.bytes},
                   {"gbps", gr.gbps()},
                   {"flops", gr.flops},
                   {"tflops", gr.flops > 0 ? json(gr.tflops()) : json(nullptr)}});
  }
  return arr;
}

void print_groups(const std::vector<Group>& groups, double total, const char* title, int top) {
  size_t width = std::string_view(title).size();
  const size_t shown = top > 0 ? std::min(groups.size(), size_t(top)) : groups.size();
  for (size_t i = 0; i < shown; ++i) width = std::max(width, cut(groups[i].key).size());
  fmt::print("{:<{}}  {:>10}  {:>6}  {:>5}  {:>9}  {:>10}  {:>8}\n", title, width, "GPU ms", "%", "count",
             "us each", "GB/s", "TFLOP/s");
  for (size_t i = 0; i < shown; ++i) {
    const Group& gr = groups[i];
    fmt::print("{:<{}}  {:>10.3f}  {:>6.1f}  {:>5}  {:>9.1f}  {:>10}  {:>8}\n", cut(gr.key), width, gr.ms,
               total > 0 ? 100.0 * gr.ms / total : 0.0, gr.count, 1000.0 * gr.ms / double(gr.count),
               rate(gr.gbps()), rate(gr.tflops()));
  }
  if (shown < groups.size()) {
    double rest = 0;
    size_t count = 0;
    for (size_t i = shown; i < groups.size(); ++i) rest += groups[i].ms, count += groups[i].count;
    fmt::print("{:<{}}  {:>10.3f}  {:>6.1f}  {:>5}\n", fmt::format("({} more)", groups.size() - shown), width, rest,
               total > 0 ? 100.0 * rest / total : 0.0, count);
  }
}


// The first run of a session, by where its time went: the build of the
// graph for these shapes (WGSL, shader modules, pipelines, bind groups,
// buffers, uploads, the rest) and the run itself.
struct FirstRun {
  double ms = 0;        // the whole first Session::run
  double build_ms = 0;  // of which the build (Session::last_build_ms)
  gpu::CreationStats created;  // what the first run created
  Graph::RunStats run;         // the run after the build
  gpu::DiskCacheStats disk;    // the context's disk cache so far
  onnx_import::Session::BuildPhases phases;  // the build by phase
  uint64_t page_faults = 0;                  // the process's minor page faults over the first run
  // The run's own creations (output staging and input upload buffers, made
  // on a plan's first run): what the first run created minus the build's.
  double run_buffer_ms() const { return std::max(0.0, created.buffer_ms - phases.created.buffer_ms); }
  uint64_t run_buffers() const { return created.buffers - phases.created.buffers; }
  // The run's time outside the graph's phases: output conversion, the
  // returned tensors' allocation.
  double run_other_ms() const {
    return std::max(0.0, ms - build_ms - (run.upload_us + run.encode_us + run.wait_us + run.readback_us) / 1000.0);
  }
  double rest_ms() const {
    return std::max(0.0, build_ms - created.wgsl_ms - created.shader_module_ms - created.pipeline_ms -
                             created.bind_group_ms - created.buffer_ms - created.write_ms);
  }
};

FirstRun first_run(gpu::Context& ctx, onnx_import::Session& s, const std::map<std::string, HostTensor>& inputs) {
  FirstRun f;
  const gpu::CreationStats before = ctx.creation_stats();
  const uint64_t faults0 = util::minor_page_faults();
  const auto t = clock::now();
  s.run(inputs);
  f.ms = ms_since(t);
  f.page_faults = util::minor_page_faults() - faults0;
  f.created = ctx.creation_stats() - before;
  f.build_ms = s.last_build_ms();
  f.phases = s.last_build_phases();
  f.run = s.graph().last_run();
  f.disk = ctx.disk_cache_stats();
  return f;
}

json disk_cache_json(const gpu::DiskCacheStats& d) {
  if (!d.enabled) return json{{"enabled", false}, {"why", d.why_off}};
  return json{{"enabled", true},      {"folder", d.folder},         {"max_bytes", d.max_bytes},
              {"loads", d.loads},     {"hits", d.hits},             {"misses", d.misses},
              {"corrupt", d.corrupt}, {"stores", d.stores},         {"store_failures", d.store_failures},
              {"evicted", d.evicted}, {"loaded_bytes", d.loaded_bytes}, {"stored_bytes", d.stored_bytes}};
}

uint64_t readback_bytes(const std::map<std::string, HostTensor>& outputs) {
  uint64_t n = 0;
  for (const auto& [name, t] : outputs) n += t.nbytes();
  return n;
}

json record_by_op_json(const onnx_import::Session::BuildPhases& p) {
  json j = json::object();
  for (const auto& [op, ms] : p.record_by_op) j[op] = ms;
  return j;
}

json first_run_json(const FirstRun& f) {
  const gpu::CreationStats& c = f.created;
  return json{{"ms", f.ms},
              {"build_ms", f.build_ms},
              {"wgsl_ms", c.wgsl_ms},
              {"shader_module_ms", c.shader_module_ms},
              {"pipeline_ms", c.pipeline_ms},
              {"pipeline_requests", c.pipeline_requests},
              {"pipelines_created", c.pipelines_created},
              {"pipelines_reused", c.pipeline_hits},
              {"pipelines_from_disk", c.pipelines_from_disk},
              {"bind_groups", c.bind_groups},
              {"bind_group_ms", c.bind_group_ms},
              {"buffers", c.buffers},
              {"buffer_ms", c.buffer_ms},
              {"writes", c.writes},
              {"bytes_written", c.bytes_written},
              {"write_ms", c.write_ms},
              {"build_rest_ms", f.rest_ms()},
              {"record_ms", f.phases.record_ms},
              {"tier_wait_ms", f.phases.tier_wait_ms},
              {"regular_record_ms", f.phases.regular_record_ms},
              {"prepare_ms", f.phases.prepare_ms},
              {"build_buffers", f.phases.created.buffers},
              {"build_buffer_ms", f.phases.created.buffer_ms},
              {"run_buffers", f.run_buffers()},
              {"run_buffer_ms", f.run_buffer_ms()},
              {"run_other_ms", f.run_other_ms()},
              {"page_faults", f.page_faults},
              {"build_page_faults", f.phases.page_faults},
              {"record_by_op_ms", record_by_op_json(f.phases)},
              {"run_ms", f.ms - f.build_ms},
              {"upload_ms", f.run.upload_us / 1000.0},
              {"encode_ms", f.run.encode_us / 1000.0},
              {"submit_ms", f.run.submit_us / 1000.0},
              {"wait_ms", f.run.wait_us / 1000.0},
              {"readback_ms", f.run.readback_us / 1000.0},
              {"disk_cache", disk_cache_json(f.disk)}};
}

void print_first_run(const FirstRun& f) {
  const gpu::CreationStats& c = f.created;
  fmt::print("first run  {:.1f} ms: build {:.1f} ms, run {:.1f} ms\n", f.ms, f.build_ms, f.ms - f.build_ms);
  fmt::print("  build    WGSL {:.1f}, shader modules {:.1f}, pipelines {:.1f} ({} compiled, {} of them from the "
             "disk cache; {} requests found compiled in the context)\n",
             c.wgsl_ms, c.shader_module_ms, c.pipeline_ms, c.pipelines_created, c.pipelines_from_disk,
             c.pipeline_hits);
  fmt::print("           bind groups {:.1f} ({}), buffers {:.1f} ({}), queue writes {:.1f} ({:.1f} MB), the rest "
             "{:.1f} (import, op recording, memory plan, init dispatches)\n",
             c.bind_group_ms, c.bind_groups, c.buffer_ms, c.buffers, c.write_ms, double(c.bytes_written) / 1e6,
             f.rest_ms());
  const auto& p = f.phases;
  fmt::print("           by phase: recording {:.1f}{}, prepare {:.1f} (memory plan, bind groups, init dispatches)\n",
             p.record_ms,
             p.tier_wait_ms > 0 || p.regular_record_ms > 0
                 ? fmt::format(", waiting for tensor-core pipelines {:.1f}, the regular plan {:.1f}", p.tier_wait_ms,
                               p.regular_record_ms)
                 : std::string(),
             p.prepare_ms);
  if (!p.record_by_op.empty()) {
    std::string ops;
    for (size_t k = 0; k < p.record_by_op.size() && k < 6; ++k) {
      ops += fmt::format("{}{} {:.1f}", k ? ", " : "", p.record_by_op[k].first, p.record_by_op[k].second);
    }
    fmt::print("           recording by op: {}\n", ops);
  }
  fmt::print("  run      upload {:.1f}, encode {:.1f} (submit {:.1f}), wait {:.1f} (the GPU copies the uploads and "
             "runs), readback {:.1f}; buffers made {:.1f} ({}: staging), other {:.1f}\n",
             f.run.upload_us / 1000.0, f.run.encode_us / 1000.0, f.run.submit_us / 1000.0, f.run.wait_us / 1000.0,
             f.run.readback_us / 1000.0, f.run_buffer_ms(), f.run_buffers(), f.run_other_ms());
  fmt::print("  memory   {} page faults (fresh host memory touched), {} of them in the build\n", f.page_faults,
             f.phases.page_faults);
  const gpu::DiskCacheStats& d = f.disk;
  if (!d.enabled) {
    fmt::print("disk cache {}\n", d.why_off);
  } else {
    fmt::print("disk cache {}: {} blobs looked up, {} found ({:.1f} MB){}, {} stored ({:.1f} MB){}{}\n", d.folder,
               d.loads, d.hits, double(d.loaded_bytes) / 1e6,
               d.corrupt ? fmt::format(", {} damaged ignored", d.corrupt) : std::string(), d.stores,
               double(d.stored_bytes) / 1e6, d.evicted ? fmt::format(", {} evicted", d.evicted) : std::string(),
               d.store_failures ? fmt::format(", {} stores failed", d.store_failures) : std::string());
  }
}

}  // namespace

void check_bench_options(const BenchOptions& o) {
  if (o.runs < 1) throw Error(fmt::format("--runs {}: at least 1 timed run is needed", o.runs));
  if (o.warmup < 0) throw Error(fmt::format("--warmup {}: must be 0 or more", o.warmup));
  InputOptions io;
  parse_int_range(o.in.int_range, io);
  require_model_file(o.model);
}

void check_profile_options(const ProfileOptions& o) {
  if (o.runs < 1) throw Error(fmt::format("--runs {}: at least 1 profiled run is needed", o.runs));
  if (o.top < 0) throw Error(fmt::format("--top {}: must be 0 (all) or more", o.top));
  InputOptions io;
  parse_int_range(o.in.int_range, io);
  require_model_file(o.model);
  if (!o.trace.empty()) {
    const auto dir = std::filesystem::absolute(o.trace).parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      throw Error(fmt::format("--trace {}: the folder {} does not exist", o.trace, dir.string()));
    }
  }
}

int bench_model(gpu::Context& ctx, const BenchOptions& o) {
  check_bench_options(o);
  const uint64_t load_faults0 = util::minor_page_faults();
  const auto t0 = clock::now();
  onnx_import::SessionOptions so;
  so.fp16 = o.fp16;
  so.checked = !o.unchecked;
  so.outputs = o.outputs;
  onnx_import::Session s(ctx, o.model, so);
  const double load_ms = ms_since(t0);
  const uint64_t load_faults = util::minor_page_faults() - load_faults0;
  const std::map<std::string, HostTensor> inputs = model_inputs(s, input_options(o.in));

  // First run: builds the graph, compiles pipelines, allocates storage.
  const FirstRun first = first_run(ctx, s, inputs);
  const double first_ms = first.ms;
  // The steady state is the tensor-core plan: a tiered first run's plan
  // switches to it here (SessionOptions::tiered).
  s.settle();
  for (int i = 0; i < o.warmup; ++i) s.run(inputs);

  // Host to host, untimed passes: what a caller of Session::run pays.
  // Per phase (Graph::RunStats); host_us is the wall time of a run less its
  // wait for the GPU: everything the host does per inference.
  const uint64_t buffers0 = ctx.buffers_created(), groups0 = ctx.bind_groups_created(),
                 pipelines0 = ctx.pipeline_cache_misses();
  std::vector<double> wall, upload_us, encode_us, submit_us, wait_us, readback_us, ahead_us, host_us;
  int from_ahead = 0;
  // The outputs' host memory is kept from run to run (Session::run's
  // in-place form), as an application that runs a model repeatedly does.
  std::map<std::string, HostTensor> outputs;
  s.run(inputs, outputs);
  for (int i = 0; i < o.runs; ++i) {
    const auto a = clock::now();
    s.run(inputs, outputs);
    wall.push_back(ms_since(a));
    const Graph::RunStats& st = s.graph().last_run();
    upload_us.push_back(st.upload_us);
    encode_us.push_back(st.encode_us);
    submit_us.push_back(st.submit_us);
    wait_us.push_back(st.wait_us);
    readback_us.push_back(st.readback_us);
    ahead_us.push_back(st.ahead_us);
    from_ahead += st.from_ahead ? 1 : 0;
    host_us.push_back(wall.back() * 1000.0 - st.wait_us);
  }
  if (ctx.buffers_created() != buffers0 || ctx.bind_groups_created() != groups0 ||
      ctx.pipeline_cache_misses() != pipelines0) {
    throw Error(fmt::format("bench: {} runs after the warm-up created {} buffers, {} bind groups and {} pipelines; "
                            "a steady-state run should create none",
                            o.runs, ctx.buffers_created() - buffers0, ctx.bind_groups_created() - groups0,
                            ctx.pipeline_cache_misses() - pipelines0));
  }
  const size_t dispatches = s.graph().last_run().dispatches;
  if (s.builds() != 1) {
    throw Error(fmt::format("bench: the session built {} graphs for one set of inputs; timings would include "
                            "rebuilds",
                            s.builds()));
  }

  // Queued: each run started while the previous one is still on the GPU
  // (Session::start/finish), so that its upload and submission overlap the
  // GPU's work, as remove-bg runs a folder: the time per run is then the
  // GPU's, plus what the host fails to hide.
  // A model with state (an ExecuTorch program's KV cache) runs one run
  // at a time: its queued time is its host-to-host time.
  const auto q0 = clock::now();
  if (s.state_count() > 0) {
    for (int i = 0; i < o.runs; ++i) s.run(inputs, outputs);
  } else {
    s.start(inputs);
    for (int i = 1; i < o.runs; ++i) {
      s.start(inputs);
      s.finish(outputs);
    }
    s.finish(outputs);
  }
  const double queued_ms = ms_since(q0) / o.runs;

  // GPU time of the one pass, from timestamps, in separate runs so that the
  // timestamp resolve and readback stay out of the host-to-host numbers.
  std::vector<double> gpu;
  const bool timestamps = ctx.features().timestamp_query;
  if (timestamps) {
    Graph& g = s.graph();
    g.set_timing(gpu::Timing::Total);
    for (int i = 0; i < o.runs; ++i) {
      s.run(inputs);
      gpu.push_back(g.last_run().gpu_ms);
    }
    g.set_timing(gpu::Timing::None);
  }

  const auto& a = ctx.adapter();
  if (o.json) {
    json j{{"model", model_name(o.model)},
           {"precision", o.fp16 ? "fp16" : "fp32"},
           {"checked", !o.unchecked},
           {"adapter", a.name},
           {"backend", a.backend},
           {"inputs", inputs_json(inputs)},
           {"seed", o.in.seed},
           {"load_ms", load_ms},
           {"load_page_faults", load_faults},
           {"first_run_ms", first_ms},
           {"first_run", first_run_json(first)},
           {"warmup", o.warmup},
           {"runs", o.runs},
           {"median_ms", median(wall)},
           {"min_ms", min_of(wall)},
           {"max_ms", max_of(wall)},
           {"gpu_ms", timestamps ? json(median(gpu)) : json(nullptr)},
           {"gpu_min_ms", timestamps ? json(min_of(gpu)) : json(nullptr)},
           {"host_us", median(host_us)},
           {"upload_us", median(upload_us)},
           {"encode_us", median(encode_us)},
           {"submit_us", median(submit_us)},
           {"wait_us", median(wait_us)},
           {"readback_us", median(readback_us)},
           // The next run's dispatches encoded after this run's submit, the
           // GPU busy (Graph::RunStats); runs that submitted such parts.
           {"ahead_us", median(ahead_us)},
           {"runs_from_ahead", from_ahead},
           {"queued_ms", queued_ms},
           {"outputs", o.outputs.empty() ? json("all") : json(o.outputs)},
           {"outputs_read", outputs.size()},
           {"readback_bytes", readback_bytes(outputs)},
           {"dispatches", dispatches},
           // SessionOptions::tiered (on by default): whether the first run
           // was on the regular kernels, and whether the plan has switched
           // to its tensor-core kernels since.
           {"tiered_plans", s.tiered_plans()},
           {"tier_ups", s.tier_ups()},
           {"prefetched_pipelines", s.prefetched_pipelines()},
           {"prefetched_readback_buffers", s.prefetched_readback_buffers()}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  fmt::print("model      {}{}\n", o.model, o.fp16 ? " (float16 mode)" : "");
  fmt::print("adapter    {} ({})\n", a.name, a.backend);
  fmt::print("inputs     {}\n", describe_inputs(inputs));
  fmt::print("load       {:.1f} ms, {} page faults{}\n", load_ms, load_faults,
             s.prefetched_pipelines()
                 ? fmt::format(" ({} pipelines asked for from the last run's list{})", s.prefetched_pipelines(),
                               s.prefetched_readback_buffers()
                                   ? fmt::format(", {} readback buffers made meanwhile", s.prefetched_readback_buffers())
                                   : std::string())
                 : std::string());
  print_first_run(first);
  fmt::print("steady     median {:.3f} ms, min {:.3f} ms, max {:.3f} ms over {} runs after {} warm-up\n",
             median(wall), min_of(wall), max_of(wall), o.runs, o.warmup);
  fmt::print("           (host to host: input upload, run, output readback{})\n",
             o.outputs.empty() ? "" : fmt::format("; outputs read: {}", fmt::join(o.outputs, ", ")));
  fmt::print("queued     {:.3f} ms a run with the next one started before it is read back (two in flight)\n",
             queued_ms);
  if (timestamps) {
    fmt::print("GPU        median {:.3f} ms, min {:.3f} ms (timestamps around the one compute pass)\n", median(gpu),
               min_of(gpu));
  } else {
    fmt::print("GPU        - (the adapter offers no timestamp-query)\n");
  }
  const double enc = median(encode_us);
  fmt::print("host       {:.1f} us to encode and submit {} dispatches ({:.2f} us each), {:.3f} ms until the GPU "
             "finished\n",
             enc, dispatches, dispatches ? enc / double(dispatches) : 0.0, median(wait_us) / 1000.0);
  fmt::print("           per run on the host {:.1f} us: upload {:.1f}, encode {:.1f} (submit {:.1f}), readback {:.1f}, "
             "the next run's dispatches encoded ahead {:.1f} ({} of {} runs submitted such), the rest in the "
             "session\n",
             median(host_us), median(upload_us), enc, median(submit_us), median(readback_us), median(ahead_us),
             from_ahead, wall.size());
  return 0;
}

int profile_model(gpu::Context& ctx, const ProfileOptions& o) {
  check_profile_options(o);
  if (!ctx.features().timestamp_query) {
    throw Error(fmt::format("profile needs the timestamp-query feature, which this adapter ({}) does not offer",
                            ctx.adapter().name));
  }
  onnx_import::SessionOptions so;
  so.fp16 = o.fp16;
  so.checked = !o.unchecked;
  onnx_import::Session s(ctx, o.model, so);
  const std::map<std::string, HostTensor> inputs = model_inputs(s, input_options(o.in));
  const FirstRun first = first_run(ctx, s, inputs);  // builds the graph and leaves the inputs in place
  s.settle();                                         // profile the tensor-core plan where tiered
  Graph& g = s.graph();

  // One-pass GPU time, as `wgnn bench` measures it, for comparison.
  std::vector<double> one_pass;
  g.set_timing(gpu::Timing::Total);
  for (int i = 0; i < o.runs; ++i) {
    g.run();
    one_pass.push_back(g.last_run().gpu_ms);
  }
  g.set_timing(gpu::Timing::None);

  g.run_profiled();  // warm-up
  std::vector<std::vector<Graph::DispatchTime>> runs;
  for (int i = 0; i < o.runs; ++i) runs.push_back(g.run_profiled());
  std::vector<Timed> timed;
  for (size_t k = 0; k < runs[0].size(); ++k) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r[k].ms);
    timed.push_back({runs[0][k].node, median(v)});
  }
  double total = 0;
  for (const Timed& t : timed) total += t.ms;
  const std::vector<Group> by_op = group_by(g, timed, true), by_kernel = group_by(g, timed, false);
  const auto& a = ctx.adapter();

  if (!o.trace.empty()) {
    // Chrome trace (chrome://tracing, Perfetto): one complete event per
    // dispatch, laid end to end in dispatch order with its median duration.
    json events = json::array();
    double ts_us = 0;
    for (const Timed& t : timed) {
      const DispatchNode& n = g.dispatches()[t.node];
      const double dur_us = t.ms * 1000.0;
      json args{{"op", n.op},
                {"kernel", n.pipeline->name()},
                {"label", n.label},
                {"index", t.node},
                {"bytes", g.bound_bytes(n)},
                {"workgroups", n.grid.count()}};
      if (n.flops > 0) args["flops"] = n.flops;
      events.push_back({{"name", n.label},
                        {"cat", n.op},
                        {"ph", "X"},
                        {"ts", ts_us},
                        {"dur", dur_us},
                        {"pid", 1},
                        {"tid", 1},
                        {"args", std::move(args)}});
      ts_us += dur_us;
    }
    json trace{{"traceEvents", std::move(events)},
               {"displayTimeUnit", "ms"},
               {"otherData",
                {{"model", model_name(o.model)},
                 {"adapter", a.name},
                 {"runs", o.runs},
                 {"dispatches", timed.size()},
                 {"total_ms", total},
                 {"one_pass_gpu_ms", median(one_pass)},
                 {"note",
                  "each dispatch timed in its own compute pass (median of the runs), laid end to end; the sum "
                  "exceeds the one-pass GPU time"}}}};
    std::ofstream f(o.trace);
    f << trace.dump() << "\n";
    f.close();
    if (!f) throw Error(fmt::format("--trace {}: could not write the file", o.trace));
  }

  if (o.json) {
    json j{{"model", model_name(o.model)},
           {"precision", o.fp16 ? "fp16" : "fp32"},
           {"checked", !o.unchecked},
           {"adapter", a.name},
           {"backend", a.backend},
           {"inputs", inputs_json(inputs)},
           {"runs", o.runs},
           {"dispatches", timed.size()},
           {"total_ms", total},
           {"one_pass_gpu_ms", median(one_pass)},
           {"first_run", first_run_json(first)},
           {"by_op", groups_json(by_op, total, "op")},
           {"by_kernel", groups_json(by_kernel, total, "kernel")}};
    if (!o.trace.empty()) j["trace"] = o.trace;
    std::cout << j.dump() << "\n";
    return 0;
  }
  fmt::print("model      {}{}\n", o.model, o.fp16 ? " (float16 mode)" : "");
  fmt::print("adapter    {} ({})\n", a.name, a.backend);
  fmt::print("inputs     {}\n", describe_inputs(inputs));
  fmt::print("GPU time   {:.3f} ms in {} dispatches, each timed in its own pass (median of {} runs per dispatch)\n",
             total, timed.size(), o.runs);
  fmt::print("one pass   {:.3f} ms (all dispatches in one pass, as `wgnn bench` reports gpu_ms)\n",
             median(one_pass));
  fmt::print("           Per-dispatch passes add each pass's start and end and drain the GPU between\n"
             "           dispatches, so these totals exceed `wgnn bench`'s gpu_ms; compare shares, not sums.\n");
  fmt::print("           GB/s: bytes bound by the dispatches (inputs, outputs, op buffers) over their time.\n");
  print_first_run(first);
  fmt::print("\n");
  print_groups(by_op, total, "op", o.top);
  fmt::print("\n");
  print_groups(by_kernel, total, "kernel", o.top);
  if (!o.trace.empty()) fmt::print("\ntrace      {} ({} events; chrome://tracing or ui.perfetto.dev)\n", o.trace, timed.size());
  return 0;
}

}  // namespace wgnn::tools
