/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Internal interfaces of the neuron accel driver. A bus front end (the
 * simulated platform devices in neuron_sim.c, later a PCI driver) fills a
 * &struct neuron_hw_desc and calls neuron_device_create(); everything below
 * that is bus independent.
 */
#ifndef _NEURON_DRV_H_
#define _NEURON_DRV_H_

#include <linux/iosys-map.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/refcount.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <drm/drm_device.h>
#include <drm/drm_file.h>
#include <drm/drm_gem.h>
#include <drm/drm_mm.h>
#include <drm/drm_vma_manager.h>
#include <drm/gpu_scheduler.h>
#include <drm/neuron_accel.h>

#include "neuron_compat.h"

#define NEURON_DRIVER_NAME	"neuron"
#define NEURON_DRIVER_DESC	"Neuron accelerator (simulated devices)"
#define NEURON_MAX_CORES	64
#define NEURON_MAX_DMA_QUEUES	16
#define NEURON_MAX_CMD_SIZE	(64 * 1024)
#define NEURON_MAX_HOST_BO_SIZE	(4ULL << 30)
/* Bytes one DMA job may copy: a few hundred ms of memcpy on a host core. */
#define NEURON_MAX_DMA_JOB_BYTES	SZ_1G
/* Unfinished jobs per file: each holds kernel memory and its BOs. */
#define NEURON_MAX_JOBS_PER_FILE	256
/* A compute job that reports progress runs at most this many timeouts. */
#define NEURON_JOB_MAX_TIMEOUTS		10
/*
 * What a file's jobs allocate, charged to the active memcg (its opener's):
 * a full memcg fails the submit with ENOMEM, it does not OOM-kill.
 */
#define NEURON_GFP_JOB	(GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL)

/*
 * Debug checks of the suite's build (make NEURON_DEBUG=1): Debian's kernel
 * has no lockdep nor CONFIG_DEBUG_ATOMIC_SLEEP, so lock and context
 * assertions are also checked by hand (a held lock, not its owner).
 */
#ifdef NEURON_DEBUG
#define NEURON_DEBUG_CHECK(cond)	WARN_ON_ONCE(!(cond))
#else
#define NEURON_DEBUG_CHECK(cond)	BUILD_BUG_ON_INVALID(cond)
#endif

#define neuron_assert_mutex_held(m)					\
	do {								\
		struct mutex *m_ = (m);					\
		lockdep_assert_held(m_);				\
		NEURON_DEBUG_CHECK(mutex_is_locked(m_));		\
	} while (0)

#define neuron_assert_spin_held(l)					\
	do {								\
		spinlock_t *l_ = (l);					\
		lockdep_assert_held(l_);				\
		NEURON_DEBUG_CHECK(raw_spin_is_locked(&l_->rlock));			\
	} while (0)

#define neuron_might_sleep()						\
	do {								\
		might_sleep();						\
		NEURON_DEBUG_CHECK(preemptible());			\
	} while (0)

/**
 * struct neuron_hw_desc - what a bus front end tells the core about a device
 * @platform: an &enum drm_neuron_platform
 * @profile: an &enum drm_neuron_profile
 * @profile_name: "trn1", "trn2" or "trn3"
 * @num_cores: NeuronCores, 1..NEURON_MAX_CORES
 * @num_dma_queues: DMA queues, 1..NEURON_MAX_DMA_QUEUES
 * @hbm_size: HBM bytes, a multiple of PAGE_SIZE
 * @job_timeout_ms: compute job timeout
 */
struct neuron_hw_desc {
	u32 platform;
	u32 profile;
	const char *profile_name;
	u32 num_cores;
	u32 num_dma_queues;
	u64 hbm_size;
	u32 job_timeout_ms;
};

