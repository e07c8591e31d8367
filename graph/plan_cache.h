#pragma once
// The plans of one model at many input sizes, as every front end keeps them
// (onnx::Session, ir::Program): recorded graphs kept by a key (the input
// shapes, and what else decided the recording), all taking their buffers
// from one SharedStorage (graph/graph.h), so the model holds the memory of
// its largest graph. Graphs of one structure are one plan's sizes. The
// least recently used plan goes, with all its sizes, when a new plan would
// exceed max_plans; a plan's least recently used size when a new size
// would exceed max_plan_sizes; probes (graphs that compute a value control
// flow reads back) are kept apart, at most max_probes, and evict only
// probes. Size classes: the structural choices a class's first recording
// made from its sizes (Graph::choose), replayed by its later sizes.
//
// `Entry` is the front end's record of one graph: it has
// `std::unique_ptr<Graph> graph`, `uint64_t last_use` and
// `bool is_probe() const`, and may hold a second graph that shares the
// storage (join() is called for it).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpu/error.h"
#include "graph/graph.h"

namespace wgnn {

// Size classes (PlanCacheOptions::size_classes): sets of input shapes whose
// inputs hold from 4^k up to 4^(k+1) elements in all are of class k.
inline int power_of_4_class(double elements) { return elements >= 1 ? int(std::floor(std::log2(elements) / 2)) : -1; }
// The class of input shapes given in order: their ranks and power_of_4_class.
inline std::string size_class(const std::vector<Shape>& shapes) {
  std::string k;
  double elements = 0;
  for (const Shape& s : shapes) {
    k += std::to_string(s.size()) + ";";
    elements += double(numel(s));
  }
  return k + "4^" + std::to_string(power_of_4_class(elements));
}

struct PlanCacheOptions {
  int max_plans = 8;        // at least 1
  int max_plan_sizes = 64;  // at least 1
  size_t max_probes = 256;
  bool size_classes = true;
};

template <class Entry>
class PlanCache {
 public:
  using Map = std::map<std::string, std::unique_ptr<Entry>>;
  explicit PlanCache(PlanCacheOptions o) : options_(o) {
    if (o.max_plans < 1) {
      throw Error("max_plans is " + std::to_string(o.max_plans) + ": at least one plan must be kept");
    }
    if (o.max_plan_sizes < 1) {
      throw Error("max_plan_sizes is " + std::to_string(o.max_plan_sizes) + ": at least one size must be kept");
    }
  }
  const PlanCacheOptions& options() const { return options_; }

  // Every entry by key (the front end's loops over them).
  Map& entries() { return entries_; }
  const Map& entries() const { return entries_; }
  // The entry kept under `key`, marked used; null if none.
  Entry* find(const std::string& key) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    touch(*it->second);
    return it->second.get();
  }
  void touch(Entry& e) { e.last_use = ++clock_; }
  // Keeps `e` under `key` (after make_room()), replacing what was there.
  Entry& keep(const std::string& key, std::unique_ptr<Entry> e) {
    Entry& kept = *e;
    entries_[key] = std::move(e);
    return kept;
  }
  // Moves the entry under `from` to `to` (its key changed); null if none.
  Entry* rekey(const std::string& from, const std::string& to) {
    auto it = entries_.find(from);
    if (it == entries_.end()) return nullptr;
    std::unique_ptr<Entry> e = std::move(it->second);
    entries_.erase(it);
    return &keep(to, std::move(e));
  }
  void clear() { entries_.clear(); }

