// Tier-0 kernels (allocation, views, copies, .item()), the CPU fallback, and the
// torch.ops.neuron.* helpers the Python package is built on.
#include "encode.h"
#include "generator.h"

#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/alias_native.h>
#include <torch/library.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace torch_neuron {

namespace {

// ---- float64 runs as float32 ----

c10::ScalarType device_dtype(c10::ScalarType t)
{
	if (t == c10::kDouble) {
		static std::once_flag once;
		std::call_once(once, [] {
			TORCH_WARN("neuron: float64 is not supported by the device; float64 tensors on 'neuron' are stored "
				   "and computed as float32 (this warning is shown once).");
		});
		return c10::kFloat;
	}
	return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
			       std::optional<c10::Layout> layout, std::optional<c10::Device> device,
			       std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format)
{
	TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron: only strided tensors are supported");
	const c10::ScalarType dt = device_dtype(dtype.value_or(c10::get_default_dtype_as_scalartype()));
	const int dev = device && device->has_index() ? device->index() : current_device();
	const int old = current_device();
	set_current_device(dev);
	at::Tensor t;
	try {
		constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
		t = at::detail::empty_generic(size, device_allocator(), ks, dt, memory_format);
	} catch (...) {
		set_current_device(old);
		throw;
	}
	set_current_device(old);
	return t;
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
			 std::optional<c10::Layout> layout, std::optional<c10::Device> device, std::optional<bool>)
{
	TORCH_CHECK(!layout || *layout == c10::kStrided, "neuron: only strided tensors are supported");
	const c10::ScalarType dt = device_dtype(dtype.value_or(c10::get_default_dtype_as_scalartype()));
	const int dev = device && device->has_index() ? device->index() : current_device();
	const int old = current_device();
	set_current_device(dev);
	at::Tensor t;
	try {
		constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
		t = at::detail::empty_strided_generic(size, stride, device_allocator(), ks, dt);
	} catch (...) {
		set_current_device(old);
		throw;
	}
	set_current_device(old);
	return t;
}

const at::Tensor &resize_(const at::Tensor &self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> fmt)
{
	auto *impl = self.unsafeGetTensorImpl();
	int64_t numel = 1;
	for (auto s : size)
		numel *= s;
	const size_t need = (impl->storage_offset() + numel) * self.itemsize();
	if (need > self.storage().nbytes()) {
		const int old = current_device();
		set_current_device(self.device().index());
		c10::DataPtr fresh = device_allocator()->allocate(need);
		set_current_device(old);
		c10::StorageImpl *st = self.storage().unsafeGetStorageImpl();
		const size_t keep = st->nbytes();
		if (keep && st->data())
			device_allocator()->copy_data(fresh.get(), st->data(), keep);
		st->set_data_ptr_noswap(std::move(fresh));
		st->set_nbytes(need);
	}
	impl->set_sizes_contiguous(size);
	if (fmt && *fmt != c10::MemoryFormat::Preserve)
		impl->empty_tensor_restride(*fmt);
	return self;
}

// ---- copies ----

bool overlaps(const at::Tensor &a, const at::Tensor &b)
{
	if (!a.storage().is_alias_of(b.storage()))
		return false;
	const auto lo = [](const at::Tensor &t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); };
	const auto hi = [](const at::Tensor &t) {
		int64_t last = 0;
		for (int i = 0; i < t.dim(); ++i)
			last += (t.size(i) - 1) * t.stride(i);
		return reinterpret_cast<uintptr_t>(t.data_ptr()) + (last + 1) * t.itemsize();
	};
	return lo(a) < hi(b) && lo(b) < hi(a);
}

// Same dtype, a dtype the chip does not compute on: the elements' bytes move as U8.
bool bytewise(const at::Tensor &dst, const at::Tensor &src)
{
	return dst.scalar_type() == src.scalar_type() && (!chip_ok(dst) || !chip_ok(src)) && byte_copyable(dst) &&
	       byte_copyable(src);
}

