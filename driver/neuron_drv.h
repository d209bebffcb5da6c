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
 * @lock: protects @mm, @used, @bo_count and page population against release
 * @mm: range allocator over [0, @size)
 * @used: bytes allocated to BOs
 * @bo_count: device BOs alive
 * @pages: page index -> struct page, populated on first write
 * @resident: pages in @pages
 * @vma: fake mmap offset range of the aperture (engine only)
 */
struct neuron_hbm {
	u64 size;
	struct mutex lock;	/* see @lock above */
	struct drm_mm mm;
	u64 used;
	u32 bo_count;
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
 * @fence_context: fence context of the hardware fences
 * @seqno: last hardware fence seqno (run_job calls of a queue are serialised)
 * @fence_lock: lock of the hardware fences (taken irq-safe by dma_fence)
 * @dma_lock: protects @dma_jobs
 * @dma_jobs: DMA jobs handed to @dma_work, in order
 * @dma_work: runs DMA jobs one after the other
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
 * @reset_wq: ordered workqueue running every timeout handler of the device
 * @dma_wq: workqueue running DMA jobs
 * @reset_count: core resets since creation
 * @engine_lock: protects @engine, @engine_pending, @engine_active,
 *	@next_job_id and the engine state of jobs; hardware fences of compute
 *	jobs are signalled under it
 * @engine: the file attached as compute engine, or NULL
 * @engine_pending: compute jobs waiting to be fetched
 * @engine_active: compute jobs fetched, not yet completed
 * @engine_wq: engine waiting in fetch
 * @next_job_id: last engine job id handed out
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
	spinlock_t engine_lock;	/* see @engine_lock above */
	struct neuron_file *engine;
	struct list_head engine_pending;
	struct list_head engine_active;
	wait_queue_head_t engine_wq;
	u64 next_job_id;
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
 * struct neuron_file - per open file context (a tenant)
 * @ref: held by the file and by each job
 * @ndev: device
 * @client_id: DRM client id (fdinfo drm-client-id)
 * @lock: protects @entities creation and serialises job arm + push
 * @entities: one per queue slot, created on first submit
 * @core_mask: cores this file may submit to
 * @banned: set when a job of this file timed out
 * @guilty_jobs: jobs of this file that timed out
 * @busy_ns: per queue slot, time spent running this file's jobs
 */
struct neuron_file {
	struct kref ref;
	struct neuron_device *ndev;
	u64 client_id;
	struct mutex lock;	/* see @lock above */
	struct neuron_entity **entities;
	atomic64_t core_mask;
	atomic_t banned;
	atomic64_t guilty_jobs;
	atomic64_t *busy_ns;
};

/**
 * struct neuron_payload - what the engine gets for a compute job
 * @ref: held by the job and by an engine copying it out
 * @cmd_size: bytes at @cmd
 * @cmd: command bytes
 * @bo_count: entries in @bos
 * @bos: BO descriptors
 */
struct neuron_payload {
	struct kref ref;
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
 * @start_ns: when the job started running
 * @bo_count: BOs in @bos
 * @bos: referenced BOs
 * @bo_access: DRM_NEURON_BO_ACCESS_* per BO
 * @maps: DMA jobs: kernel mappings of the host BOs
 * @copy_count: DMA copies
 * @copies: DMA copies
 * @payload: compute payload
 * @engine_id: id given to the engine
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
	u32 bo_count;
	struct drm_gem_object **bos;
	u32 *bo_access;
	struct iosys_map *maps;
	u32 copy_count;
	struct drm_neuron_dma_copy *copies;
	struct neuron_payload *payload;
	u64 engine_id;
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
bool neuron_is_privileged(void);
struct neuron_file *neuron_file_get(struct neuron_file *nfile);
void neuron_file_put(struct neuron_file *nfile);

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
int neuron_ioctl_set_core_mask(struct drm_device *drm, void *data,
			       struct drm_file *file);

/* neuron_hbm.c */
int neuron_hbm_init(struct neuron_device *ndev);
void neuron_hbm_fini(struct neuron_device *ndev);
int neuron_hbm_alloc(struct neuron_device *ndev, struct drm_mm_node *node,
		     u64 size);
void neuron_hbm_free(struct neuron_device *ndev, struct drm_mm_node *node);
int neuron_hbm_populate(struct neuron_hbm *hbm, u64 addr, u64 len);
int neuron_hbm_write(struct neuron_hbm *hbm, u64 addr, const void *src,
		     u64 len);
void neuron_hbm_read(struct neuron_hbm *hbm, u64 addr, void *dst, u64 len);
int neuron_hbm_copy(struct neuron_hbm *hbm, u64 dst, u64 src, u64 len);
u64 neuron_hbm_largest_free(struct neuron_hbm *hbm);
int neuron_hbm_mmap(struct neuron_device *ndev, struct vm_area_struct *vma);

/* neuron_gem.c */
bool neuron_bo_is_device(struct drm_gem_object *obj);
u64 neuron_bo_device_addr(struct drm_gem_object *obj);
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
struct dma_fence *neuron_engine_run(struct neuron_job *job);
bool neuron_engine_timeout(struct neuron_job *job);
void neuron_engine_forget(struct neuron_job *job);
void neuron_engine_file_close(struct neuron_file *nfile);
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