/**
 * struct neuron_hbm - device memory: a range allocator over a sparse aperture
 * @size: bytes
 * @lock: protects @mm, @used and @bo_count; never held while allocating
 *	pages
 * @mm: range allocator over [0, @size)
 * @used: bytes allocated to BOs
 * @bo_count: device BOs alive
 * @map_lock: orders the engine's page faults (look up a page, map it) against
 *	taking pages out of @pages (take out, then unmap, then free); held for
 *	no allocation but the fault's page table
 * @pages: page index -> struct page. Pages are added (xa_cmpxchg, no lock
 *	of ours) only inside BOs that the adding job holds, and taken out only
 *	when their BO is freed, so a page is in @pages only while its BO lives.
 * @resident: pages in @pages
 * @vma: fake mmap offset range of the aperture (engine only)
 */
struct neuron_hbm {
	u64 size;
	struct mutex lock;	/* see @lock above */
	struct drm_mm mm;
	u64 used;
	u32 bo_count;
	struct mutex map_lock;	/* see @map_lock above */
	struct xarray pages;
	atomic64_t resident;
	struct drm_vma_offset_node vma;
};

/**
 * struct neuron_queue - one hardware queue: a core or a DMA queue
 * @ndev: owning device
 * @type: DRM_NEURON_QUEUE_CORE or DRM_NEURON_QUEUE_DMA
 * @index: core or DMA queue index
 * @slot: index in the per-file entity and statistics arrays
 * @name: scheduler name
 * @sched: the DRM scheduler of this queue
 * @submit_wq: the scheduler's ordered, high-priority submit workqueue
 * @fence_context: fence context of the hardware fences
 * @seqno: last hardware fence seqno (run_job calls of a queue are serialised)
 * @fence_lock: lock of the hardware fences (taken irq-safe by dma_fence)
 * @dma_lock: protects @dma_jobs
 * @dma_jobs: DMA jobs handed to @dma_work, in order
 * @dma_work: runs DMA jobs one after the other, each within the job timeout
 * @submit_seq: last job sequence number handed out
 * @busy_ns: time spent running jobs
 * @jobs_completed: jobs finished without error
 * @jobs_failed: jobs finished with an error
 * @resets: resets after a job timeout
 */
struct neuron_queue {
	struct neuron_device *ndev;
	u32 type;
	u32 index;
	u32 slot;
	char name[24];
	struct drm_gpu_scheduler sched;
	struct workqueue_struct *submit_wq;
	u64 fence_context;
	u64 seqno;
	spinlock_t fence_lock;	/* see @fence_lock above */
	spinlock_t dma_lock;	/* see @dma_lock above */
	struct list_head dma_jobs;
	struct work_struct dma_work;
	atomic64_t submit_seq;
	atomic64_t busy_ns;
	atomic64_t jobs_completed;
	atomic64_t jobs_failed;
	atomic64_t resets;
};

/**
 * struct neuron_device - one accelerator
 * @drm: DRM device, first member
 * @desc: hardware description from the bus front end
 * @hbm: device memory
 * @num_queues: @desc.num_cores + @desc.num_dma_queues
 * @queues: cores first, then DMA queues
 * @reset_wq: ordered workqueue running @watchdog
 * @dma_wq: workqueue running DMA jobs
 * @reset_count: queue resets (job timeouts) since creation
 * @dying: set at teardown: running DMA jobs stop at their next chunk
 * @tenants_lock: protects @tenants
 * @tenants: &struct neuron_tenant by id
 * @engine_lock: protects @engine, @engine_owner, @engine_pending,
 *	@engine_active, @engine_quarantine, @next_job_id, @engine_era and the
 *	engine state of jobs; hardware fences of compute jobs are signalled
 *	under it
 * @engine: the file attached as compute engine, or NULL
 * @engine_owner: files_struct of the process that attached (its close of a
 *	descriptor of @engine detaches); compared, never dereferenced
 * @engine_pending: compute jobs waiting to be fetched
 * @engine_active: compute jobs fetched, not yet completed, by fetch time
 * @engine_quarantine: payloads of jobs that overran on the engine, holding
 *	their device BOs until the engine completes them or detaches
 * @engine_wq: engine waiting in fetch
 * @next_job_id: last engine job id handed out
 * @engine_era: counts engine detaches; a compute job runs only in the era it
 *	was submitted in, never for an engine that attached after its own left
 * @watchdog: fails the jobs on the engine lists whose deadline passed
 * @watchdog_at: when @watchdog is due, U64_MAX if idle; under @engine_lock
 * @jobs_alive: jobs allocated and not yet freed, under @engine_lock
 * @jobs_idle: woken when @jobs_alive drops to zero
 */