void device_copy(const at::Tensor &dst, const at::Tensor &src_in)
{
	at::Tensor src = src_in.expand(dst.sizes());
	if (overlaps(dst, src) && !(dst.data_ptr() == src.data_ptr() && dst.strides() == src.strides() &&
				   dst.scalar_type() == src.scalar_type())) {
		at::Tensor tmp = at::empty(src.sizes(), src.options());
		device_copy(tmp, src);
		src = tmp;
	} else if (dst.data_ptr() == src.data_ptr() && dst.strides() == src.strides() &&
		   dst.scalar_type() == src.scalar_type()) {
		return;
	}
	const bool bytes = bytewise(dst, src);
	neuron_cmd cmd;
	cmd_init(cmd, NEURON_OP_COPY, 2);
	cmd.operands[0] = bytes ? desc_bytes(dst) : desc(dst);
	cmd.operands[1] = bytes ? desc_bytes(src) : desc(src);
	submit(dst, cmd);
}

void h2d(const at::Tensor &dst, const at::Tensor &src_in, bool non_blocking)
{
	const bool direct = dst.is_contiguous() && chip_dtype(dst.scalar_type()) != NEURON_DTYPE_INVALID;
	at::Tensor target = direct || chip_dtype(dst.scalar_type()) == NEURON_DTYPE_INVALID
				    ? dst
				    : at::empty(dst.sizes(), dst.options());
	if (!target.is_contiguous()) // a dtype the chip cannot cast, into a strided destination
		target = at::empty(dst.sizes(), dst.options());
	at::Tensor src = src_in;
	if (src.scalar_type() != target.scalar_type())
		src = src.to(target.scalar_type());
	src = src.expand(target.sizes()).contiguous();
	const size_t bytes = src.nbytes();
	if (bytes == 0)
		return;
	StreamQueues &sq = current_queues(dst.device().index());
	uint64_t off = 0;
	neuron_host_buffer *buf = find_pinned(src.data_ptr(), bytes, &off);
	c10::DataPtr stage;
	if (!buf) {
		stage = staging(bytes);
		std::memcpy(stage.get(), src.data_ptr(), bytes);
		buf = find_pinned(stage.get(), bytes, &off);
		TORCH_INTERNAL_ASSERT(buf);
	}
	uint64_t seq = 0;
	{
		std::lock_guard lock(sq.mu);
		dma_after_core_locked(sq);
		neuron_status s = neuron_copy_h2d_async(sq.dma, dev_addr(target.data_ptr()), buf, off, bytes, &seq);
		if (s != NEURON_OK)
			stream_failed(sq, s, "copying host to device");
		core_after_dma_locked(sq, seq);
	}
	pinned_record_use(stage ? stage : src.storage().data_ptr(), sq);
	if (!stage && !non_blocking) {
		neuron_status s = neuron_queue_wait(sq.dma, seq, -1);
		if (s != NEURON_OK)
			stream_failed(sq, s, "copying host to device");
	}
	if (!target.is_same(dst))
		device_copy(dst, target);
}

void d2h(const at::Tensor &dst, const at::Tensor &src_in, bool non_blocking)
{
	at::Tensor src = src_in.expand(dst.sizes());
	if (!src.is_contiguous()) {
		TORCH_CHECK(chip_ok(src) || byte_copyable(src), "neuron: strided copy of dtype ", src.scalar_type(),
			    " is not supported");
		at::Tensor tmp = at::empty(src.sizes(), src.options());
		device_copy(tmp, src);
		src = tmp;
	}
	const size_t bytes = src.nbytes();
	if (bytes == 0)
		return;
	StreamQueues &sq = current_queues(src.device().index());
	uint64_t off = 0;
	neuron_host_buffer *buf = nullptr;
	if (non_blocking && dst.is_contiguous() && dst.scalar_type() == src.scalar_type())
		buf = find_pinned(dst.data_ptr(), bytes, &off);
	c10::DataPtr stage;
	if (!buf) {
		stage = staging(bytes);
		buf = find_pinned(stage.get(), bytes, &off);
	}
	uint64_t seq = 0;
	{
		std::lock_guard lock(sq.mu);
		dma_after_core_locked(sq);
		neuron_status s = neuron_copy_d2h_async(sq.dma, buf, off, dev_addr(src.data_ptr()), bytes, &seq);
		if (s != NEURON_OK)
			stream_failed(sq, s, "copying device to host");
		core_after_dma_locked(sq, seq);
	}
	pinned_record_use(stage ? stage : dst.storage().data_ptr(), sq);
	if (!stage)
		return; // asynchronous into pinned memory
	neuron_status s = neuron_queue_wait(sq.dma, seq, -1);
	if (s != NEURON_OK)
		stream_failed(sq, s, "copying device to host");
	at::Tensor staged = at::from_blob(stage.get(), src.sizes(), src.options().device(c10::kCPU));
	// The bytes are the source's memory; its conjugate / negative bits say what
	// they mean, and the host copy applies them.
	staged._set_conj(src_in.is_conj());
	staged._set_neg(src_in.is_neg());
	dst.copy_(staged);
}

