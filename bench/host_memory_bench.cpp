// How fast a process gets fresh host memory it writes once: what a first
// run pays for its outputs, its folded weights and its staging copies.
// Each way of getting N bytes is timed, with the copy of N bytes into it,
// in a loop of fresh allocations (each freed before the next), against a
// copy into memory already touched. Prints one JSON line per way and size.
//
//   wgnn_bench_host_memory [MiB ...]      (default: 4 16 64 124)
//
// Ways: vector (std::vector<uint8_t>(n): zero fill, then the copy), malloc
// (the copy alone faults the pages in), populate (mmap with MAP_POPULATE),
// populate_write (madvise MADV_POPULATE_WRITE), hugepage (madvise
// MADV_HUGEPAGE before the copy), reused (the same touched memory each time);
// malloc_threads and hugepage_threads: the same with the copy cut into
// eight parts on eight threads (page faults taken in parallel).
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct Result {
  double median_ms = 0;
  long faults = 0;  // per allocation
  bool ok = true;
  std::string why;
};

template <typename F>
Result time_way(int reps, F&& once) {
  std::vector<double> ms;
  long f0 = minor_faults();
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    std::string why;
    if (!once(&why)) return Result{0, 0, false, why};
    ms.push_back(ms_since(t0));
  }
  std::sort(ms.begin(), ms.end());
  return Result{ms[ms.size() / 2], (minor_faults() - f0) / reps, true, {}};
}

void* map_bytes(size_t n, int extra_flags) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void copy_threads(uint8_t* dst, const uint8_t* src, size_t n, int threads) {
  std::vector<std::thread> pool;
  const size_t part = (n / threads + 4095) & ~size_t(4095);
  for (int t = 0; t < threads; ++t) {
    size_t b = std::min(n, t * part), e = std::min(n, b + part);
    pool.emplace_back([=] { std::memcpy(dst + b, src + b, e - b); });
  }
  for (auto& th : pool) th.join();
}

uint8_t* map_huge(size_t n, void** base, size_t* len) {
  const size_t huge = 2u << 20;
  *len = n + huge;
  auto* b = static_cast<uint8_t*>(map_bytes(*len, 0));
  if (!b) return nullptr;
  *base = b;
  auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(b) + huge - 1) & ~(huge - 1));
  madvise(p, n, MADV_HUGEPAGE);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> mib;
  for (int i = 1; i < argc; ++i) mib.push_back(std::strtoull(argv[i], nullptr, 10));
  if (mib.empty()) mib = {4, 16, 64, 124};
  for (size_t m : mib) {
    const size_t n = m << 20;
    std::vector<uint8_t> src(n, 7), kept(n, 1);
    const int reps = m >= 64 ? 7 : 15;
    auto report = [&](const char* way, const Result& r) {
      if (!r.ok) {
        std::printf("{\"way\": \"%s\", \"mib\": %zu, \"error\": \"%s\"}\n", way, m, r.why.c_str());
      } else {
        std::printf("{\"way\": \"%s\", \"mib\": %zu, \"median_ms\": %.3f, \"gb_per_s\": %.2f, \"faults\": %ld}\n", way,
                    m, r.median_ms, double(n) / r.median_ms / 1e6, r.faults);
      }
      std::fflush(stdout);
    };
    report("reused", time_way(reps, [&](std::string*) {
             std::memcpy(kept.data(), src.data(), n);
             return true;
           }));
    report("vector", time_way(reps, [&](std::string*) {
             std::vector<uint8_t> v(n);
             std::memcpy(v.data(), src.data(), n);
             return v[n - 1] == 7;
           }));
    report("malloc", time_way(reps, [&](std::string*) {
             auto* p = static_cast<uint8_t*>(std::malloc(n));
             std::memcpy(p, src.data(), n);
             bool ok = p[n - 1] == 7;
             std::free(p);
             return ok;
           }));
    report("populate", time_way(reps, [&](std::string* why) {
             void* p = map_bytes(n, MAP_POPULATE);
             if (!p) return *why = std::strerror(errno), false;
             std::memcpy(p, src.data(), n);
             munmap(p, n);
             return true;
           }));
    report("populate_write", time_way(reps, [&](std::string* why) {
             void* p = map_bytes(n, 0);
             if (!p) return *why = std::strerror(errno), false;
             if (madvise(p, n, MADV_POPULATE_WRITE) != 0) {
               *why = std::string("madvise: ") + std::strerror(errno);
               munmap(p, n);
               return false;
             }
             std::memcpy(p, src.data(), n);
             munmap(p, n);
             return true;
           }));
    report("hugepage", time_way(reps, [&](std::string* why) {
             // 2 MiB aligned, so whole huge pages can back it.
             const size_t huge = 2u << 20, len = n + huge;
             auto* base = static_cast<uint8_t*>(map_bytes(len, 0));
             if (!base) return *why = std::strerror(errno), false;
             auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + huge - 1) & ~(huge - 1));
             if (madvise(p, n, MADV_HUGEPAGE) != 0) {
               *why = std::string("madvise: ") + std::strerror(errno);
               munmap(base, len);
               return false;
             }
             std::memcpy(p, src.data(), n);
             munmap(base, len);
             return true;
           }));
    report("malloc_threads", time_way(reps, [&](std::string*) {
             auto* p = static_cast<uint8_t*>(std::malloc(n));
             copy_threads(p, src.data(), n, 8);
             bool ok = p[n - 1] == 7;
             std::free(p);
             return ok;
           }));
    report("hugepage_threads", time_way(reps, [&](std::string* why) {
             void* base = nullptr;
             size_t len = 0;
             uint8_t* p = map_huge(n, &base, &len);
             if (!p) return *why = std::strerror(errno), false;
             copy_threads(p, src.data(), n, 8);
             munmap(base, len);
             return true;
           }));
    report("reused_threads", time_way(reps, [&](std::string*) {
             copy_threads(kept.data(), src.data(), n, 8);
             return true;
           }));
  }
  return 0;
}