struct neuron_device {
	struct drm_device drm;
	struct neuron_hw_desc desc;
	struct neuron_hbm hbm;
	u32 num_queues;
	struct neuron_queue *queues;
	struct workqueue_struct *reset_wq;
	struct workqueue_struct *dma_wq;
	atomic64_t reset_count;
	bool dying;
	struct mutex tenants_lock;	/* see @tenants_lock above */
	struct xarray tenants;
	spinlock_t engine_lock;	/* see @engine_lock above */
	struct neuron_file *engine;
	const void *engine_owner;
	struct list_head engine_pending;
	struct list_head engine_active;
	struct list_head engine_quarantine;
	wait_queue_head_t engine_wq;
	u64 next_job_id;
	u64 engine_era;
	struct delayed_work watchdog;
	u64 watchdog_at;
	u64 jobs_alive;
	wait_queue_head_t jobs_idle;
};

/**
 * struct neuron_entity - a file's entity on one queue
 * @base: DRM scheduler entity
 * @sched: the single scheduler of @base's sched_list
 */
struct neuron_entity {
	struct drm_sched_entity base;
	struct drm_gpu_scheduler *sched;
};

/**
 * struct neuron_tenant - what the controller calls one tenant: its files
 * share a ban, which outlives them
 * @ref: held by each file of the tenant, and by the device while banned
 * @id: the controller's id, nonzero
 * @banned: a job of one of its files overran the timeout
 */
struct neuron_tenant {
	refcount_t ref;
	u64 id;
	atomic_t banned;
};

/**
 * struct neuron_file - per open file context
 * @ref: held by the file and by each job
 * @ndev: device
 * @client_id: DRM client id (fdinfo drm-client-id)
 * @memcg: memory cgroup of the opener: HBM pages and jobs are charged to it
 * @lock: protects @entities creation and serialises job arm + push
 * @entities: one per queue slot, created on first submit
 * @core_mask: cores this file may submit to (none at open)
 * @dma_mask: DMA queues this file may submit to (none at open)
 * @tenant: the tenant the controller assigned, set once, or NULL
 * @banned: set when a job of this file timed out
 * @guilty_jobs: jobs of this file that timed out
 * @jobs: jobs of this file allocated and not yet freed
 * @busy_ns: per queue slot, time spent running this file's jobs
 */
struct neuron_file {
	struct kref ref;
	struct neuron_device *ndev;
	u64 client_id;
	struct mem_cgroup *memcg;
	struct mutex lock;	/* see @lock above */
	struct neuron_entity **entities;
	atomic64_t core_mask;
	atomic64_t dma_mask;
	struct neuron_tenant *tenant;
	atomic_t banned;
	atomic64_t guilty_jobs;
	atomic_t jobs;
	atomic64_t *busy_ns;
};

/**
 * struct neuron_payload - what the engine gets for a compute job
 * @ref: held by the job, by an engine copying it out and by the quarantine
 * @engine_id: the job's id on the engine (0 until run)
 * @quarantine_link: in &neuron_device.engine_quarantine
 * @objs: the job's BOs (no reference until quarantined), @bo_count of them
 * @cmd_size: bytes at @cmd
 * @cmd: command bytes
 * @bo_count: entries in @bos
 * @bos: BO descriptors
 */
