// The kmd device backend: neurond's side of the neuron DRM accel driver
// (driver/, /dev/accel/accelN of driver "neuron"), through libdrm.
//
// What the daemon gets (see README.md for the mapping onto the emu backend):
//  - discover(): the /dev/accel nodes whose DRM driver is "neuron".
//  - KmdDevice: the controller file (privileged: SET_CORE_MASK) and device info.
//  - KmdContext: one open file per tenant. Its HBM allocations, host buffers,
//    DMA and compute jobs and syncobjs belong to that file, so the kernel keeps
//    tenants apart (per-file handles), accounts them (fdinfo) and bans them
//    (job timeouts) separately. The controller sets its core mask.
//  - KmdEngine: the compute engine. Attaches to the device, maps HBM, fetches
//    compute jobs (payload = an array of struct neuron_cmd), checks every
//    command (kernels::check_semantics + operand bounds against the job's BO
//    list), executes it with kernels::execute on views into the mapped HBM and
//    completes the job with 0 or -errno.
//
// Errors: every failing call throws kmd::Error, whose what() says what was
// being done and strerror(errno), and whose code() is the positive errno.
// Timeouts are absolute CLOCK_MONOTONIC nanoseconds (now_ns() + delta).
#pragma once

#include "syncobj_pool.h"

#include <chip/profile.h>
#include <neuron/cmd.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace neuron::kmd {

class Error : public std::runtime_error {
public:
	Error(int err, const std::string &what);
	int code() const { return err_; } // positive errno
private:
	int err_;
};

int64_t now_ns();                      // CLOCK_MONOTONIC
int64_t deadline_after_ms(int64_t ms); // now_ns() + ms

// --- discovery and device info ----------------------------------------------

struct Node {
	int minor;        // N of /dev/accel/accelN
	std::string path; // /dev/accel/accelN
};

// The accel nodes whose DRM driver (DRM_IOCTL_VERSION name) is "neuron", by
// minor. Nodes that cannot be opened (permissions) are skipped; *skipped (if
// given) gets one line per skipped node saying why.
std::vector<Node> discover(std::vector<std::string> *skipped = nullptr);

struct DeviceInfo {
	uint32_t api_major = 0, api_minor = 0;
	uint32_t platform = 0;      // enum drm_neuron_platform
	uint32_t profile = 0;       // enum drm_neuron_profile
	std::string platform_name;  // "simulated"
	std::string profile_name;   // "trn2"
	uint32_t num_cores = 0;
	uint32_t num_dma_queues = 0;
	uint64_t hbm_size = 0;
	uint64_t hbm_used = 0;
	uint64_t capabilities = 0;  // DRM_NEURON_CAP_*
	uint64_t core_mask = 0;     // of the file that asked
	uint64_t reset_count = 0;
	uint32_t job_timeout_ms = 0;
	bool engine_attached = false;
	uint64_t max_bo_size = 0;
	uint32_t max_cmd_size = 0;  // bytes of commands per compute job
	uint32_t max_cmds_per_job() const { return max_cmd_size / sizeof(neuron_cmd); }
};

// Reads DeviceInfo from an open neuron file (QUERY DEVICE_INFO + GET_PARAM).
DeviceInfo query_device_info(int fd);
uint64_t get_param(int fd, uint32_t param, uint32_t index = 0);

// --- per-tenant contexts ----------------------------------------------------

struct DeviceBuffer {
	uint32_t handle = 0;      // BO handle in the owning context's file
	uint64_t device_addr = 0; // HBM address (the kernel's; starts at 0)
	uint64_t size = 0;        // rounded up to the page size
};

// A host buffer: a host BO of a context, mapped in this process.
//  - Native: a shmem BO created here. export_fd() gives an mmap-able dma-buf
//    fd to hand to the tenant instead of a memfd: zero copy.
//  - Udmabuf: a tenant memfd turned into a dma-buf by /dev/udmabuf and
//    PRIME-imported: zero copy, the tenant keeps using its memfd.
//  - Staged: fallback for memfds udmabuf refuses (not sealable, size not
//    page-aligned, no /dev/udmabuf): a shmem BO of the same size plus the
//    memfd mapped here; stage_in()/stage_out() copy between them. The caller
//    calls stage_in before submitting a DMA that reads the buffer and
//    stage_out after waiting for a DMA that writes it (no-ops otherwise).
enum class HostKind { Native, Udmabuf, Staged };

