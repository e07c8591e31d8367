#pragma once
// A fixed set of threads running submitted tasks in the order they were
// submitted. Host only.
//
//   util::ThreadPool pool(4);
//   std::future<int> f = pool.submit([] { return 6 * 7; });
//   f.get();  // 42, or what the task threw
//
// The destructor drops the tasks not started yet (their futures then throw
// std::future_error, broken_promise) and waits for the running ones.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace wgnn::util {

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 0; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { work(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stopping_ = true;
      queue_.clear();
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  template <class F>
  auto submit(F f) -> std::future<decltype(f())> {
    auto task = std::make_shared<std::packaged_task<decltype(f())()>>(std::move(f));
    auto fut = task->get_future();
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.emplace_back([task] { (*task)(); });
    }
    cv_.notify_one();
    return fut;
  }

  int size() const { return int(workers_.size()); }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(m_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }
  std::vector<std::thread> workers_;
  std::deque<std::function<void()>> queue_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

}  // namespace wgnn::util