struct neuron_payload {
	struct kref ref;
	u64 engine_id;
	struct list_head quarantine_link;
	struct drm_gem_object **objs;
	u32 cmd_size;
	void *cmd;
	u32 bo_count;
	struct drm_neuron_engine_bo bos[] __counted_by(bo_count);
};

/**
 * struct neuron_job - one submitted job
 * @base: DRM scheduler job
 * @queue: target queue
 * @nfile: submitting file (reference)
 * @hw_fence: hardware fence, initialised by run_job
 * @hw_fence_init: @hw_fence was initialised
 * @seq: sequence number on the queue
 * @start_ns: when the copies started (DMA) or the engine fetched it; 0 before
 * @deadline_ns: compute jobs on the engine lists: when the timeout expires
 *	(or, still to be fetched, when the engine is deemed absent)
 * @bo_count: BOs in @bos
 * @bos: referenced BOs
 * @bo_access: DRM_NEURON_BO_ACCESS_* per BO
 * @maps: DMA jobs: kernel mappings of the host BOs
 * @copy_count: DMA copies
 * @copies: DMA copies
 * @payload: compute payload
 * @engine_id: id given to the engine
 * @engine_era: &neuron_device.engine_era when the job was submitted
 * @engine_link: in &neuron_device.engine_pending or .engine_active
 * @on_engine: @engine_link is on one of the engine lists
 * @dma_link: in &neuron_queue.dma_jobs
 */
struct neuron_job {
	struct drm_sched_job base;
	struct neuron_queue *queue;
	struct neuron_file *nfile;
	struct dma_fence *hw_fence;
	bool hw_fence_init;
	u64 seq;
	u64 start_ns;
	u64 deadline_ns;
	u32 bo_count;
	struct drm_gem_object **bos;
	u32 *bo_access;
	struct iosys_map *maps;
	u32 copy_count;
	struct drm_neuron_dma_copy *copies;
	struct neuron_payload *payload;
	u64 engine_id;
	u64 engine_era;
	struct list_head engine_link;
	bool on_engine;
	struct list_head dma_link;
};

static inline struct neuron_device *to_neuron_device(struct drm_device *drm)
{
	return container_of(drm, struct neuron_device, drm);
}

static inline struct neuron_job *to_neuron_job(struct drm_sched_job *job)
{
	return container_of(job, struct neuron_job, base);
}

static inline struct neuron_queue *to_neuron_queue(struct drm_gpu_scheduler *s)
{
	return container_of(s, struct neuron_queue, sched);
}

/* neuron_drv.c */
extern const struct drm_driver neuron_drm_driver;
struct neuron_file *neuron_file_get(struct neuron_file *nfile);
void neuron_file_put(struct neuron_file *nfile);

/* neuron_access.c */
void neuron_tenants_fini(struct neuron_device *ndev);
void neuron_file_access_fini(struct neuron_file *nfile);
int neuron_queue_allowed(struct neuron_file *nfile, struct neuron_queue *q);
bool neuron_file_banned(struct neuron_file *nfile);
void neuron_job_overran(struct neuron_job *job);
int neuron_ioctl_set_core_mask(struct drm_device *drm, void *data,
			       struct drm_file *file);

/* neuron_sim.c */
int neuron_sim_register(void);
void neuron_sim_unregister(void);

/* neuron_device.c */
struct neuron_device *neuron_device_create(struct device *parent,
					   const struct neuron_hw_desc *desc);
void neuron_device_destroy(struct neuron_device *ndev);

/* neuron_query.c */
int neuron_ioctl_get_param(struct drm_device *drm, void *data,
			   struct drm_file *file);
int neuron_ioctl_query(struct drm_device *drm, void *data,
		       struct drm_file *file);
int neuron_ioctl_get_reset_status(struct drm_device *drm, void *data,
				  struct drm_file *file);

