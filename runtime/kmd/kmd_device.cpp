// Discovery, device info, the controller file and per-tenant contexts: BOs,
// host buffers, DMA and compute submission, timeline syncobjs.
#include "kmd.h"

#include <xf86drm.h>
#include <drm/neuron_accel.h>

#include <algorithm>
#include <fstream>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <linux/sync_file.h>
#include <linux/udmabuf.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace neuron::kmd {

namespace {

std::string describe(int err, const std::string &what)
{
	return what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")";
}

[[noreturn]] void fail(int err, const std::string &what) { throw Error(err, what); }

// drmIoctl (restarts on EINTR/EAGAIN); throws with `what` on failure.
void xioctl(int fd, unsigned long req, void *arg, const std::string &what)
{
	if (drmIoctl(fd, req, arg))
		fail(errno, what);
}

int open_node(const std::string &path)
{
	int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fail(errno, "opening " + path);
	return fd;
}

bool is_neuron(int fd)
{
	drmVersionPtr v = drmGetVersion(fd);
	if (!v)
		return false;
	bool ok = v->name && std::strcmp(v->name, "neuron") == 0;
	drmFreeVersion(v);
	return ok;
}

constexpr size_t kMaxReaped = 4096; // failed statuses remembered per timeline

} // namespace

Error::Error(int err, const std::string &what) : std::runtime_error(describe(err, what)), err_(err) {}

int64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t deadline_after_ms(int64_t ms) { return now_ns() + ms * 1000000; }

// --- discovery ----------------------------------------------------------------

std::vector<Node> discover(std::vector<std::string> *skipped)
{
	std::vector<Node> nodes;
	DIR *d = opendir("/dev/accel");
	if (!d) {
		if (skipped)
			skipped->push_back(describe(errno, "opening /dev/accel"));
		return nodes;
	}
	while (dirent *e = readdir(d)) {
		int minor;
		char tail;
		if (std::sscanf(e->d_name, "accel%d%c", &minor, &tail) != 1)
			continue;
		std::string path = std::string("/dev/accel/") + e->d_name;
		int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			if (skipped)
				skipped->push_back(describe(errno, "opening " + path));
			continue;
		}
		if (is_neuron(fd))
			nodes.push_back({minor, path});
		else if (skipped)
			skipped->push_back(path + ": DRM driver is not \"neuron\"");
		::close(fd);
	}
	closedir(d);
	std::sort(nodes.begin(), nodes.end(), [](const Node &a, const Node &b) { return a.minor < b.minor; });
	return nodes;
}

uint64_t get_param(int fd, uint32_t param, uint32_t index)
{
	drm_neuron_get_param p{};
	p.param = param;
	p.index = index;
	xioctl(fd, DRM_IOCTL_NEURON_GET_PARAM, &p, "GET_PARAM " + std::to_string(param));
	return p.value;
}

DeviceInfo query_device_info(int fd)
{
	drm_neuron_device_info di{};
	drm_neuron_query q{};
	q.type = DRM_NEURON_QUERY_DEVICE_INFO;
	q.size = sizeof(di);
	q.data = reinterpret_cast<uintptr_t>(&di);
	xioctl(fd, DRM_IOCTL_NEURON_QUERY, &q, "QUERY DEVICE_INFO");
	DeviceInfo info;
	info.api_major = di.api_major;
	info.api_minor = di.api_minor;
	info.platform = di.platform;
	info.profile = di.profile;
	info.platform_name.assign(di.platform_name, strnlen(di.platform_name, sizeof(di.platform_name)));
	info.profile_name.assign(di.profile_name, strnlen(di.profile_name, sizeof(di.profile_name)));
	info.num_cores = di.num_cores;
	info.num_dma_queues = di.num_dma_queues;
	info.hbm_size = di.hbm_size;
	info.hbm_used = di.hbm_used;
	info.capabilities = di.capabilities;
	info.core_mask = di.core_mask;
	info.reset_count = di.reset_count;
	info.job_timeout_ms = di.job_timeout_ms;
	info.engine_attached = di.engine_attached != 0;
	info.max_bo_size = get_param(fd, DRM_NEURON_PARAM_MAX_BO_SIZE);
	info.max_cmd_size = static_cast<uint32_t>(get_param(fd, DRM_NEURON_PARAM_MAX_CMD_SIZE));
	return info;
}

