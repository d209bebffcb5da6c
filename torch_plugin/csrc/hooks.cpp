// The PrivateUse1 hooks: what ATen asks of a backend outside the dispatcher
// (generators, pinned memory, device from pointer, storage resize).
#include "generator.h"
#include "memory.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>

#include <algorithm>

namespace torch_neuron {

namespace {


struct Hooks final : public at::PrivateUse1HooksInterface {
	bool isBuilt() const override { return true; }
	bool isAvailable() const override { return device_count() > 0; }
	const at::Generator &getDefaultGenerator(c10::DeviceIndex idx) const override { return default_generator(idx); }
	at::Generator getNewGenerator(c10::DeviceIndex idx = -1) const override
	{
		return at::make_generator<NeuronGenerator>(idx < 0 ? current_device() : idx);
	}
	at::Device getDeviceFromPtr(void *) const override { return at::Device(c10::DeviceType::PrivateUse1, current_device()); }
	bool isPinnedPtr(const void *p) const override { return find_pinned(p, 1, nullptr) != nullptr; }
	at::Allocator *getPinnedMemoryAllocator() const override { return host_allocator(); }
	bool hasPrimaryContext(c10::DeviceIndex) const override { return connected(); }
	c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
	void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
	c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
	c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override
	{
		const int old = current_device();
		if (d >= 0)
			set_current_device(d);
		return old;
	}
	c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
	void resizePrivateUse1Bytes(const c10::Storage &storage, size_t newsize) const override
	{
		c10::StorageImpl *impl = storage.unsafeGetStorageImpl();
		const size_t old = impl->nbytes();
		c10::DataPtr fresh = device_allocator()->allocate(newsize);
		const size_t keep = std::min(old, newsize);
		if (keep)
			device_allocator()->copy_data(fresh.get(), impl->data(), keep);
		impl->set_data_ptr_noswap(std::move(fresh));
		impl->set_nbytes(newsize);
	}
};

struct Register {
	Register() { at::RegisterPrivateUse1HooksInterface(new Hooks); }
} g_register;

} // namespace

} // namespace torch_neuron
