// A tenant's objects by id, for cross-queue waits (backend::QueueDirectory: its
// queues).
//
// Ownership: the directory owns nothing. It holds weak pointers, so an object
// lives as long as its owner (the tenant) keeps it, and find() on an id whose
// object is gone returns nullptr as if it had been removed; the shared_ptr
// find() returns keeps the object alive while the caller uses it.
//
// Lock: its own mutex, held only inside each call and never while calling into
// an object, so the owner (control thread: add, remove) and the readers (the
// engine or pump threads, find when a command carries a wait) may call at any
// time, with any of their own locks held.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace neuron::backend {

template <class T>
class WeakDirectory {
public:
	void add(uint64_t id, const std::shared_ptr<T> &object)
	{
		std::lock_guard lock(mutex_);
		objects_[id] = object;
	}

	void remove(uint64_t id)
	{
		std::lock_guard lock(mutex_);
		objects_.erase(id);
	}

	// Every object still alive (entries whose object is gone are dropped).
	std::vector<std::shared_ptr<T>> live()
	{
		std::lock_guard lock(mutex_);
		std::vector<std::shared_ptr<T>> out;
		for (auto it = objects_.begin(); it != objects_.end();) {
			if (auto p = it->second.lock()) {
				out.push_back(std::move(p));
				++it;
			} else {
				it = objects_.erase(it);
			}
		}
		return out;
	}

	// nullptr: no such id, or its object is already destroyed.
	std::shared_ptr<T> find(uint64_t id) const
	{
		std::lock_guard lock(mutex_);
		auto it = objects_.find(id);
		return it == objects_.end() ? nullptr : it->second.lock();
	}

private:
	mutable std::mutex mutex_;
	std::map<uint64_t, std::weak_ptr<T>> objects_;
};

} // namespace neuron::backend