// --- KmdDevice ------------------------------------------------------------------

KmdDevice::KmdDevice(int minor) { open_path("/dev/accel/accel" + std::to_string(minor)); }
KmdDevice::KmdDevice(const std::string &path) { open_path(path); }

void KmdDevice::open_path(const std::string &path)
{
	path_ = path;
	fd_ = open_node(path);
	if (!is_neuron(fd_)) {
		::close(fd_);
		fail(ENODEV, path + " is not a device of the \"neuron\" DRM driver");
	}
	try {
		info_ = query_device_info(fd_);
	} catch (...) {
		::close(fd_);
		throw;
	}
	if (info_.api_major != DRM_NEURON_API_MAJOR) {
		::close(fd_);
		fail(EPROTO, path + ": driver uAPI major " + std::to_string(info_.api_major) + ", this build knows " +
				     std::to_string(DRM_NEURON_API_MAJOR));
	}
}

KmdDevice::~KmdDevice()
{
	if (fd_ >= 0)
		::close(fd_);
}

DeviceInfo KmdDevice::refresh_info() { return query_device_info(fd_); }
uint64_t KmdDevice::hbm_used() const { return get_param(fd_, DRM_NEURON_PARAM_HBM_USED); }

namespace {

uint64_t all_of(uint32_t n) { return n >= 64 ? ~0ull : (1ull << n) - 1; }

// SET_CORE_MASK on the controller file (DRM_ROOT_ONLY: CAP_SYS_ADMIN).
void set_access(int controller, const std::string &path, const KmdContext &ctx, uint32_t flags, uint64_t core_mask,
		uint64_t dma_mask)
{
	drm_neuron_set_core_mask m{};
	m.fd = ctx.fd();
	m.flags = flags;
	m.core_mask = core_mask;
	m.dma_mask = dma_mask;
	char buf[64];
	std::snprintf(buf, sizeof(buf), "cores 0x%llx", static_cast<unsigned long long>(core_mask));
	std::string what = std::string("SET_CORE_MASK ") + buf;
	if (flags & DRM_NEURON_MASK_DMA) {
		std::snprintf(buf, sizeof(buf), ", DMA queues 0x%llx", static_cast<unsigned long long>(dma_mask));
		what += buf;
	}
	xioctl(controller, DRM_IOCTL_NEURON_SET_CORE_MASK, &m,
	       what + " for context '" + ctx.name() + "' on " + path + " (needs CAP_SYS_ADMIN)");
}

} // namespace

std::unique_ptr<KmdContext> KmdDevice::create_context(const std::string &name, uint64_t core_mask)
{
	int fd = open_node(path_);
	std::unique_ptr<KmdContext> ctx(new KmdContext(*this, fd, name));
	set_masks(*ctx, core_mask ? core_mask : all_of(info_.num_cores), all_of(info_.num_dma_queues));
	return ctx;
}

std::unique_ptr<KmdContext> KmdDevice::adopt_context(int fd, const std::string &name)
{
	// The same device node as the controller's: a file of another device (or of
	// anything else) would give handles that name other memory.
	struct stat mine{}, theirs{};
	if (::fstat(fd_, &mine) != 0)
		fail(errno, "fstat of " + path_);
	if (::fstat(fd, &theirs) != 0) {
		const int err = errno;
		::close(fd);
		fail(err, "adopting context '" + name + "': fstat");
	}
	if (!S_ISCHR(theirs.st_mode) || theirs.st_rdev != mine.st_rdev) {
		::close(fd);
		fail(EINVAL, "adopting context '" + name + "': the descriptor is not a file of " + path_);
	}
	std::unique_ptr<KmdContext> ctx(new KmdContext(*this, fd, name));
	// The earlier neurond's timelines and job statuses, free for this one's
	// jobs (its jobs ended with its engine; a DMA job still running signals its
	// own fence, not the syncobj).
	{
		std::lock_guard lock(ctx->mutex_);
		ctx->syncobjs_.reclaim_kept();
	}
	return ctx;
}