// A host tensor whose memory holds what dst's memory must hold for dst to read
// as src: the conjugate / negative bits of both applied on the host.
at::Tensor for_memory_of(const at::Tensor &dst, const at::Tensor &src)
{
	at::Tensor h = src.resolve_conj().resolve_neg();
	if (dst.is_conj())
		h = h.conj_physical();
	if (dst.is_neg())
		h = h.neg();
	return h;
}

at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool non_blocking)
{
	if (dst.numel() == 0)
		return dst;
	const bool sd = self.device().is_privateuseone(), dd = dst.device().is_privateuseone();
	const bool same_bits = self.is_conj() == dst.is_conj() && self.is_neg() == dst.is_neg();
	if (sd && dd) {
		if (self.device() == dst.device() && same_bits &&
		    ((chip_ok(self) && chip_ok(dst)) || bytewise(dst, self))) {
			device_copy(dst, self);
		} else {
			// A cast between dtypes the chip does not compute, across devices, or
			// between conjugate / negative views: through the host.
			note_fallback("aten::_copy_from (device to device)");
			// By hand, not self.to("cpu"): a dispatched op on a conjugate view would go
			// through PyTorch's conjugate fallback, which copies it back here.
			at::Tensor cpu = at::empty(self.sizes(), self.options().device(c10::kCPU));
			d2h(cpu, self, false);
			dst.copy_(cpu, false);
		}
	} else if (dd) {
		const bool bits = self.is_conj() || self.is_neg() || dst.is_conj() || dst.is_neg();
		h2d(dst, bits ? for_memory_of(dst, self) : self, non_blocking);
	} else if (sd) {
		const bool bits = self.is_conj() || self.is_neg() || dst.is_conj() || dst.is_neg();
		d2h(dst, self, non_blocking && !bits);
	} else {
		dst.copy_(self, non_blocking);
	}
	return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst)
{
	if (dst.sizes() != self.sizes())
		dst.resize_(self.sizes());
	return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor &self)
{
	at::Tensor cpu = at::empty({}, self.options().device(c10::kCPU));
	d2h(cpu, self.reshape({}), false);
	return cpu.item();
}