struct HostBuffer {
	uint32_t handle = 0;
	uint64_t size = 0;
	HostKind kind = HostKind::Native;
	std::byte *bo_map = nullptr;   // the BO's bytes (Native, Staged), or null
	std::byte *user_map = nullptr; // the tenant's memfd bytes (Staged, Udmabuf), or null
	std::byte *data() const { return user_map ? user_map : bo_map; }
};

enum class ImportMode { Auto, UdmabufOnly, StagedOnly };

// A point on a queue's timeline syncobj: the job is done when the timeline
// reaches `point`.
struct Fence {
	uint32_t syncobj = 0;
	uint64_t point = 0;
	uint64_t job_seq = 0; // the kernel's sequence number of the job on its queue (EngineJobFault::job_seq)
	bool valid() const { return syncobj != 0; }
};

struct DmaCopy {
	uint32_t src = 0; // BO handles of the context (host or device)
	uint64_t src_offset = 0;
	uint32_t dst = 0;
	uint64_t dst_offset = 0;
	uint64_t size = 0;
};

// A BO a compute job names, with how the job uses it.
struct JobBo {
	uint32_t handle = 0;
	bool read = true;
	bool write = false;
};

class KmdDevice;

class KmdContext {
public:
	~KmdContext();
	KmdContext(const KmdContext &) = delete;
	KmdContext &operator=(const KmdContext &) = delete;

	int fd() const { return fd_; }
	const std::string &name() const { return name_; }
	uint64_t core_mask() const; // as the kernel sees it (GET_PARAM CORE_MASK)
	// The file's DRM client id (fdinfo drm-client-id; EngineJobFault::client_id).
	uint64_t client_id() const;

	// HBM (BO_CREATE with DRM_NEURON_BO_DEVICE). ENOSPC when HBM is full.
	DeviceBuffer alloc_device(uint64_t size);
	// A device BO of this file by handle (BO_INFO): after adopt_context, the
	// allocations an earlier neurond made, at the addresses it gave them, their
	// bytes as they are. ENOENT if the file has no such handle, EINVAL for a
	// host BO.
	DeviceBuffer find_device(uint32_t handle);
	// Host BO (shmem), mapped here.
	HostBuffer create_host(uint64_t size);
	// A dma-buf fd (O_CLOEXEC|O_RDWR) of a Native host buffer, mmap-able.
	int export_fd(const HostBuffer &hb);
	// A dma-buf fd (O_CLOEXEC|O_RDWR) of device BO `handle`: the driver lets only
	// files of the same device import it (collective groups share members' HBM
	// into neurond's own file this way).
	int export_device(uint32_t handle);
	// The BO behind a dma-buf of this device (export_device of another file): the
	// same memory under a handle of this file (the same handle again if this file
	// imported it before). The caller keeps the fd.
	uint32_t import_buffer(int dmabuf);
	// A tenant's memfd as a host buffer (see HostKind). The memfd is not
	// consumed (dup'ed / mapped as needed); size must not exceed its length.
	HostBuffer import_memfd(int memfd, uint64_t size, ImportMode mode = ImportMode::Auto);
	void stage_in(const HostBuffer &hb, uint64_t offset, uint64_t size);
	void stage_out(const HostBuffer &hb, uint64_t offset, uint64_t size);
	// GEM_CLOSE (and unmap). The memory is freed when no job uses it any more.
	void free(const DeviceBuffer &b);
	void free(HostBuffer &hb);
	// GEM_CLOSE of a handle this process never mapped (restart survival: an
	// earlier neurond's import in an adopted file).
	void close_handle(uint32_t handle);
	// Restart survival: closes every BO of this file whose handle is not in
	// `claimed` (what the journal named and was adopted) and returns them: BOs an
	// earlier neurond made and died before it recorded. Handles are found by
	// probing (BO_INFO); see the definition for why the probe finds them all.
	struct ClosedBo {
		uint32_t handle = 0;
		uint64_t size = 0;
		bool device = false; // HBM, else a host BO
	};
	std::vector<ClosedBo> close_unclaimed(const std::set<uint32_t> &claimed);