void KmdDevice::set_core_mask(const KmdContext &ctx, uint64_t core_mask)
{
	set_access(fd_, path_, ctx, 0, core_mask, 0);
}

void KmdDevice::set_masks(const KmdContext &ctx, uint64_t core_mask, uint64_t dma_mask)
{
	// Drivers before uAPI 1.1 have no DMA queue masks (every file may use
	// every DMA queue) and refuse the flag.
	const bool dma = info_.capabilities & DRM_NEURON_CAP_ACCESS_CONTROL;
	set_access(fd_, path_, ctx, dma ? DRM_NEURON_MASK_DMA : 0, core_mask, dma ? dma_mask : 0);
}

// --- KmdContext -------------------------------------------------------------------

KmdContext::KmdContext(KmdDevice &dev, int fd, std::string name)
	: dev_(dev), fd_(fd), name_(std::move(name)), syncobjs_(fd)
{
}

KmdContext::~KmdContext()
{
	// Closing the file frees its BOs and syncobjs; queued jobs still finish.
	::close(fd_);
}

uint64_t KmdContext::core_mask() const { return get_param(fd_, DRM_NEURON_PARAM_CORE_MASK); }

uint64_t KmdContext::client_id() const
{
	// DRM prints it in the file's fdinfo; there is no ioctl for it.
	std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd_));
	std::string line;
	while (std::getline(in, line))
		if (line.rfind("drm-client-id:", 0) == 0)
			return std::stoull(line.substr(14));
	throw Error(ENOENT, "no drm-client-id in /proc/self/fdinfo/" + std::to_string(fd_) + " of context '" +
				    name_ + "'");
}

DeviceBuffer KmdContext::find_device(uint32_t handle)
{
	drm_neuron_bo_info i{};
	i.handle = handle;
	xioctl(fd_, DRM_IOCTL_NEURON_BO_INFO, &i,
	       "BO_INFO of handle " + std::to_string(handle) + " in context '" + name_ + "'");
	if (!(i.bo_flags & DRM_NEURON_BO_DEVICE))
		fail(EINVAL, "handle " + std::to_string(handle) + " in context '" + name_ + "' is a host BO, not device memory");
	return DeviceBuffer{handle, i.device_addr, i.size};
}

DeviceBuffer KmdContext::alloc_device(uint64_t size)
{
	drm_neuron_bo_create c{};
	c.size = size;
	c.flags = DRM_NEURON_BO_DEVICE;
	xioctl(fd_, DRM_IOCTL_NEURON_BO_CREATE, &c,
	       "allocating " + std::to_string(size) + " bytes of HBM for context '" + name_ + "'");
	return DeviceBuffer{c.handle, c.device_addr, c.size};
}

HostBuffer KmdContext::create_host(uint64_t size)
{
	drm_neuron_bo_create c{};
	c.size = size;
	xioctl(fd_, DRM_IOCTL_NEURON_BO_CREATE, &c,
	       "creating a " + std::to_string(size) + "-byte host BO for context '" + name_ + "'");
	drm_neuron_bo_mmap_offset m{};
	m.handle = c.handle;
	void *p = MAP_FAILED;
	int err = 0;
	if (drmIoctl(fd_, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m) == 0) {
		p = mmap(nullptr, c.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(m.offset));
		if (p == MAP_FAILED)
			err = errno;
	} else {
		err = errno;
	}
	if (p == MAP_FAILED) {
		drmCloseBufferHandle(fd_, c.handle);
		fail(err, "mapping host BO " + std::to_string(c.handle) + " of context '" + name_ + "'");
	}
	HostBuffer hb;
	hb.handle = c.handle;
	hb.size = c.size;
	hb.kind = HostKind::Native;
	hb.bo_map = static_cast<std::byte *>(p);
	return hb;
}

