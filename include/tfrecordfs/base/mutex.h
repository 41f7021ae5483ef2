// A mutex that clang's thread-safety analysis checks (-Wthread-safety:
// scripts/thread-safety) and ThreadSanitizer sees.
//
// Why not absl::Mutex: Debian's Abseil is not built with TSan, so
// absl::Mutex's hand-offs are invisible to it and every access it guards
// looks like a race. Why not std::mutex: libstdc++'s std::mutex and
// std::lock_guard carry no capability attributes, so ABSL_GUARDED_BY on a
// std::mutex is never checked (clang only says the attribute is misplaced).
// So: a std::mutex inside (what TSan instruments), the capability
// attributes outside (what clang checks). With g++ the attributes compile to
// nothing and this is a std::mutex.
//
//   Mutex mu_;
//   int n_ ABSL_GUARDED_BY(mu_);
//   void Add() { MutexLock lock(&mu_); ++n_; }
//
// Waiting: CondVar over a Mutex, in a loop that re-checks the
// condition under the lock (the analysis does not look into lambdas, so
// there is no predicate overload):
//
//   MutexLock lock(&mu_);
//   while (!ready_) cv_.Wait(&mu_);
//
// Thread-safety: Mutex and CondVar are, of course, meant to be shared;
// a MutexLock belongs to the thread that made it.
#ifndef TFRECORDFS_BASE_MUTEX_H_
#define TFRECORDFS_BASE_MUTEX_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"

namespace tfrecordfs {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  // Releases `mu` while waiting and holds it again on return, which may be
  // spurious: call it in a loop that checks the condition.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's MutexLock unlocks it
  }
  // Wait for at most `timeout`; false when it ran out.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool notified = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A readers-writer lock that lets a waiting writer in: once a writer waits,
// new readers wait for it (std::shared_mutex, pthread's by default, lets a
// steady stream of readers starve writers). Readers already in hold it
// until they leave. Not recursive.
class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    writers_waiting_.fetch_add(1, std::memory_order_acq_rel);
    rw_.lock();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    rw_.unlock();
    {
      std::lock_guard<std::mutex> gate(gate_mu_);
      writers_waiting_.fetch_sub(1, std::memory_order_acq_rel);
    }
    gate_cv_.notify_all();
  }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() {
    if (writers_waiting_.load(std::memory_order_acquire) != 0) {
      std::unique_lock<std::mutex> gate(gate_mu_);
      gate_cv_.wait(gate, [&] { return writers_waiting_.load(std::memory_order_acquire) == 0; });
    }
    rw_.lock_shared();
  }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { rw_.unlock_shared(); }

 private:
  std::shared_mutex rw_;
  std::atomic<int> writers_waiting_{0};
  std::mutex gate_mu_;
  std::condition_variable gate_cv_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~WriterMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace tfrecordfs

#endif  // TFRECORDFS_BASE_MUTEX_H_