at::Tensor &set_storage(at::Tensor &self, c10::Storage source, int64_t off, c10::IntArrayRef size,
			c10::IntArrayRef stride)
{
	return at::native::set_storage_meta__symint(self, std::move(source), off, c10::fromIntArrayRefSlow(size),
						    c10::fromIntArrayRefSlow(stride));
}
at::Tensor &set_source_storage(at::Tensor &self, c10::Storage source)
{
	const int64_t n = static_cast<int64_t>(source.nbytes() / self.itemsize());
	return set_storage(self, std::move(source), 0, {n}, {});
}
at::Tensor &set_source_tensor(at::Tensor &self, const at::Tensor &src)
{
	return set_storage(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}
at::Tensor &set_empty(at::Tensor &self)
{
	c10::Storage st(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
	return set_storage(self, st, 0, {0}, {});
}

void record_stream(at::Tensor &self, c10::Stream s)
{
	if (self.device().is_privateuseone())
		c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->recordDataPtrOnStream(self.storage().data_ptr(), s);
}

// ---- CPU fallback ----

struct FallbackState {
	std::mutex mu;
	std::map<std::string, int64_t> counts;
	std::map<std::string, int64_t> native;
	int strict = -1;
};
FallbackState &fb()
{
	static FallbackState *s = new FallbackState;
	return *s;
}

bool strict_mode()
{
	auto &s = fb();
	if (s.strict < 0) {
		const char *e = std::getenv("TORCH_NEURON_FALLBACK");
		s.strict = e && (std::strcmp(e, "error") == 0 || std::strcmp(e, "0") == 0) ? 1 : 0;
	}
	return s.strict == 1;
}

} // namespace

void note_fallback(const char *name)
{
	TORCH_CHECK(!strict_mode(), "neuron: ", name,
		    " has no neuron kernel and CPU fallback is disabled (TORCH_NEURON_FALLBACK=error)");
	bool first = false;
	{
		std::lock_guard lock(fb().mu);
		first = fb().counts[name]++ == 0;
	}
	if (first)
		TORCH_WARN("neuron: ", name, " has no neuron kernel; it runs on the CPU (copies to and from the device "
			   "cost time). Set TORCH_NEURON_FALLBACK=error to make this an error. (shown once per op)");
}

NativeCounter::NativeCounter(const char *n) : name(n)
{
	static std::mutex mu;
	std::lock_guard lock(mu);
	next = native_counters();
	native_counters() = this;
}
NativeCounter *&native_counters()
{
	static NativeCounter *head = nullptr;
	return head;
}

namespace {

void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack)
{
	const std::string name = op.schema().operator_name().name +
				 (op.schema().overload_name().empty() ? "" : "." + op.schema().overload_name());
	const auto &rets = op.schema().returns();
	bool view = false;
	for (const auto &r : rets)
		if (r.alias_info() && !r.alias_info()->isWrite())
			view = true;
	TORCH_CHECK(!view, "neuron: view op ", name,
		    " has no neuron kernel, and view ops never fall back to the CPU (aliasing would be lost)");
	note_fallback(name.c_str());
	at::native::cpu_fallback(op, stack, false, c10::DispatchKey::CPU);
}

// ---- torch.ops.neuron helpers ----

int64_t op_device_count() { return device_count(); }
bool op_is_available() { return device_count() > 0; }
void op_init() { client(); }
void op_synchronize(int64_t device) { sync_device(device < 0 ? current_device() : device); }
int64_t op_current_device() { return current_device(); }
void op_set_device(int64_t d)
{
	check_device(d);
	set_current_device(d);
}
std::vector<int64_t> op_memory_stats(int64_t device)
{
	const MemStats m = mem_stats(device < 0 ? current_device() : device);
	return {m.allocated, m.reserved, m.peak_allocated, m.peak_reserved, m.alloc_count, m.free_count, m.segments};
}
void op_reset_peak(int64_t device) { reset_peak(device < 0 ? current_device() : device); }
void op_empty_cache() { empty_cache(); }
std::string counts_str(std::map<std::string, int64_t> &m)
{
	std::lock_guard lock(fb().mu);
	std::ostringstream os;
	for (auto &[k, v] : m)
		os << k << '=' << v << ';';
	return os.str();
}
std::string op_fallback_counts() { return counts_str(fb().counts); }
std::string op_native_counts()
{
	std::ostringstream os;
	for (NativeCounter *c = native_counters(); c; c = c->next)
		if (c->n.load())
			os << c->name << '=' << c->n.load() << ';';
	return os.str();
}
void op_reset_counts()
{
	std::lock_guard lock(fb().mu);
	fb().counts.clear();
	fb().native.clear();
	for (NativeCounter *c = native_counters(); c; c = c->next)
		c->n = 0;
}
void op_set_strict(bool on) { fb().strict = on ? 1 : 0; }
std::vector<int64_t> op_device_info(int64_t device)
{
	struct neuron_device_info info{};
	check(neuron_device_info(client(), device, &info), "querying the device");
	return {info.core_count, static_cast<int64_t>(info.hbm_bytes), static_cast<int64_t>(info.hbm_used_bytes)};
}
std::string op_device_name(int64_t device)
{
	struct neuron_device_info info{};
	check(neuron_device_info(client(), device, &info), "querying the device");
	return std::string("Neuron ") + info.profile + " (" + info.backend + ")";
}
int64_t op_current_stream(int64_t device) { return current_stream(device).id(); }
std::vector<int64_t> op_queue_ids(int64_t device, int64_t stream)
{
	StreamQueues &sq = stream_queues(c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), stream));
	return {static_cast<int64_t>(neuron_queue_id(sq.core)), static_cast<int64_t>(neuron_queue_id(sq.dma))};
}

} // namespace