int KmdContext::export_fd(const HostBuffer &hb)
{
	int out = -1;
	if (drmPrimeHandleToFD(fd_, hb.handle, DRM_CLOEXEC | DRM_RDWR, &out))
		fail(errno, "exporting host BO " + std::to_string(hb.handle) + " of context '" + name_ +
				    "' as a dma-buf");
	return out;
}

int KmdContext::export_device(uint32_t handle)
{
	int out = -1;
	if (drmPrimeHandleToFD(fd_, handle, DRM_CLOEXEC | DRM_RDWR, &out))
		fail(errno, "exporting device BO " + std::to_string(handle) + " of context '" + name_ + "' as a dma-buf");
	return out;
}

uint32_t KmdContext::import_buffer(int dmabuf)
{
	uint32_t handle = 0;
	if (drmPrimeFDToHandle(fd_, dmabuf, &handle))
		fail(errno, "importing a dma-buf into context '" + name_ + "'");
	return handle;
}

HostBuffer KmdContext::import_memfd(int memfd, uint64_t size, ImportMode mode)
{
	struct stat st;
	if (fstat(memfd, &st))
		fail(errno, "fstat of the memfd to import");
	if (size == 0 || size > static_cast<uint64_t>(st.st_size))
		fail(EINVAL, "importing a memfd: " + std::to_string(size) + " bytes requested, the memfd has " +
				     std::to_string(st.st_size));
	void *um = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (um == MAP_FAILED)
		fail(errno, "mapping the memfd to import (" + std::to_string(size) + " bytes)");
	auto *user = static_cast<std::byte *>(um);

	std::string why_not_udmabuf;
	if (mode != ImportMode::StagedOnly) {
		const long page = sysconf(_SC_PAGESIZE);
		int ufd = -1, dmabuf = -1;
		uint32_t handle = 0;
		if (size % static_cast<uint64_t>(page)) {
			why_not_udmabuf = "size is not a multiple of the page size";
		} else if ((ufd = ::open("/dev/udmabuf", O_RDWR | O_CLOEXEC)) < 0) {
			why_not_udmabuf = describe(errno, "opening /dev/udmabuf");
		} else if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) && !(fcntl(memfd, F_GET_SEALS) & F_SEAL_SHRINK)) {
			why_not_udmabuf = describe(errno, "sealing the memfd against shrinking (created without "
							  "MFD_ALLOW_SEALING?)");
		} else {
			udmabuf_create uc{};
			uc.memfd = static_cast<uint32_t>(memfd);
			uc.flags = UDMABUF_FLAGS_CLOEXEC;
			uc.offset = 0;
			uc.size = size;
			dmabuf = ioctl(ufd, UDMABUF_CREATE, &uc);
			if (dmabuf < 0)
				why_not_udmabuf = describe(errno, "UDMABUF_CREATE");
			else if (drmPrimeFDToHandle(fd_, dmabuf, &handle))
				why_not_udmabuf = describe(errno, "importing the udmabuf into the device (PRIME)");
		}
		if (ufd >= 0)
			::close(ufd);
		if (dmabuf >= 0)
			::close(dmabuf); // the imported BO holds the dma-buf
		if (handle) {
			// Probe that DMA can map it: one byte into a scratch BO.
			HostBuffer hb;
			hb.handle = handle;
			hb.size = size;
			hb.kind = HostKind::Udmabuf;
			hb.user_map = user;
			int probe = 0;
			try {
				HostBuffer scratch = create_host(1);
				DmaCopy c{handle, 0, scratch.handle, 0, 1};
				probe = wait(dma(0, std::span(&c, 1)), deadline_after_ms(10000));
				free(scratch);
			} catch (const Error &e) {
				probe = -e.code();
				why_not_udmabuf = e.what();
			}
			if (probe == 0)
				return hb;
			if (why_not_udmabuf.empty())
				why_not_udmabuf = describe(-probe, "probe DMA from the imported udmabuf");
			drmCloseBufferHandle(fd_, handle);
		}
		if (mode == ImportMode::UdmabufOnly) {
			munmap(user, size);
			fail(EOPNOTSUPP, "importing a memfd through udmabuf for context '" + name_ + "': " + why_not_udmabuf);
		}
	}
	HostBuffer hb;
	try {
		hb = create_host(size);
	} catch (...) {
		munmap(user, size);
		throw;
	}
	hb.kind = HostKind::Staged;
	hb.user_map = user;
	return hb;
}

