// A tenant's registered programs by id (backend::TenantContext::programs()).
//
// Lock: its own mutex, held only inside each call. The control thread adds and
// removes (RegisterProgram, DeregisterProgram, tenant exit); engine threads find
// a program when they admit an EXEC_PROGRAM, and keep the shared_ptr for the
// replay, so a program removed meanwhile stays alive (and its buffers allocated)
// until the replays that hold it end.
#pragma once

#include "program.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace neuron::program {

class ProgramTable {
public:
	// Takes an id (unique for the tenant's life, from 1) and stores the program.
	uint64_t add(std::shared_ptr<Program> p)
	{
		std::lock_guard lock(mutex_);
		p->id = next_id_++;
		programs_[p->id] = std::move(p);
		return next_id_ - 1;
	}
	// Restart survival (daemon/README.md): a program of the earlier neurond,
	// stored under the id it had, and ids from `next` on (the earlier table's
	// next id), so an id never names two programs.
	void adopt(std::shared_ptr<Program> p, uint64_t id)
	{
		std::lock_guard lock(mutex_);
		p->id = id;
		programs_[id] = std::move(p);
		next_id_ = std::max(next_id_, id + 1);
	}
	void reserve(uint64_t next)
	{
		std::lock_guard lock(mutex_);
		next_id_ = std::max(next_id_, next);
	}
	uint64_t next_id() const
	{
		std::lock_guard lock(mutex_);
		return next_id_;
	}
	std::shared_ptr<const Program> find(uint64_t id) const
	{
		std::lock_guard lock(mutex_);
		auto it = programs_.find(id);
		return it == programs_.end() ? nullptr : it->second;
	}
	// The program, no longer findable; nullptr if there is none.
	std::shared_ptr<const Program> remove(uint64_t id)
	{
		std::lock_guard lock(mutex_);
		auto it = programs_.find(id);
		if (it == programs_.end())
			return nullptr;
		auto p = std::move(it->second);
		programs_.erase(it);
		return p;
	}
	// Every program, removed (the tenant goes).
	std::vector<std::shared_ptr<const Program>> take_all()
	{
		std::lock_guard lock(mutex_);
		std::vector<std::shared_ptr<const Program>> all;
		for (auto &[id, p] : programs_)
			all.push_back(std::move(p));
		programs_.clear();
		return all;
	}
	size_t size() const
	{
		std::lock_guard lock(mutex_);
		return programs_.size();
	}
	std::vector<std::shared_ptr<const Program>> snapshot() const
	{
		std::lock_guard lock(mutex_);
		std::vector<std::shared_ptr<const Program>> all;
		for (const auto &[id, p] : programs_)
			all.push_back(p);
		return all;
	}

private:
	mutable std::mutex mutex_;
	uint64_t next_id_ = 1;
	std::map<uint64_t, std::shared_ptr<const Program>> programs_;
};

} // namespace neuron::program