	// Queues a DMA job (copies run in order, in the kernel) on DMA queue q,
	// after `waits`. Returns the job's point on that queue's timeline.
	Fence dma(uint32_t q, std::span<const DmaCopy> copies, std::span<const Fence> waits = {});
	// Queues a compute job on `core`: `cmds` (<= max_cmds_per_job) run by the
	// attached engine; `bos` are the BOs the commands may touch. EACCES outside
	// the core mask.
	Fence compute(uint32_t core, std::span<const neuron_cmd> cmds, std::span<const JobBo> bos,
		      std::span<const Fence> waits = {});
	// The same with a payload of neurond's tile-job format (tile_job.h).
	Fence compute(uint32_t core, std::span<const std::byte> payload, std::span<const JobBo> bos,
		      std::span<const Fence> waits = {});

	// Waits until the job behind `f` finished. Returns 0 if it succeeded,
	// -ETIME when the deadline passed first, or the job's -errno (ENODEV no
	// engine, ETIMEDOUT overran, ECANCELED banned, or what the engine said).
	int wait(const Fence &f, int64_t deadline_ns);
	// Non-blocking: 1 done ok, 0 pending, -errno failed.
	int poll(const Fence &f);
	// The highest point the queue timeline `syncobj` (a Fence's syncobj) has
	// reached: every job up to it is done (the emu queue's `completed`
	// counter). Reaps their statuses; call it (or wait/poll) regularly, each
	// unreaped job holds a small status syncobj in the kernel.
	uint64_t completed(uint32_t syncobj);
	// BO_WAIT: all jobs using the BO finished (false on timeout).
	bool wait_bo(uint32_t handle, int64_t deadline_ns);
	// GET_RESET_STATUS.
	bool banned();

private:
	friend class KmdDevice;
	KmdContext(KmdDevice &dev, int fd, std::string name);
	Fence submit(uint32_t type, uint32_t index, std::span<const std::byte> payload,
		     std::span<const DmaCopy> copies, std::span<const JobBo> bos, std::span<const Fence> waits);
	int reap(uint32_t syncobj, uint64_t point);

	struct Timeline {
		uint32_t syncobj = 0;
		uint64_t last = 0;
		std::map<uint64_t, uint32_t> pending; // point -> binary syncobj carrying the job's status
		std::map<uint64_t, int> status;       // reaped points that failed (bounded)
	};
	int reap_locked(Timeline &tl, uint64_t point);
	// Every timeline's finished jobs, before the syncobj pool grows (so it
	// grows only with the jobs really in flight at once).
	void reap_finished_locked();

	KmdDevice &dev_;
	int fd_;
	std::string name_;
	std::mutex mutex_; // guards timelines_, syncobj_key_ and syncobjs_
	std::map<uint64_t, Timeline> timelines_; // (type << 32 | index)
	std::map<uint32_t, uint64_t> syncobj_key_;
	SyncobjPool syncobjs_; // the file's timelines and status syncobjs
};

// --- the device (controller) ------------------------------------------------

class KmdDevice {
public:
	// Opens /dev/accel/accel<minor> (or a path) as the controller file.
	explicit KmdDevice(int minor);
	explicit KmdDevice(const std::string &path);
	~KmdDevice();
	KmdDevice(const KmdDevice &) = delete;
	KmdDevice &operator=(const KmdDevice &) = delete;

	const std::string &path() const { return path_; }
	int controller_fd() const { return fd_; }
	const DeviceInfo &info() const { return info_; } // at open
	DeviceInfo refresh_info();                        // current (hbm_used, resets, ...)
	uint64_t hbm_used() const;

	// A tenant context: a new open file of the device, granted core_mask and
	// every DMA queue (SET_CORE_MASK from the controller file; CAP_SYS_ADMIN:
	// a new file of the driver has no core and no DMA queue).
	// core_mask 0 = every core.
	std::unique_ptr<KmdContext> create_context(const std::string &name, uint64_t core_mask);
	// Restart survival: a context whose file outlived the neurond that made it
	// (kept open by the supervisor): `fd` is owned from here on. Its BOs,
	// core and DMA masks, tenant and ban are the file's and stay as they were;
	// jobs the earlier neurond had queued on it ended with that neurond's engine
	// (ENODEV, the driver's engine eras) and are not tracked here. EINVAL (fd
	// closed) if fd is not a file of this device.
	std::unique_ptr<KmdContext> adopt_context(int fd, const std::string &name);
	// The cores of a context (its DMA queues are left as they are).
	void set_core_mask(const KmdContext &ctx, uint64_t core_mask);
	// The cores and the DMA queues of a context.
	void set_masks(const KmdContext &ctx, uint64_t core_mask, uint64_t dma_mask);

private:
	friend class KmdContext;
	void open_path(const std::string &path);
	std::string path_;
	int fd_ = -1;
	DeviceInfo info_;
};