void KmdContext::stage_in(const HostBuffer &hb, uint64_t offset, uint64_t size)
{
	if (hb.kind != HostKind::Staged)
		return;
	if (offset > hb.size || size > hb.size - offset)
		fail(EINVAL, "stage_in outside host buffer " + std::to_string(hb.handle));
	std::memcpy(hb.bo_map + offset, hb.user_map + offset, size);
}

void KmdContext::stage_out(const HostBuffer &hb, uint64_t offset, uint64_t size)
{
	if (hb.kind != HostKind::Staged)
		return;
	if (offset > hb.size || size > hb.size - offset)
		fail(EINVAL, "stage_out outside host buffer " + std::to_string(hb.handle));
	std::memcpy(hb.user_map + offset, hb.bo_map + offset, size);
}

void KmdContext::free(const DeviceBuffer &b)
{
	if (drmCloseBufferHandle(fd_, b.handle))
		fail(errno, "freeing device BO " + std::to_string(b.handle) + " of context '" + name_ + "'");
}

void KmdContext::close_handle(uint32_t handle)
{
	if (drmCloseBufferHandle(fd_, handle))
		fail(errno, "closing handle " + std::to_string(handle) + " of context '" + name_ + "'");
}

std::vector<KmdContext::ClosedBo> KmdContext::close_unclaimed(const std::set<uint32_t> &claimed)
{
	// DRM gives a new BO the lowest free handle (drm_gem_handle_create_tail:
	// idr_alloc(..., 1, 0)), so an unrecorded BO, made an instant before the kill,
	// took a handle at most one above the highest live then; the claimed ones and
	// the few made unrecorded are all the live ones. So a scan that goes on
	// until kMisses handles in a row past the highest claimed one are free finds
	// every BO of the file. The file is not in use meanwhile (adoption runs before
	// its queues are attached), so no BO appears or goes during the scan.
	constexpr uint32_t kMisses = 1024;
	const uint32_t highest = claimed.empty() ? 0 : *claimed.rbegin();
	std::vector<ClosedBo> closed;
	for (uint32_t h = 1, misses = 0; h <= highest || misses < kMisses; ++h) {
		drm_neuron_bo_info i{};
		i.handle = h;
		if (drmIoctl(fd_, DRM_IOCTL_NEURON_BO_INFO, &i)) {
			if (errno != ENOENT)
				fail(errno, "BO_INFO of handle " + std::to_string(h) + " in context '" + name_ + "'");
			if (h > highest)
				++misses;
			continue;
		}
		misses = 0;
		if (claimed.count(h))
			continue;
		close_handle(h);
		closed.push_back({h, i.size, (i.bo_flags & DRM_NEURON_BO_DEVICE) != 0});
	}
	return closed;
}

void KmdContext::free(HostBuffer &hb)
{
	const size_t len = hb.size;
	if (hb.bo_map)
		munmap(hb.bo_map, len);
	if (hb.user_map)
		munmap(hb.user_map, len);
	hb.bo_map = hb.user_map = nullptr;
	if (drmCloseBufferHandle(fd_, hb.handle))
		fail(errno, "freeing host BO " + std::to_string(hb.handle) + " of context '" + name_ + "'");
}

Fence KmdContext::dma(uint32_t q, std::span<const DmaCopy> copies, std::span<const Fence> waits)
{
	return submit(DRM_NEURON_QUEUE_DMA, q, {}, copies, {}, waits);
}

