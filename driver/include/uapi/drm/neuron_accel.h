/* SPDX-License-Identifier: GPL-2.0-only WITH Linux-syscall-note */
/*
 * neuron_accel.h - uAPI of the neuron DRM accel driver (/dev/accel/accelN).
 *
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Rules for every ioctl below:
 *
 * - Padding, reserved fields and flag bits that are not defined here must be
 *   zero, otherwise the ioctl fails with EINVAL.
 * - Handles (BOs, syncobjs) are private to the open file; a handle the file
 *   does not own fails with ENOENT.
 * - Timeouts are absolute CLOCK_MONOTONIC times in nanoseconds. An ioctl
 *   interrupted by a signal fails with EINTR (or is restarted transparently
 *   with SA_RESTART) and may be repeated with unchanged arguments.
 * - Arrays passed by pointer carry an element size (``*_stride``) so that
 *   elements can grow: the kernel reads min(stride, its size) bytes of each
 *   element, requires any bytes it does not know to be zero (EINVAL otherwise)
 *   and rejects strides smaller than the first version of the element
 *   (EINVAL).
 * - Everything here is detectable: %DRM_NEURON_PARAM_API_VERSION and
 *   %DRM_NEURON_PARAM_CAPABILITIES.
 */
#ifndef _UAPI_NEURON_ACCEL_H_
#define _UAPI_NEURON_ACCEL_H_

#include "drm.h"

