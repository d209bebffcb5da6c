// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Queues and their DRM schedulers: one scheduler per core and per DMA queue,
 * credit limit 1 so that jobs of a queue complete in order; hardware fences;
 * job allocation (bounded per file); per-file entities.
 *
 * The schedulers have no timeout of their own: drm_sched would start it when
 * a job is handed to the queue, and a compute job may then still wait for
 * the engine to fetch it. The engine's watchdog (neuron_engine.c) times
 * compute jobs from their fetch, the DMA worker (neuron_dma.c) DMA jobs from
 * their start; only the job that overran is guilty.
 */
#include <linux/dma-fence.h>
#include <linux/slab.h>
#include <drm/drm_print.h>

#include "neuron_drv.h"

static const char *neuron_fence_driver_name(struct dma_fence *fence)
{
	return NEURON_DRIVER_NAME;
}

static const char *neuron_fence_core_name(struct dma_fence *fence)
{
	return "neuron-core";
}

static const char *neuron_fence_dma_name(struct dma_fence *fence)
{
	return "neuron-dma";
}

static const struct dma_fence_ops neuron_core_fence_ops = {
	.get_driver_name = neuron_fence_driver_name,
	.get_timeline_name = neuron_fence_core_name,
};

static const struct dma_fence_ops neuron_dma_fence_ops = {
	.get_driver_name = neuron_fence_driver_name,
	.get_timeline_name = neuron_fence_dma_name,
};

/**
 * neuron_job_start_fence - initialise the hardware fence as the job is run
 * @job: job being run; run_job calls are serialised per queue
 */
void neuron_job_start_fence(struct neuron_job *job)
{
	struct neuron_queue *q = job->queue;

	dma_fence_init(job->hw_fence, q->type == DRM_NEURON_QUEUE_CORE ?
		       &neuron_core_fence_ops : &neuron_dma_fence_ops,
		       &q->fence_lock, q->fence_context, ++q->seqno);
	job->hw_fence_init = true;
}

/**
 * neuron_job_account - count a finished job, just before its fence signals
 * @job: job
 * @error: 0 or the negative errno the job failed with
 */
void neuron_job_account(struct neuron_job *job, int error)
{
	struct neuron_queue *q = job->queue;
	u64 busy = job->start_ns ? ktime_get_ns() - job->start_ns : 0;

	atomic64_add(busy, &q->busy_ns);
	atomic64_add(busy, &job->nfile->busy_ns[q->slot]);
	atomic64_inc(error ? &q->jobs_failed : &q->jobs_completed);
}

/**
 * neuron_job_alloc - allocate a job; the device waits for it at teardown
 * @nfile: submitting file, below %NEURON_MAX_JOBS_PER_FILE unfinished jobs
 * @q: target queue
 *
 * Charged to the active memcg (the submit path sets the opener's).
 *
 * Return: the job, ERR_PTR(-EBUSY) when the file has too many jobs, or
 * ERR_PTR(-ENOMEM).
 */
struct neuron_job *neuron_job_alloc(struct neuron_file *nfile,
				    struct neuron_queue *q)
{
	struct neuron_device *ndev = q->ndev;
	struct neuron_job *job;

	if (!atomic_add_unless(&nfile->jobs, 1, NEURON_MAX_JOBS_PER_FILE))
		return ERR_PTR(-EBUSY);
	job = kzalloc(sizeof(*job), NEURON_GFP_JOB);
	if (job)
		job->hw_fence = kzalloc(sizeof(*job->hw_fence),
					NEURON_GFP_JOB);
	if (!job || !job->hw_fence) {
		kfree(job);
		atomic_dec(&nfile->jobs);
		return ERR_PTR(-ENOMEM);
	}
	job->queue = q;
	job->nfile = neuron_file_get(nfile);
	spin_lock(&ndev->engine_lock);
	job->engine_era = ndev->engine_era;
	ndev->jobs_alive++;
	spin_unlock(&ndev->engine_lock);
	return job;
}

void neuron_job_free(struct neuron_job *job)
{
	struct neuron_device *ndev = job->queue->ndev;
	u32 i;

	for (i = 0; i < job->bo_count && job->bos; i++) {
		if (!job->bos[i])
			continue;
		if (job->maps && !iosys_map_is_null(&job->maps[i]))
			drm_gem_vunmap_unlocked(job->bos[i], &job->maps[i]);
		drm_gem_object_put(job->bos[i]);
	}
	kfree(job->maps);
	kfree(job->bos);
	kfree(job->bo_access);
	kfree(job->copies);
	if (job->payload)
		neuron_payload_put(job->payload);
	if (job->hw_fence_init)
		dma_fence_put(job->hw_fence);
	else
		kfree(job->hw_fence);
	atomic_dec(&job->nfile->jobs);
	neuron_file_put(job->nfile);
	kfree(job);

	spin_lock(&ndev->engine_lock);
	if (!--ndev->jobs_alive)
		wake_up_all(&ndev->jobs_idle);
	spin_unlock(&ndev->engine_lock);
}