Fence KmdContext::compute(uint32_t core, std::span<const neuron_cmd> cmds, std::span<const JobBo> bos,
			  std::span<const Fence> waits)
{
	return submit(DRM_NEURON_QUEUE_CORE, core, std::as_bytes(cmds), {}, bos, waits);
}

Fence KmdContext::compute(uint32_t core, std::span<const std::byte> payload, std::span<const JobBo> bos,
			  std::span<const Fence> waits)
{
	return submit(DRM_NEURON_QUEUE_CORE, core, payload, {}, bos, waits);
}

Fence KmdContext::submit(uint32_t type, uint32_t index, std::span<const std::byte> payload,
			 std::span<const DmaCopy> copies, std::span<const JobBo> jbos, std::span<const Fence> waits)
{
	const bool is_dma = type == DRM_NEURON_QUEUE_DMA;
	const std::string what = std::string(is_dma ? "DMA job on queue " : "compute job on core ") +
				 std::to_string(index) + " for context '" + name_ + "'";

	// BO list: each handle once, access flags merged.
	std::vector<drm_neuron_submit_bo> bos;
	auto slot = [&](uint32_t h, uint32_t access) -> uint32_t {
		for (size_t i = 0; i < bos.size(); ++i)
			if (bos[i].handle == h) {
				bos[i].flags |= access;
				return static_cast<uint32_t>(i);
			}
		bos.push_back({h, access});
		return static_cast<uint32_t>(bos.size() - 1);
	};
	std::vector<drm_neuron_dma_copy> dc;
	for (const DmaCopy &c : copies) {
		drm_neuron_dma_copy d{};
		d.src_bo = slot(c.src, DRM_NEURON_BO_ACCESS_READ);
		d.dst_bo = slot(c.dst, DRM_NEURON_BO_ACCESS_WRITE);
		d.src_offset = c.src_offset;
		d.dst_offset = c.dst_offset;
		d.size = c.size;
		dc.push_back(d);
	}
	for (const JobBo &b : jbos)
		slot(b.handle, (b.read ? DRM_NEURON_BO_ACCESS_READ : 0) | (b.write ? DRM_NEURON_BO_ACCESS_WRITE : 0));

	std::vector<drm_neuron_sync> in;
	for (const Fence &f : waits)
		in.push_back({f.syncobj, 0, f.point});

	std::lock_guard lock(mutex_);
	const uint64_t key = (static_cast<uint64_t>(type) << 32) | index;
	Timeline &tl = timelines_[key];
	if (!tl.syncobj) {
		tl.syncobj = syncobjs_.take("the timeline of " + what);
		syncobj_key_[tl.syncobj] = key;
	}
	if (syncobjs_.empty())
		reap_finished_locked();
	const uint32_t status = syncobjs_.take("the status of " + what);
	drm_neuron_sync out[2] = {{tl.syncobj, 0, tl.last + 1}, {status, 0, 0}};

	drm_neuron_submit s{};
	s.queue_type = type;
	s.queue_index = index;
	s.bo_count = static_cast<uint32_t>(bos.size());
	s.bos = reinterpret_cast<uintptr_t>(bos.data());
	s.bo_stride = sizeof(drm_neuron_submit_bo);
	s.sync_stride = sizeof(drm_neuron_sync);
	s.in_syncs = reinterpret_cast<uintptr_t>(in.data());
	s.in_sync_count = static_cast<uint32_t>(in.size());
	s.out_syncs = reinterpret_cast<uintptr_t>(out);
	s.out_sync_count = 2;
	if (is_dma) {
		s.copies = reinterpret_cast<uintptr_t>(dc.data());
		s.copy_count = static_cast<uint32_t>(dc.size());
		s.copy_stride = sizeof(drm_neuron_dma_copy);
	} else {
		s.cmd = reinterpret_cast<uintptr_t>(payload.data());
		s.cmd_size = static_cast<uint32_t>(payload.size());
	}
	if (drmIoctl(fd_, DRM_IOCTL_NEURON_SUBMIT, &s)) {
		int err = errno;
		syncobjs_.give_back(status);
		fail(err, "submitting " + what);
	}
	tl.last += 1;
	tl.pending[tl.last] = status;
	return Fence{tl.syncobj, tl.last, s.job_seq};
}