TORCH_LIBRARY(neuron, m)
{
	m.def("device_count() -> int", &op_device_count);
	m.def("is_available() -> bool", &op_is_available);
	m.def("init() -> ()", &op_init);
	m.def("synchronize(int device) -> ()", &op_synchronize);
	m.def("current_device() -> int", &op_current_device);
	m.def("set_device(int device) -> ()", &op_set_device);
	m.def("memory_stats(int device) -> int[]", &op_memory_stats);
	m.def("reset_peak_memory_stats(int device) -> ()", &op_reset_peak);
	m.def("empty_cache() -> ()", &op_empty_cache);
	m.def("memory_snapshot() -> int[]", &memory_snapshot_flat);
	m.def("fallback_counts() -> str", &op_fallback_counts);
	m.def("native_counts() -> str", &op_native_counts);
	m.def("reset_op_counts() -> ()", &op_reset_counts);
	m.def("set_fallback_strict(bool on) -> ()", &op_set_strict);
	m.def("device_info(int device) -> int[]", &op_device_info);
	m.def("device_name(int device) -> str", &op_device_name);
	m.def("current_stream_id(int device) -> int", &op_current_stream);
	m.def("queue_ids(int device, int stream) -> int[]", &op_queue_ids);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	m.impl("empty.memory_format", &empty_memory_format);
	m.impl("empty_strided", &empty_strided);
	m.impl("as_strided", &at::native::as_strided_tensorimpl);
	m.impl("view", &at::native::view);
	m.impl("_reshape_alias", &at::native::_reshape_alias);
	m.impl("unfold", &at::native::unfold);
	m.impl("alias", &at::native::alias);
	m.impl("resize_", &resize_);
	m.impl("_copy_from", &copy_from);
	m.impl("_copy_from_and_resize", &copy_from_and_resize);
	m.impl("_local_scalar_dense", &local_scalar_dense);
	m.impl("set_.source_Storage_storage_offset", &set_storage);
	m.impl("set_.source_Storage", &set_source_storage);
	m.impl("set_.source_Tensor", &set_source_tensor);
	m.impl("set_", &set_empty);
	m.impl("record_stream", &record_stream);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>()); }

} // namespace torch_neuron

namespace torch_neuron {
namespace {
// The generators' state is on the host: none of these connects to neurond.
constexpr c10::DeviceIndex kMaxSeededDevices = 16;
at::Generator default_gen(int64_t dev) { return default_generator(static_cast<c10::DeviceIndex>(dev)); }
void op_manual_seed(int64_t dev, int64_t seed)
{
	auto g = default_gen(dev);
	std::lock_guard lock(g.mutex());
	g.set_current_seed(static_cast<uint64_t>(seed));
}
bool op_connected() { return connected(); }
void op_manual_seed_all(int64_t seed)
{
	for (c10::DeviceIndex d = 0; d < kMaxSeededDevices; ++d)
		op_manual_seed(d, seed);
}
int64_t op_initial_seed(int64_t dev) { return static_cast<int64_t>(default_gen(dev).current_seed()); }
at::Tensor op_get_rng_state(int64_t dev)
{
	auto g = default_gen(dev);
	std::lock_guard lock(g.mutex());
	return g.get_state();
}
void op_set_rng_state(int64_t dev, const at::Tensor &state)
{
	auto g = default_gen(dev);
	std::lock_guard lock(g.mutex());
	g.set_state(state);
}
} // namespace

// Test hook: submits a command naming memory this process does not own, so the
// device faults the stream (as a kernel bug would); the next sync raises.
void op_inject_fault(int64_t device)
{
	neuron_cmd cmd;
	neuron_cmd_init(&cmd, NEURON_OP_FILL, 1);
	const int64_t sz[1] = {16};
	cmd.operands[0] = neuron_desc_contiguous(uint64_t{1} << 40, NEURON_DTYPE_F32, 1, sz);
	submit_core(current_queues(device), cmd);
}

TORCH_LIBRARY_FRAGMENT(neuron, m)
{
	m.def("_inject_fault(int device) -> ()", &op_inject_fault);
	m.def("manual_seed(int device, int seed) -> ()", &op_manual_seed);
	m.def("manual_seed_all(int seed) -> ()", &op_manual_seed_all);
	m.def("_connected() -> bool", &op_connected);
	m.def("initial_seed(int device) -> int", &op_initial_seed);
	m.def("get_rng_state(int device) -> Tensor", &op_get_rng_state);
	m.def("set_rng_state(int device, Tensor state) -> ()", &op_set_rng_state);
}
} // namespace torch_neuron