// --- the compute engine -----------------------------------------------------

// Fault code (enum neuron_fault_code) <-> the errno an engine completes with.
int fault_to_errno(uint32_t code);
uint32_t errno_to_fault(int err); // positive or negative errno

struct EngineJobFault {
	uint64_t client_id; // DRM client id of the submitting file (fdinfo drm-client-id)
	uint32_t core;
	uint64_t job_seq;   // the job's sequence number on its core
	uint32_t cmd_index; // which command of the job
	uint64_t user_tag;
	uint32_t code;      // enum neuron_fault_code
	std::string reason;
};

// A BO of a fetched job, as the kernel describes it (struct drm_neuron_engine_bo).
struct EngineBo {
	uint64_t device_addr = 0; // HBM address (device BOs), else 0
	uint64_t size = 0;
	uint32_t access = 0;      // DRM_NEURON_BO_ACCESS_* (1 read, 2 write)
	uint32_t bo_flags = 0;    // DRM_NEURON_BO_* (1 device)
};

struct KmdEngineOptions {
	int workers = 0;          // fetching threads; 0 = min(cores, 4). Worker w serves cores c with c % workers == w
	int threads_per_job = 1;  // host threads one command may use (kernels::execute)
	uint64_t core_mask = 0;   // cores to serve; 0 = all
	int64_t fetch_timeout_ms = 200; // each FETCH waits at most this long (then checks stop)
	// Tenant-visible device addresses = kernel device_addr + address_base
	// (the emu backend's addresses start at 1 << 44). Subtracted from every
	// operand address before the checks.
	uint64_t address_base = 0;
	// Called on a worker thread for every failed job (the daemon logs it and
	// puts the tenant's queue into its sticky fault state).
	std::function<void(const EngineJobFault &)> on_fault;
	// Asked before a job runs: true completes it with -ECANCELED unrun (the
	// daemon says so for the files of tenants that are gone, whose queued jobs
	// the kernel still hands over; skipping them returns their memory sooner).
	std::function<bool(uint64_t client_id)> cancelled;
	// The device's on-chip memories, which tile kernels (TILE_KERNEL entries) are
	// validated for; none: they are refused.
	std::optional<chip::OnChip> onchip;
};

struct EngineStats {
	uint64_t jobs = 0, commands = 0, failed = 0, late = 0; // late: completed after the kernel timed it out
};

class TileProgramCache; // kernel_job.h

class KmdEngine {
public:
	// Attaches (ENGINE_ATTACH on its own file; CAP_SYS_ADMIN, EBUSY if another
	// engine is attached), maps HBM and starts the workers.
	KmdEngine(const std::string &path, KmdEngineOptions options = {});
	~KmdEngine(); // stop()
	KmdEngine(const KmdEngine &) = delete;
	KmdEngine &operator=(const KmdEngine &) = delete;

	void stop(); // joins the workers, detaches, unmaps
	// Restricts each worker to the CPUs of the cores it serves (core_cpus[c] for
	// core c; sched/cpu_placement.h). False with errno if the kernel refused one.
	bool pin_workers(const std::vector<std::vector<int>> &core_cpus);
	EngineStats stats() const;
	uint64_t hbm_size() const { return hbm_size_; }
	// Last worker error (a FETCH/COMPLETE ioctl failing for a reason other
	// than a timeout); empty if none. Workers keep going after one.
	std::string last_error() const;

	// One job's checks and execution, without the kernel: returns 0 or -errno
	// and fills *fault. Public for tests; the workers call it.
	int run_job(std::span<const std::byte> payload, std::span<const EngineBo> bos,
		    EngineJobFault *fault);

private:
	void worker(int index, uint64_t mask);
	std::string path_;
	KmdEngineOptions opt_;
	int fd_ = -1;
	std::byte *hbm_ = nullptr;
	uint64_t hbm_size_ = 0;
	std::atomic<bool> stop_{false};
	std::vector<std::thread> workers_;
	std::vector<uint64_t> worker_masks_; // the cores each worker serves
	mutable std::mutex mutex_;
	EngineStats stats_;
	std::string last_error_;
	std::unique_ptr<TileProgramCache> programs_; // tile kernels' programs, validated
};

} // namespace neuron::kmd