#if defined(__cplusplus)
extern "C" {
#endif

/* DRM_NEURON_API_MAJOR: uAPI major version (incompatible changes). */
#define DRM_NEURON_API_MAJOR	1
/* DRM_NEURON_API_MINOR: uAPI minor version (additions). */
#define DRM_NEURON_API_MINOR	1

/*
 * Ioctl numbers, relative to DRM_COMMAND_BASE. Append only.
 */
#define DRM_NEURON_GET_PARAM		0x00
#define DRM_NEURON_QUERY		0x01
#define DRM_NEURON_BO_CREATE		0x02
#define DRM_NEURON_BO_INFO		0x03
#define DRM_NEURON_BO_MMAP_OFFSET	0x04
#define DRM_NEURON_BO_WAIT		0x05
#define DRM_NEURON_SUBMIT		0x06
#define DRM_NEURON_GET_RESET_STATUS	0x07
#define DRM_NEURON_SET_CORE_MASK	0x08
#define DRM_NEURON_ENGINE_ATTACH	0x09
#define DRM_NEURON_ENGINE_FETCH		0x0a
#define DRM_NEURON_ENGINE_COMPLETE	0x0b

/**
 * enum drm_neuron_param - parameters for &struct drm_neuron_get_param
 *
 * @DRM_NEURON_PARAM_API_VERSION: (major << 32) | minor of this uAPI.
 * @DRM_NEURON_PARAM_PLATFORM_TYPE: a &enum drm_neuron_platform.
 * @DRM_NEURON_PARAM_PROFILE: a &enum drm_neuron_profile.
 * @DRM_NEURON_PARAM_NUM_CORES: number of NeuronCores.
 * @DRM_NEURON_PARAM_NUM_DMA_QUEUES: number of DMA queues.
 * @DRM_NEURON_PARAM_HBM_SIZE: HBM size in bytes.
 * @DRM_NEURON_PARAM_HBM_USED: HBM bytes currently allocated to BOs.
 * @DRM_NEURON_PARAM_CORE_MASK: cores this file may submit to (bit n = core n).
 * @DRM_NEURON_PARAM_CAPABILITIES: bit mask of DRM_NEURON_CAP_*.
 * @DRM_NEURON_PARAM_RESET_COUNT: core resets on this device since load.
 * @DRM_NEURON_PARAM_MAX_BO_SIZE: largest host BO in bytes.
 * @DRM_NEURON_PARAM_MAX_CMD_SIZE: largest compute command stream in bytes.
 * @DRM_NEURON_PARAM_JOB_TIMEOUT_MS: job timeout in milliseconds.
 * @DRM_NEURON_PARAM_ENGINE_ATTACHED: 1 if a compute engine is attached.
 * @DRM_NEURON_PARAM_CORE_BUSY_NS: busy time of core @index in nanoseconds.
 * @DRM_NEURON_PARAM_DMA_MASK: DMA queues this file may submit to (bit n =
 *	queue n). Since API 1.1.
 * @DRM_NEURON_PARAM_MAX_DMA_BYTES: most bytes one DMA job may copy (the sum
 *	of its copies). Since API 1.1.
 * @DRM_NEURON_PARAM_MAX_JOBS: most jobs one file may have submitted and not
 *	yet finished. Since API 1.1.
 * @DRM_NEURON_PARAM_JOB_MAX_MS: longest time a compute job may run on the
 *	engine when the engine reports progress (%DRM_NEURON_ENGINE_PROGRESS),
 *	and longest time it waits for the engine to fetch it. Since API 1.1.
 * @DRM_NEURON_PARAM_TENANT_ID: tenant id the controller gave this file, or
 *	0. Since API 1.1.
 */
enum drm_neuron_param {
	DRM_NEURON_PARAM_API_VERSION = 0,
	DRM_NEURON_PARAM_PLATFORM_TYPE = 1,
	DRM_NEURON_PARAM_PROFILE = 2,
	DRM_NEURON_PARAM_NUM_CORES = 3,
	DRM_NEURON_PARAM_NUM_DMA_QUEUES = 4,
	DRM_NEURON_PARAM_HBM_SIZE = 5,
	DRM_NEURON_PARAM_HBM_USED = 6,
	DRM_NEURON_PARAM_CORE_MASK = 7,
	DRM_NEURON_PARAM_CAPABILITIES = 8,
	DRM_NEURON_PARAM_RESET_COUNT = 9,
	DRM_NEURON_PARAM_MAX_BO_SIZE = 10,
	DRM_NEURON_PARAM_MAX_CMD_SIZE = 11,
	DRM_NEURON_PARAM_JOB_TIMEOUT_MS = 12,
	DRM_NEURON_PARAM_ENGINE_ATTACHED = 13,
	DRM_NEURON_PARAM_CORE_BUSY_NS = 14,
	DRM_NEURON_PARAM_DMA_MASK = 15,
	DRM_NEURON_PARAM_MAX_DMA_BYTES = 16,
	DRM_NEURON_PARAM_MAX_JOBS = 17,
	DRM_NEURON_PARAM_JOB_MAX_MS = 18,
	DRM_NEURON_PARAM_TENANT_ID = 19,
};

/**
 * enum drm_neuron_platform - what is behind the device node
 *
 * @DRM_NEURON_PLATFORM_SILICON: real hardware.
 * @DRM_NEURON_PLATFORM_SIMULATED: a device simulated by the kernel module.
 */
enum drm_neuron_platform {
	DRM_NEURON_PLATFORM_SILICON = 0,
	DRM_NEURON_PLATFORM_SIMULATED = 1,
};

/**
 * enum drm_neuron_profile - chip generation being modelled
 *
 * @DRM_NEURON_PROFILE_TRN1: Trainium1-like (2 cores, 32 GiB by default).
 * @DRM_NEURON_PROFILE_TRN2: Trainium2-like (8 cores, 96 GiB by default).
 * @DRM_NEURON_PROFILE_TRN3: Trainium3-like (8 cores, 144 GiB by default).
 */
enum drm_neuron_profile {
	DRM_NEURON_PROFILE_TRN1 = 1,
	DRM_NEURON_PROFILE_TRN2 = 2,
	DRM_NEURON_PROFILE_TRN3 = 3,
};

/* Capability bits (DRM_NEURON_PARAM_CAPABILITIES). */
/* DRM_NEURON_CAP_DEVICE_BO: BOs in device HBM (DRM_NEURON_BO_DEVICE). */
#define DRM_NEURON_CAP_DEVICE_BO		(1ULL << 0)
/* DRM_NEURON_CAP_TIMELINE_SYNCOBJ: timeline points in SUBMIT syncs. */
#define DRM_NEURON_CAP_TIMELINE_SYNCOBJ		(1ULL << 1)
/* DRM_NEURON_CAP_DMA_QUEUES: DMA queues executing in the kernel. */
#define DRM_NEURON_CAP_DMA_QUEUES		(1ULL << 2)
/* DRM_NEURON_CAP_ENGINE: compute engine attach/fetch/complete ioctls. */
#define DRM_NEURON_CAP_ENGINE			(1ULL << 3)
/* DRM_NEURON_CAP_RESET_STATUS: DRM_IOCTL_NEURON_GET_RESET_STATUS. */
#define DRM_NEURON_CAP_RESET_STATUS		(1ULL << 4)
/*
 * DRM_NEURON_CAP_ACCESS_CONTROL: files start with no cores and no DMA
 * queues; &struct drm_neuron_set_core_mask grants DMA queues, names tenants
 * and lifts bans (API 1.1).
 */
#define DRM_NEURON_CAP_ACCESS_CONTROL		(1ULL << 5)
/*
 * DRM_NEURON_CAP_ENGINE_PROGRESS: a compute job's timeout starts when the
 * engine fetches it; %DRM_NEURON_ENGINE_PROGRESS restarts it (API 1.1).
 */
#define DRM_NEURON_CAP_ENGINE_PROGRESS		(1ULL << 6)
/*
 * DRM_NEURON_CAP_JOB_LIMITS: jobs per file are capped (EBUSY), DMA jobs have
 * a byte budget and the job timeout (API 1.1).
 */
#define DRM_NEURON_CAP_JOB_LIMITS		(1ULL << 7)

/**
 * struct drm_neuron_get_param - read one device or file parameter
 *
 * Errors: EINVAL for an unknown @param, or a nonzero @index on a parameter
 * that takes none, or an @index out of range.
 */
struct drm_neuron_get_param {
	/** @param: in, an &enum drm_neuron_param. */
	__u32 param;
	/** @index: in, core index for per-core parameters, else 0. */
	__u32 index;
	/** @value: out, the value. */
	__u64 value;
};

/**
 * enum drm_neuron_query_type - what DRM_IOCTL_NEURON_QUERY returns
 *
 * @DRM_NEURON_QUERY_DEVICE_INFO: &struct drm_neuron_device_info.
 * @DRM_NEURON_QUERY_CORE_INFO: &struct drm_neuron_core_info of core
 *	&drm_neuron_query.index.
 * @DRM_NEURON_QUERY_HBM_INFO: &struct drm_neuron_hbm_info.
 */
enum drm_neuron_query_type {
	DRM_NEURON_QUERY_DEVICE_INFO = 0,
	DRM_NEURON_QUERY_CORE_INFO = 1,
	DRM_NEURON_QUERY_HBM_INFO = 2,
};

/* DRM_NEURON_MAX_QUERY_SIZE: largest &drm_neuron_query.size accepted. */
#define DRM_NEURON_MAX_QUERY_SIZE	4096

/**
 * struct drm_neuron_query - size-negotiated read of a device structure
 *
 * With @data zero the kernel only stores the size of the structure in @size.
 * Otherwise it copies min(@size, its size) bytes to @data, zero-fills the rest
 * of the caller's @size bytes, and stores its own size in @size. Older callers
 * thus get a prefix, newer callers get zeros in fields the kernel lacks.
 *
 * Errors: EINVAL for an unknown @type, a nonzero @flags, an @index out of
 * range (or nonzero where unused), or a @size above
 * %DRM_NEURON_MAX_QUERY_SIZE (since API 1.1); EFAULT for a bad @data.
 */
struct drm_neuron_query {
	/** @type: in, an &enum drm_neuron_query_type. */
	__u32 type;
	/** @size: in, bytes at @data; out, size of the kernel's structure. */
	__u32 size;
	/** @data: in, user pointer to the output buffer, or 0. */
	__u64 data;
	/** @index: in, core index for %DRM_NEURON_QUERY_CORE_INFO, else 0. */
	__u32 index;
	/** @flags: in, must be zero. */
	__u32 flags;
};

/**
 * struct drm_neuron_device_info - answer to %DRM_NEURON_QUERY_DEVICE_INFO
 */
struct drm_neuron_device_info {
	/** @api_major: %DRM_NEURON_API_MAJOR of the running driver. */
	__u32 api_major;
	/** @api_minor: %DRM_NEURON_API_MINOR of the running driver. */
	__u32 api_minor;
	/** @platform: an &enum drm_neuron_platform. */
	__u32 platform;
	/** @profile: an &enum drm_neuron_profile. */
	__u32 profile;
	/** @num_cores: number of NeuronCores. */
	__u32 num_cores;
	/** @num_dma_queues: number of DMA queues. */
	__u32 num_dma_queues;
	/** @hbm_size: HBM size in bytes. */
	__u64 hbm_size;
	/** @hbm_used: HBM bytes allocated to BOs. */
	__u64 hbm_used;
	/** @capabilities: DRM_NEURON_CAP_* bits. */
	__u64 capabilities;
	/** @core_mask: cores the calling file may submit to. */
	__u64 core_mask;
	/** @reset_count: core resets since the device was created. */
	__u64 reset_count;
	/** @job_timeout_ms: job timeout in milliseconds. */
	__u32 job_timeout_ms;
	/** @engine_attached: 1 if a compute engine is attached, else 0. */
	__u32 engine_attached;
	/** @platform_name: NUL-terminated, e.g. "simulated". */
	char platform_name[16];
	/** @profile_name: NUL-terminated, e.g. "trn2". */
	char profile_name[16];
};

/* Flags of &struct drm_neuron_core_info. */
/* DRM_NEURON_CORE_IN_MASK: the calling file may submit to this core. */
#define DRM_NEURON_CORE_IN_MASK		(1U << 0)

/**
 * struct drm_neuron_core_info - answer to %DRM_NEURON_QUERY_CORE_INFO
 */
struct drm_neuron_core_info {
	/** @index: core index. */
	__u32 index;
	/** @flags: DRM_NEURON_CORE_* bits. */
	__u32 flags;
	/** @busy_ns: time the core spent running jobs, in nanoseconds. */
	__u64 busy_ns;
	/** @jobs_completed: jobs that finished without error. */
	__u64 jobs_completed;
	/** @jobs_failed: jobs that finished with an error. */
	__u64 jobs_failed;
	/** @resets: times this core was reset after a job timeout. */
	__u64 resets;
};

/**
 * struct drm_neuron_hbm_info - answer to %DRM_NEURON_QUERY_HBM_INFO
 */
struct drm_neuron_hbm_info {
	/** @size: HBM size in bytes. */
	__u64 size;
	/** @used: bytes allocated to BOs. */
	__u64 used;
	/** @resident: bytes backed by host memory (the rest reads as zero). */
	__u64 resident;
	/** @largest_free: largest free contiguous range in bytes. */
	__u64 largest_free;
	/** @bo_count: number of device BOs. */
	__u32 bo_count;
	/** @pad: zero. */
	__u32 pad;
};

/* BO flags (&drm_neuron_bo_create.flags). */
/*
 * DRM_NEURON_BO_DEVICE: place the BO in device HBM. Device BOs are never
 * mappable (mmap offset fails with EINVAL); they are read and written by DMA
 * jobs and by the compute engine. PRIME export gives a dma-buf that imports
 * only into files of the same device, as the same BO (same device address;
 * jobs of the importing file may name it); importing it into another device
 * fails with EOPNOTSUPP, mmap of the dma-buf with EINVAL, DMA_BUF_IOCTL_SYNC
 * with EOPNOTSUPP. HBM pages stay charged to the creating file's opener.
 */
#define DRM_NEURON_BO_DEVICE		(1U << 0)

/**
 * struct drm_neuron_bo_create - create a buffer object
 *
 * Without flags the BO is host memory (shmem): mmap-able through
 * DRM_IOCTL_NEURON_BO_MMAP_OFFSET and exportable with PRIME. With
 * %DRM_NEURON_BO_DEVICE it is a range of device HBM, zeroed.
 *
 * HBM is backed by host pages when a job first uses it, charged to the
 * memory cgroup of the process that opened the creating file (also when a
 * job of a file that imported the BO backs it).
 *
 * Errors: EINVAL for a zero @size, unknown @flags, a nonzero @handle or
 * @device_addr on input, or a host BO above %DRM_NEURON_PARAM_MAX_BO_SIZE;
 * ENOSPC when HBM has no free range of @size; ENOMEM when host memory is
 * exhausted.
 */
struct drm_neuron_bo_create {
	/** @size: in, bytes; out, rounded up to the page size. */
	__u64 size;
	/** @flags: in, DRM_NEURON_BO_* bits. */
	__u32 flags;
	/** @handle: out, the BO handle (in: must be zero). */
	__u32 handle;
	/** @device_addr: out, HBM address of a device BO, else 0. */
	__u64 device_addr;
};

/**
 * struct drm_neuron_bo_info - describe a BO
 *
 * Errors: ENOENT for a handle the file does not own; EINVAL for nonzero
 * @flags or @pad.
 */
struct drm_neuron_bo_info {
	/** @handle: in, BO handle. */
	__u32 handle;
	/** @flags: in, must be zero. */
	__u32 flags;
	/** @size: out, size in bytes. */
	__u64 size;
	/** @device_addr: out, HBM address of a device BO, else 0. */
	__u64 device_addr;
	/** @bo_flags: out, the DRM_NEURON_BO_* flags the BO was created with. */
	__u32 bo_flags;
	/** @pad: must be zero. */
	__u32 pad;
};

/**
 * struct drm_neuron_bo_mmap_offset - get the fake offset to mmap a host BO
 *
 * mmap() the device file at @offset (MAP_SHARED) to access a host BO.
 *
 * Errors: ENOENT for an unknown handle; EINVAL for nonzero @flags or for a
 * device BO (device memory is never mapped by tenants).
 */
struct drm_neuron_bo_mmap_offset {
	/** @handle: in, BO handle. */
	__u32 handle;
	/** @flags: in, must be zero. */
	__u32 flags;
	/** @offset: out, offset to pass to mmap(). */
	__u64 offset;
};

/**
 * struct drm_neuron_bo_wait - wait until all jobs using a BO are done
 *
 * Returns 0 once every job that reads or writes the BO has finished.
 *
 * Errors: ENOENT for an unknown handle; EINVAL for nonzero @flags; ETIME when
 * @timeout_ns passed first (a timeout in the past polls); EINTR on a signal.
 */
struct drm_neuron_bo_wait {
	/** @handle: in, BO handle. */
	__u32 handle;
	/** @flags: in, must be zero. */
	__u32 flags;
	/** @timeout_ns: in, absolute CLOCK_MONOTONIC deadline. */
	__s64 timeout_ns;
};

/**
 * enum drm_neuron_queue_type - target of a job
 *
 * @DRM_NEURON_QUEUE_CORE: a NeuronCore; the job is run by the attached
 *	compute engine.
 * @DRM_NEURON_QUEUE_DMA: a DMA queue; the copies run in the kernel.
 */
enum drm_neuron_queue_type {
	DRM_NEURON_QUEUE_CORE = 1,
	DRM_NEURON_QUEUE_DMA = 2,
};

/* Access flags of &struct drm_neuron_submit_bo. */
/* DRM_NEURON_BO_ACCESS_READ: the job reads the BO. */
#define DRM_NEURON_BO_ACCESS_READ	(1U << 0)
/* DRM_NEURON_BO_ACCESS_WRITE: the job writes the BO. */
#define DRM_NEURON_BO_ACCESS_WRITE	(1U << 1)

/**
 * struct drm_neuron_submit_bo - one BO used by a job
 *
 * The job waits for earlier writers of the BO (and, if it writes, for earlier
 * readers): implicit synchronisation through the BO's reservation object.
 */
struct drm_neuron_submit_bo {
	/** @handle: BO handle of the submitting file. */
	__u32 handle;
	/** @flags: DRM_NEURON_BO_ACCESS_* bits, at least one. */
	__u32 flags;
};

/**
 * struct drm_neuron_sync - a syncobj to wait on or to signal
 *
 * @point zero names a binary syncobj (or the current fence of a timeline);
 * a nonzero @point names a timeline point. As an output, a binary syncobj's
 * fence is replaced and a timeline point is added.
 */
struct drm_neuron_sync {
	/** @handle: syncobj handle of the submitting file. */
	__u32 handle;
	/** @flags: must be zero. */
	__u32 flags;
	/** @point: timeline point, or 0 for a binary syncobj. */
	__u64 point;
};

/**
 * struct drm_neuron_dma_copy - one copy of a DMA job
 *
 * Copies @size bytes from @src_bo at @src_offset to @dst_bo at @dst_offset.
 * Both BOs are indices into the job's BO list; the source entry must have
 * %DRM_NEURON_BO_ACCESS_READ, the destination %DRM_NEURON_BO_ACCESS_WRITE.
 * Host and device BOs may be combined freely; offsets need no alignment;
 * the two ranges must not overlap within one BO. The sizes of a job's copies
 * add up to at most %DRM_NEURON_PARAM_MAX_DMA_BYTES.
 */
struct drm_neuron_dma_copy {
	/** @src_bo: index of the source in the job's BO list. */
	__u32 src_bo;
	/** @dst_bo: index of the destination in the job's BO list. */
	__u32 dst_bo;
	/** @src_offset: byte offset in the source BO. */
	__u64 src_offset;
	/** @dst_offset: byte offset in the destination BO. */
	__u64 dst_offset;
	/** @size: bytes to copy, nonzero. */
	__u64 size;
};

/* DRM_NEURON_MAX_SUBMIT_BOS: most BOs in one job. */
#define DRM_NEURON_MAX_SUBMIT_BOS	256
/* DRM_NEURON_MAX_SUBMIT_SYNCS: most in-syncs, and most out-syncs, per job. */
#define DRM_NEURON_MAX_SUBMIT_SYNCS	64
/* DRM_NEURON_MAX_DMA_COPIES: most copies in one DMA job. */
#define DRM_NEURON_MAX_DMA_COPIES	256
/* DRM_NEURON_MAX_STRIDE: largest element size accepted in arrays. */
#define DRM_NEURON_MAX_STRIDE		256

/**
 * struct drm_neuron_submit - queue one job
 *
 * The job starts when all @in_syncs and the implicit dependencies of its BOs
 * have signalled, runs on the queue named by @queue_type and @queue_index, and
 * its completion signals every @out_syncs entry. Jobs of one queue complete
 * in submission order. A job's fence carries its error: ENODEV when a compute
 * job finds no engine attached (or the engine it was submitted for
 * detached, or did not fetch it within %DRM_NEURON_PARAM_JOB_MAX_MS),
 * ETIMEDOUT when it
 * overran the job timeout (the queue is reset and the file banned; for a
 * compute job the timeout counts from the moment the engine fetched it, for
 * a DMA job from the moment its copies start), ECANCELED when the file was
 * banned before the job ran, or the errno the engine reported. Read it by
 * exporting an out-syncobj as a sync_file.
 *
 * A compute job (%DRM_NEURON_QUEUE_CORE) carries @cmd_size bytes of commands
 * at @cmd, opaque to the kernel and handed to the engine; @copies,
 * @copy_count and @copy_stride must be zero. The device BOs it lists are
 * backed with host pages at submit. A DMA job (%DRM_NEURON_QUEUE_DMA)
 * carries @copy_count &struct drm_neuron_dma_copy at @copies; @cmd and
 * @cmd_size must be zero.
 *
 * A file may submit only to the cores and DMA queues the controller granted
 * it (&struct drm_neuron_set_core_mask); a new file has none.
 *
 * Errors: EINVAL for nonzero @flags or @pad, an unknown @queue_type, a
 * @queue_index out of range, counts above the DRM_NEURON_MAX_* limits, a
 * stride below the first size of its element or above
 * %DRM_NEURON_MAX_STRIDE, unknown bytes in an element, a BO entry without
 * access flags or with unknown ones, a BO listed twice, a copy outside its
 * BO, with a bad index or access, or overlapping within one BO, copies
 * adding up to more than %DRM_NEURON_PARAM_MAX_DMA_BYTES, a nonzero sync
 * flag, or a wait on a point that has no fence yet; ENOENT for a BO or
 * syncobj handle the file does not own; EACCES for a core or DMA queue
 * outside the file's masks; ECANCELED when the file (or its tenant) is
 * banned after a job timeout; EBUSY when the file already has
 * %DRM_NEURON_PARAM_MAX_JOBS unfinished jobs (wait for one, then retry);
 * EOPNOTSUPP for an imported host BO the kernel cannot map (DMA jobs);
 * ENOMEM when memory runs out (including the opener's memory cgroup while
 * backing HBM); EFAULT for bad pointers.
 */
struct drm_neuron_submit {
	/** @queue_type: an &enum drm_neuron_queue_type. */
	__u32 queue_type;
	/** @queue_index: core index or DMA queue index. */
	__u32 queue_index;
	/** @flags: must be zero. */
	__u32 flags;
	/** @bo_count: number of entries at @bos. */
	__u32 bo_count;
	/** @bos: user pointer to &struct drm_neuron_submit_bo entries. */
	__u64 bos;
	/** @bo_stride: size of one entry at @bos (at least 8). */
	__u32 bo_stride;
	/** @sync_stride: size of one entry at @in_syncs and @out_syncs (>= 16). */
	__u32 sync_stride;
	/** @in_syncs: user pointer to &struct drm_neuron_sync to wait on. */
	__u64 in_syncs;
	/** @out_syncs: user pointer to &struct drm_neuron_sync to signal. */
	__u64 out_syncs;
	/** @in_sync_count: number of entries at @in_syncs. */
	__u32 in_sync_count;
	/** @out_sync_count: number of entries at @out_syncs. */
	__u32 out_sync_count;
	/** @cmd: compute jobs: user pointer to the command bytes. */
	__u64 cmd;
	/** @cmd_size: compute jobs: bytes at @cmd, 1 to MAX_CMD_SIZE. */
	__u32 cmd_size;
	/** @copy_count: DMA jobs: number of copies at @copies, at least 1. */
	__u32 copy_count;
	/** @copies: DMA jobs: user pointer to &struct drm_neuron_dma_copy. */
	__u64 copies;
	/** @copy_stride: DMA jobs: size of one entry at @copies (>= 32). */
	__u32 copy_stride;
	/** @pad: must be zero. */
	__u32 pad;
	/** @job_seq: out, sequence number of the job on its queue (from 1). */
	__u64 job_seq;
};

/**
 * enum drm_neuron_context_status - reset status of an open file
 *
 * @DRM_NEURON_CONTEXT_OK: no job of this file caused a reset.
 * @DRM_NEURON_CONTEXT_BANNED: a job of this file, or of another file of
 *	the same tenant (&drm_neuron_set_core_mask.tenant_id), overran its
 *	timeout; the queue was reset and every later submit fails with
 *	ECANCELED. A new file of the same tenant is banned too; only the
 *	controller lifts a ban (%DRM_NEURON_MASK_LIFT_BAN).
 */
enum drm_neuron_context_status {
	DRM_NEURON_CONTEXT_OK = 0,
	DRM_NEURON_CONTEXT_BANNED = 1,
};

/**
 * struct drm_neuron_reset_status - reset status of the calling file
 *
 * Errors: EINVAL for nonzero @flags.
 */
struct drm_neuron_reset_status {
	/** @flags: in, must be zero. */
	__u32 flags;
	/** @status: out, an &enum drm_neuron_context_status. */
	__u32 status;
	/** @device_resets: out, core resets on the device since load. */
	__u64 device_resets;
	/** @guilty_jobs: out, jobs of this file that caused a reset. */
	__u64 guilty_jobs;
};

/* Flags of &struct drm_neuron_set_core_mask (API 1.1). */
/* DRM_NEURON_MASK_DMA: also set the DMA queue mask from @dma_mask. */
#define DRM_NEURON_MASK_DMA		(1U << 0)
/* DRM_NEURON_MASK_TENANT: assign the file to tenant @tenant_id. */
#define DRM_NEURON_MASK_TENANT		(1U << 1)
/* DRM_NEURON_MASK_LIFT_BAN: lift the ban of the file and of its tenant. */
#define DRM_NEURON_MASK_LIFT_BAN	(1U << 2)

/**
 * struct drm_neuron_set_core_mask - grant an open file cores and DMA queues
 *
 * The controller's ioctl (neurond): it opens one file per tenant and grants
 * each the cores and DMA queues it may submit to. A new file may use no core
 * and no DMA queue (before API 1.1: every core and every DMA queue). The
 * ioctl needs CAP_SYS_ADMIN; the target may be the caller's own file.
 *
 * @core_mask always replaces the file's core mask. With
 * %DRM_NEURON_MASK_DMA, @dma_mask replaces its DMA queue mask. With
 * %DRM_NEURON_MASK_TENANT the file joins tenant @tenant_id (an id the
 * controller chooses): a ban, which follows a job timeout, then applies to
 * every file of the tenant, present and future, so opening the device again
 * does not escape it. A file joins a tenant once. With
 * %DRM_NEURON_MASK_LIFT_BAN the ban of the file and of its tenant is lifted.
 * Callers built against API 1.0 pass 16 bytes: @dma_mask and @tenant_id
 * read as zero.
 *
 * Errors: EACCES without CAP_SYS_ADMIN; EBADF if @fd is not open; EINVAL if
 * @fd is not a file of this device, for unknown @flags, for bits at or above
 * the number of cores (DMA queues), a nonzero @dma_mask without
 * %DRM_NEURON_MASK_DMA, a @tenant_id that is zero with
 * %DRM_NEURON_MASK_TENANT or nonzero without it, or a file that already
 * belongs to another tenant; ENOMEM when memory runs out.
 */
struct drm_neuron_set_core_mask {
	/** @fd: in, file descriptor of the target open device file. */
	__s32 fd;
	/** @flags: in, DRM_NEURON_MASK_* bits. */
	__u32 flags;
	/** @core_mask: in, bit n allows core n. */
	__u64 core_mask;
	/** @dma_mask: in, bit n allows DMA queue n (with %DRM_NEURON_MASK_DMA). */
	__u64 dma_mask;
	/** @tenant_id: in, the tenant (with %DRM_NEURON_MASK_TENANT), nonzero. */
	__u64 tenant_id;
};

/* DRM_NEURON_ENGINE_DETACH: detach the calling file instead of attaching. */
#define DRM_NEURON_ENGINE_DETACH	(1U << 0)

/**
 * struct drm_neuron_engine_attach - become the device's compute engine
 *
 * Privileged (CAP_SYS_ADMIN). One file at a time is the engine; it fetches
 * compute jobs and reports their completion. The engine may mmap() the HBM
 * aperture at @hbm_mmap_offset (shared, read/write): pages of device BOs
 * that jobs use are there; any other page raises SIGBUS.
 *
 * Detaching (this flag, closing the last reference to the file, or closing a
 * descriptor of it in the process that attached) fails the jobs the engine
 * held with ENODEV and revokes its HBM mapping: from then on the mapping
 * raises SIGBUS. Compute jobs submitted while it was attached that it had
 * not been handed yet (queued behind another job or waiting for a fence)
 * fail with ENODEV when they would run, even if another engine attached
 * meanwhile: a job submitted for one engine never runs on the next (a
 * restarted engine process knows nothing of its predecessor's jobs). Jobs
 * submitted while no engine is attached run on the next one that attaches.
 *
 * Errors: EACCES without CAP_SYS_ADMIN (before API 1.1: EPERM); EBUSY if
 * another file is the engine; EINVAL for unknown @flags or nonzero @pad, or
 * DETACH by a file that is not the engine.
 */
struct drm_neuron_engine_attach {
	/** @flags: in, 0 to attach or %DRM_NEURON_ENGINE_DETACH. */
	__u32 flags;
	/** @pad: must be zero. */
	__u32 pad;
	/** @hbm_size: out, HBM size in bytes. */
	__u64 hbm_size;
	/** @hbm_mmap_offset: out, mmap() offset of the HBM aperture. */
	__u64 hbm_mmap_offset;
};

/**
 * struct drm_neuron_engine_bo - a BO of a fetched compute job
 */
struct drm_neuron_engine_bo {
	/** @device_addr: HBM address (device BOs), else 0. */
	__u64 device_addr;
	/** @size: size in bytes. */
	__u64 size;
	/** @access: DRM_NEURON_BO_ACCESS_* bits the job declared. */
	__u32 access;
	/** @bo_flags: DRM_NEURON_BO_* flags of the BO. */
	__u32 bo_flags;
};

/**
 * struct drm_neuron_engine_fetch - take the next compute job
 *
 * Waits until a compute job for a core in @core_mask is ready, then copies
 * its commands to @cmd and its BO list to @bos. Complete it with
 * DRM_IOCTL_NEURON_ENGINE_COMPLETE within the job timeout, which starts now
 * (%DRM_NEURON_ENGINE_PROGRESS restarts it).
 *
 * Errors: EPERM if the file is not the attached engine; EINVAL for nonzero
 * @flags or @pad or a @bo_stride below 24; ETIME when @timeout_ns passed;
 * EINTR on a signal; EOVERFLOW when @cmd_size or @bo_count is too small
 * (both then hold the sizes needed and the job stays queued).
 */
struct drm_neuron_engine_fetch {
	/** @core_mask: in, cores to take jobs from; 0 means all. */
	__u64 core_mask;
	/** @timeout_ns: in, absolute CLOCK_MONOTONIC deadline. */
	__s64 timeout_ns;
	/** @cmd: in, user pointer to a buffer for the commands. */
	__u64 cmd;
	/** @bos: in, user pointer to &struct drm_neuron_engine_bo entries. */
	__u64 bos;
	/** @cmd_size: in, bytes at @cmd; out, command bytes of the job. */
	__u32 cmd_size;
	/** @bo_count: in, entries at @bos; out, BOs of the job. */
	__u32 bo_count;
	/** @bo_stride: in, size of one entry at @bos (at least 24). */
	__u32 bo_stride;
	/** @flags: in, must be zero. */
	__u32 flags;
	/** @job_id: out, id to pass to DRM_IOCTL_NEURON_ENGINE_COMPLETE. */
	__u64 job_id;
	/** @client_id: out, DRM client id (fdinfo drm-client-id) of the submitter. */
	__u64 client_id;
	/** @job_seq: out, &drm_neuron_submit.job_seq of the job. */
	__u64 job_seq;
	/** @core: out, core the job was submitted to. */
	__u32 core;
	/** @pad: must be zero. */
	__u32 pad;
};

/*
 * DRM_NEURON_ENGINE_PROGRESS: the job is not finished but progressing:
 * restart its timeout, at most until %DRM_NEURON_PARAM_JOB_MAX_MS after the
 * fetch (API 1.1). @status must be 0.
 */
#define DRM_NEURON_ENGINE_PROGRESS	(1U << 0)

/**
 * struct drm_neuron_engine_complete - report a fetched job as finished
 *
 * Without flags the job is finished with @status. When a job overruns the
 * timeout the kernel fails it with ETIMEDOUT at once, but keeps the device
 * BOs it named from being freed or reused until the engine completes it
 * (which then fails with ENOENT) or detaches: the engine may still be
 * writing them.
 *
 * Errors: EPERM if the file is not the attached engine; EINVAL for unknown
 * @flags, a @status that is neither 0 nor a negative errno, or a nonzero
 * @status with %DRM_NEURON_ENGINE_PROGRESS; ENOENT if @job_id is not a job
 * this engine holds (unknown, completed, or already timed out: stop working
 * on it).
 */
struct drm_neuron_engine_complete {
	/** @job_id: in, from &drm_neuron_engine_fetch.job_id. */
	__u64 job_id;
	/** @status: in, 0 on success or a negative errno (-4095..-1). */
	__s32 status;
	/** @flags: in, 0 or %DRM_NEURON_ENGINE_PROGRESS. */
	__u32 flags;
};

#define DRM_IOCTL_NEURON_GET_PARAM \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_GET_PARAM, struct drm_neuron_get_param)
#define DRM_IOCTL_NEURON_QUERY \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_QUERY, struct drm_neuron_query)
#define DRM_IOCTL_NEURON_BO_CREATE \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_BO_CREATE, struct drm_neuron_bo_create)
#define DRM_IOCTL_NEURON_BO_INFO \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_BO_INFO, struct drm_neuron_bo_info)
#define DRM_IOCTL_NEURON_BO_MMAP_OFFSET \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_BO_MMAP_OFFSET, struct drm_neuron_bo_mmap_offset)
#define DRM_IOCTL_NEURON_BO_WAIT \
	DRM_IOW(DRM_COMMAND_BASE + DRM_NEURON_BO_WAIT, struct drm_neuron_bo_wait)
#define DRM_IOCTL_NEURON_SUBMIT \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_SUBMIT, struct drm_neuron_submit)
#define DRM_IOCTL_NEURON_GET_RESET_STATUS \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_GET_RESET_STATUS, struct drm_neuron_reset_status)
#define DRM_IOCTL_NEURON_SET_CORE_MASK \
	DRM_IOW(DRM_COMMAND_BASE + DRM_NEURON_SET_CORE_MASK, struct drm_neuron_set_core_mask)
#define DRM_IOCTL_NEURON_ENGINE_ATTACH \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_ENGINE_ATTACH, struct drm_neuron_engine_attach)
#define DRM_IOCTL_NEURON_ENGINE_FETCH \
	DRM_IOWR(DRM_COMMAND_BASE + DRM_NEURON_ENGINE_FETCH, struct drm_neuron_engine_fetch)
#define DRM_IOCTL_NEURON_ENGINE_COMPLETE \
	DRM_IOW(DRM_COMMAND_BASE + DRM_NEURON_ENGINE_COMPLETE, struct drm_neuron_engine_complete)

#if defined(__cplusplus)
}
#endif

#endif /* _UAPI_NEURON_ACCEL_H_ */
