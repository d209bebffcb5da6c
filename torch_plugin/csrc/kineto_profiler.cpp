// torch.profiler with ProfilerActivity.PrivateUse1: a Kineto activity profiler
// (PyTorch's PrivateUse1ProfilerRegistry, REGISTER_PRIVATEUSE1_PROFILER) whose
// session turns the device trace on (device_trace.h) and hands every command the
// chip ran to Kineto as a device kernel: its device start and end, device and
// stream, and a link to the op that launched it (the profiler's correlation id,
// which Kineto pushes to each session as ops start). The trace then shows the
// commands on a "neuron" device row, in prof.events() as device time of their ops,
// and in export_chrome_trace with the op's "External id".
// The torch wheel is built with Kineto; its profiler headers declare the registry
// only under USE_KINETO.
#ifndef USE_KINETO
#define USE_KINETO 1
#endif
// GenericTraceActivity's metadata goes through fmt, whose compiled part libtorch
// does not export: compile it into this file.
#define FMT_HEADER_ONLY 1

#include "device_trace.h"

#include <c10/util/ApproximateClock.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <set>

namespace torch_neuron {

namespace {

class Session final : public libkineto::IActivityProfilerSession {
public:
	void start() override
	{
		start_ns_ = c10::getTime();
		trace_start();
		status_ = libkineto::TraceStatus::RECORDING;
	}

	void stop() override
	{
		try {
			records_ = trace_stop();
		} catch (const std::exception &e) {
			errors_.push_back(std::string("neuron device trace: ") + e.what());
		}
		end_ns_ = c10::getTime();
		status_ = libkineto::TraceStatus::PROCESSING;
	}

	std::vector<std::string> errors() override { return errors_; }

	void processTrace(libkineto::ActivityLogger &logger) override { processTrace(logger, nullptr, 0, 0); }

	void processTrace(libkineto::ActivityLogger &logger, libkineto::getLinkedActivityCallback linked, int64_t,
			  int64_t) override
	{
		buffer_.span = libkineto::TraceSpan(start_ns_, end_ns_, "neuron");
		int32_t id = 0;
		for (const DeviceRecord &r : records_) {
			auto a = std::make_unique<libkineto::GenericTraceActivity>(buffer_.span,
										  libkineto::ActivityType::CONCURRENT_KERNEL, r.name);
			a->startTime = r.start_ns;
			a->endTime = std::max(r.end_ns, r.start_ns);
			a->id = ++id;
			a->device = r.device;
			a->resource = static_cast<int32_t>(r.stream);
			if (linked && r.correlation)
				a->linked = linked(static_cast<int32_t>(r.correlation));
			a->addMetadata("device", r.device);
			a->addMetadata("stream", r.stream);
			a->addMetadata("queue seq", r.queue_seq);
			a->addMetadata("elements", r.elements);
			if (r.correlation)
				a->addMetadata("correlation", r.correlation);
			a->log(logger);
			buffer_.activities.push_back(std::move(a));
		}
	}

	std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override
	{
		return std::make_unique<libkineto::DeviceInfo>(0, 0, "neuron", "neuron devices");
	}

	std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }

	std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override
	{
		return std::make_unique<libkineto::CpuTraceBuffer>(std::move(buffer_));
	}

	void pushCorrelationId(uint64_t id) override { trace_push_correlation(id); }
	void popCorrelationId() override { trace_pop_correlation(); }

private:
	int64_t start_ns_ = 0, end_ns_ = 0;
	std::vector<DeviceRecord> records_;
	std::vector<std::string> errors_;
	libkineto::CpuTraceBuffer buffer_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
public:
	const std::string &name() const override { return name_; }
	const std::set<libkineto::ActivityType> &availableActivities() const override { return activities_; }

	std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType> &types,
									 const libkineto::Config &) override
	{
		for (auto t : types)
			if (activities_.count(t))
				return std::make_unique<Session>();
		return nullptr;
	}

	std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
									 const std::set<libkineto::ActivityType> &types,
									 const libkineto::Config &config) override
	{
		return configure(types, config);
	}

private:
	std::string name_ = "neuron";
	// Device kernels only: a CPU-only profile asks for PRIVATEUSE1_RUNTIME (host-side
	// runtime calls) too, and must not turn the device trace on.
	std::set<libkineto::ActivityType> activities_ = {libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);

} // namespace

} // namespace torch_neuron