  // A graph takes its buffers from the storage from its next prepare().
  void join(Graph& g) const { g.share_storage(storage_); }
  // Makes room for `e`, a new recording not yet kept: evicts least
  // recently used probes (for a probe), or the least recently used plan
  // with all its sizes (for a new plan), or the least recently used size of
  // e's plan. `evicting` is told of each entry before it goes.
  void make_room(const Entry& e, const std::function<void(Entry&)>& evicting = {}) {
    auto evict = [&](typename Map::iterator it) {
      if (evicting) evicting(*it->second);
      entries_.erase(it);
      ++evictions_;
    };
    if (e.is_probe()) {
      for (;;) {
        auto lru = entries_.end();
        size_t count = 0;
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
          if (!it->second->is_probe()) continue;
          ++count;
          if (lru == entries_.end() || it->second->last_use < lru->second->last_use) lru = it;
        }
        if (count < options_.max_probes) return;
        evict(lru);
      }
    }
    // The plan e is a size of: its structure's layout, if a kept graph has it.
    const void* mine = storage_->layout_of(e.graph->structure());
    for (;;) {
      std::map<const void*, uint64_t> last_use;  // plan -> its latest use
      size_t sizes = 0;
      auto lru_size = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second->is_probe()) continue;
        const void* p = plan_of(*it->second);
        uint64_t& u = last_use[p];
        u = std::max(u, it->second->last_use);
        if (mine && p == mine) {
          ++sizes;
          if (lru_size == entries_.end() || it->second->last_use < lru_size->second->last_use) lru_size = it;
        }
      }
      if (mine && last_use.count(mine)) {
        if (sizes < size_t(options_.max_plan_sizes)) return;
        evict(lru_size);
        continue;
      }
      if (int(last_use.size()) < options_.max_plans) return;
      const void* oldest = nullptr;
      for (const auto& [p, u] : last_use)
        if (!oldest || u < last_use[oldest]) oldest = p;
      for (auto it = entries_.begin(); it != entries_.end();) {
        auto next = std::next(it);
        if (!it->second->is_probe() && plan_of(*it->second) == oldest) evict(it);
        it = next;
      }
    }
  }

  // Plans kept (structures), and the sets of input shapes they serve.
  int plans() const {
    std::vector<const void*> ps;
    for (const auto& [k, e] : entries_)
      if (!e->is_probe()) ps.push_back(plan_of(*e));
    std::sort(ps.begin(), ps.end());
    return int(std::unique(ps.begin(), ps.end()) - ps.begin());
  }
  int plan_sizes() const {
    int n = 0;
    for (const auto& [k, e] : entries_) n += !e->is_probe();
    return n;
  }
  int probes() const { return int(entries_.size()) - plan_sizes(); }
  int evictions() const { return evictions_; }
  // Bytes of the buffers every graph shares.
  uint64_t buffer_bytes() const { return storage_->bytes(); }
  const std::shared_ptr<SharedStorage>& storage() const { return storage_; }

  // Size classes (PlanCacheOptions::size_classes): the choices to replay in
  // a recording of class `cls` (null: none yet, or classes off), and the
  // choices of a class's first recording, kept (at most 4,096 classes).
  std::shared_ptr<const PlanChoices> choices_of(const std::string& cls) const {
    if (!options_.size_classes) return nullptr;
    auto it = classes_.find(cls);
    return it == classes_.end() ? nullptr : it->second;
  }
  void remember_choices(const std::string& cls, const Graph& g) {
    if (!options_.size_classes || classes_.count(cls)) return;
    if (classes_.size() >= 4096) classes_.erase(classes_.begin());
    classes_.emplace(cls, std::make_shared<const PlanChoices>(g.choices()));
  }

 private:
  // The plan a kept graph is a size of (its layout of the storage), or the
  // entry itself before its graph's first prepare.
  static const void* plan_of(const Entry& e) {
    return e.graph->plan_id() ? e.graph->plan_id() : static_cast<const void*>(&e);
  }
  PlanCacheOptions options_;
  Map entries_;
  std::shared_ptr<SharedStorage> storage_ = std::make_shared<SharedStorage>();
  std::map<std::string, std::shared_ptr<const PlanChoices>> classes_;
  uint64_t clock_ = 0;
  int evictions_ = 0;
};

}  // namespace wgnn