/* neuron_hbm.c */
int neuron_hbm_init(struct neuron_device *ndev);
void neuron_hbm_fini(struct neuron_device *ndev);
int neuron_hbm_alloc(struct neuron_device *ndev, struct drm_mm_node *node,
		     u64 size);
void neuron_hbm_free(struct neuron_device *ndev, struct drm_mm_node *node);
int neuron_hbm_populate(struct neuron_hbm *hbm, struct mem_cgroup *memcg,
			u64 addr, u64 len);
void neuron_hbm_revoke(struct neuron_device *ndev);
int neuron_hbm_write(struct neuron_hbm *hbm, u64 addr, const void *src,
		     u64 len);
void neuron_hbm_read(struct neuron_hbm *hbm, u64 addr, void *dst, u64 len);
int neuron_hbm_copy(struct neuron_hbm *hbm, u64 dst, u64 src, u64 len);
u64 neuron_hbm_largest_free(struct neuron_hbm *hbm);
int neuron_hbm_mmap(struct neuron_device *ndev, struct vm_area_struct *vma);

/* neuron_gem.c */
bool neuron_bo_is_device(struct drm_gem_object *obj);
bool neuron_bo_owned_by(struct drm_gem_object *obj, struct drm_file *file);
u64 neuron_bo_device_addr(struct drm_gem_object *obj);
int neuron_bo_populate(struct drm_gem_object *obj, u64 offset, u64 size);
struct drm_gem_object *neuron_gem_prime_import(struct drm_device *dev,
					       struct dma_buf *dma_buf);
int neuron_ioctl_bo_create(struct drm_device *drm, void *data,
			   struct drm_file *file);
int neuron_ioctl_bo_info(struct drm_device *drm, void *data,
			 struct drm_file *file);
int neuron_ioctl_bo_mmap_offset(struct drm_device *drm, void *data,
				struct drm_file *file);
int neuron_ioctl_bo_wait(struct drm_device *drm, void *data,
			 struct drm_file *file);

/* neuron_job.c */
int neuron_ioctl_submit(struct drm_device *drm, void *data,
			struct drm_file *file);

/* neuron_sched.c */
int neuron_queue_init(struct neuron_device *ndev, struct neuron_queue *q,
		      u32 type, u32 index, u32 slot);
void neuron_queue_fini(struct neuron_queue *q);
struct neuron_entity *neuron_file_entity(struct neuron_file *nfile,
					 struct neuron_queue *q);
void neuron_file_entities_fini(struct neuron_file *nfile);
void neuron_job_start_fence(struct neuron_job *job);
void neuron_job_account(struct neuron_job *job, int error);
struct neuron_job *neuron_job_alloc(struct neuron_file *nfile,
				    struct neuron_queue *q);
void neuron_job_free(struct neuron_job *job);

/* neuron_dma.c */
void neuron_dma_work(struct work_struct *work);
struct dma_fence *neuron_dma_run(struct neuron_job *job);

/* neuron_engine.c */
void neuron_engine_init(struct neuron_device *ndev);
struct dma_fence *neuron_engine_run(struct neuron_job *job);
void neuron_engine_forget(struct neuron_job *job);
void neuron_engine_file_close(struct neuron_file *nfile);
void neuron_engine_file_flush(struct neuron_file *nfile, const void *owner);
void neuron_payload_put(struct neuron_payload *payload);
int neuron_ioctl_engine_attach(struct drm_device *drm, void *data,
			       struct drm_file *file);
int neuron_ioctl_engine_fetch(struct drm_device *drm, void *data,
			      struct drm_file *file);
int neuron_ioctl_engine_complete(struct drm_device *drm, void *data,
				 struct drm_file *file);

/* neuron_sysfs.c */
extern const struct attribute_group *neuron_dev_groups[];
void neuron_show_fdinfo(struct drm_printer *p, struct drm_file *file);

#endif /* _NEURON_DRV_H_ */