static struct dma_fence *neuron_sched_run_job(struct drm_sched_job *sched_job)
{
	struct neuron_job *job = to_neuron_job(sched_job);

	/* Killed with its entity, or a dependency failed to load. */
	if (unlikely(sched_job->s_fence->finished.error))
		return NULL;
	if (neuron_file_banned(job->nfile)) {
		neuron_job_account(job, -ECANCELED);
		return ERR_PTR(-ECANCELED);
	}
	if (job->queue->type == DRM_NEURON_QUEUE_DMA)
		return neuron_dma_run(job);
	return neuron_engine_run(job);
}

static void neuron_sched_free_job(struct drm_sched_job *sched_job)
{
	struct neuron_job *job = to_neuron_job(sched_job);

	/* Never expected: a job freed while the engine still holds it. */
	if (job->queue->type == DRM_NEURON_QUEUE_CORE)
		neuron_engine_forget(job);
	drm_sched_job_cleanup(sched_job);
	neuron_job_free(job);
}

static const struct drm_sched_backend_ops neuron_sched_ops = {
	.run_job = neuron_sched_run_job,
	.free_job = neuron_sched_free_job,
};

int neuron_queue_init(struct neuron_device *ndev, struct neuron_queue *q,
		      u32 type, u32 index, u32 slot)
{
	bool core = type == DRM_NEURON_QUEUE_CORE;
	int ret;

	q->ndev = ndev;
	q->type = type;
	q->index = index;
	q->slot = slot;
	snprintf(q->name, sizeof(q->name), "%s%u", core ? "core" : "dma", index);
	spin_lock_init(&q->fence_lock);
	spin_lock_init(&q->dma_lock);
	INIT_LIST_HEAD(&q->dma_jobs);
	INIT_WORK(&q->dma_work, neuron_dma_work);
	q->fence_context = dma_fence_context_alloc(1);
	/*
	 * The scheduler's own submit workqueue, ordered (run_job and free_job
	 * of one queue never overlap, as with drm_sched's default) but high
	 * priority: every job of an inference tenant passes through run_job,
	 * and a normal-priority kworker waits behind a trainer's busy threads
	 * for a CPU (the inference tail of runtime/kmd/README.md).
	 */
	q->submit_wq = alloc_ordered_workqueue("neuron-%s-%s", WQ_HIGHPRI,
					       dev_name(ndev->drm.dev), q->name);
	if (!q->submit_wq)
		return -ENOMEM;
	ret = neuron_sched_init(&q->sched, &neuron_sched_ops, q->submit_wq,
				MAX_SCHEDULE_TIMEOUT, q->name, ndev->drm.dev);
	if (ret) {
		destroy_workqueue(q->submit_wq);
		q->submit_wq = NULL;
	}
	return ret;
}

/* No job is left (neuron_device_destroy waited): the DMA worker is idle. */
void neuron_queue_fini(struct neuron_queue *q)
{
	cancel_work_sync(&q->dma_work);
	drm_sched_fini(&q->sched);
	destroy_workqueue(q->submit_wq);
	q->submit_wq = NULL;
}

/**
 * neuron_file_entity - the file's entity on a queue, created on first use
 * @nfile: file, its lock held
 * @q: queue
 *
 * Return: the entity or an ERR_PTR.
 */
struct neuron_entity *neuron_file_entity(struct neuron_file *nfile,
					 struct neuron_queue *q)
{
	struct neuron_entity *ent = nfile->entities[q->slot];
	int ret;

	neuron_assert_mutex_held(&nfile->lock);
	if (ent)
		return ent;
	ent = kzalloc(sizeof(*ent), GFP_KERNEL);
	if (!ent)
		return ERR_PTR(-ENOMEM);
	ent->sched = &q->sched;
	ret = drm_sched_entity_init(&ent->base, DRM_SCHED_PRIORITY_NORMAL,
				    &ent->sched, 1, NULL);
	if (ret) {
		kfree(ent);
		return ERR_PTR(ret);
	}
	nfile->entities[q->slot] = ent;
	return ent;
}

/* On close: let queued jobs run (bounded by the job timeout), then free. */
void neuron_file_entities_fini(struct neuron_file *nfile)
{
	u32 i;

	for (i = 0; i < nfile->ndev->num_queues; i++) {
		if (!nfile->entities[i])
			continue;
		drm_sched_entity_destroy(&nfile->entities[i]->base);
		kfree(nfile->entities[i]);
		nfile->entities[i] = NULL;
	}
}