// Called after the timeline reached `point`: reads and drops the status
// syncobjs of every job up to it. Returns the status of `point` (0 or -errno).
int KmdContext::reap(uint32_t syncobj, uint64_t point)
{
	std::lock_guard lock(mutex_);
	auto k = syncobj_key_.find(syncobj);
	if (k == syncobj_key_.end())
		fail(ENOENT, "waiting on syncobj " + std::to_string(syncobj) + ": not a queue timeline of context '" +
				     name_ + "'");
	return reap_locked(timelines_[k->second], point);
}

void KmdContext::reap_finished_locked()
{
	for (auto &[key, tl] : timelines_) {
		uint64_t point = 0;
		if (!tl.pending.empty() && drmSyncobjQuery(fd_, &tl.syncobj, &point, 1) == 0)
			reap_locked(tl, point);
	}
}

int KmdContext::reap_locked(Timeline &tl, uint64_t point)
{
	for (auto it = tl.pending.begin(); it != tl.pending.end() && it->first <= point;) {
		int sync_fd = -1;
		int st = 1;
		if (drmSyncobjExportSyncFile(fd_, it->second, &sync_fd) == 0) {
			sync_file_info info{};
			if (ioctl(sync_fd, SYNC_IOC_FILE_INFO, &info) == 0)
				st = info.status;
			else
				st = -errno;
			::close(sync_fd);
		} else {
			st = -errno;
		}
		if (st < 0) {
			tl.status[it->first] = st;
			if (tl.status.size() > kMaxReaped)
				tl.status.erase(tl.status.begin());
		}
		syncobjs_.give_back(it->second);
		it = tl.pending.erase(it);
	}
	auto s = tl.status.find(point);
	return s == tl.status.end() ? 0 : s->second;
}

int KmdContext::wait(const Fence &f, int64_t deadline_ns)
{
	uint32_t h = f.syncobj;
	uint64_t p = f.point;
	uint32_t first = 0;
	int r = drmSyncobjTimelineWait(fd_, &h, &p, 1, deadline_ns,
				       DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL | DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
				       &first);
	if (r) {
		// libdrm 2.4.114 returns -errno here (older versions +errno).
		int err = r < 0 ? -r : r;
		if (err == ETIME || err == ETIMEDOUT)
			return -ETIME;
		fail(err, "waiting for point " + std::to_string(p) + " of syncobj " + std::to_string(h) +
				  " in context '" + name_ + "'");
	}
	return reap(h, p);
}

int KmdContext::poll(const Fence &f)
{
	int r = wait(f, 0);
	if (r == -ETIME)
		return 0;
	return r == 0 ? 1 : r;
}

uint64_t KmdContext::completed(uint32_t syncobj)
{
	uint64_t point = 0;
	if (drmSyncobjQuery(fd_, &syncobj, &point, 1))
		fail(errno, "querying syncobj " + std::to_string(syncobj) + " of context '" + name_ + "'");
	reap(syncobj, point);
	return point;
}

bool KmdContext::wait_bo(uint32_t handle, int64_t deadline_ns)
{
	drm_neuron_bo_wait w{};
	w.handle = handle;
	w.timeout_ns = deadline_ns;
	if (drmIoctl(fd_, DRM_IOCTL_NEURON_BO_WAIT, &w)) {
		if (errno == ETIME)
			return false;
		fail(errno, "waiting for BO " + std::to_string(handle) + " of context '" + name_ + "'");
	}
	return true;
}

bool KmdContext::banned()
{
	drm_neuron_reset_status r{};
	xioctl(fd_, DRM_IOCTL_NEURON_GET_RESET_STATUS, &r, "GET_RESET_STATUS of context '" + name_ + "'");
	return r.status == DRM_NEURON_CONTEXT_BANNED;
}

} // namespace neuron::kmd
