// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * DMA queues of a simulated device: copies between host BOs and HBM run in
 * the kernel, one job after the other per queue, on the device's DMA
 * workqueue. Submit mapped the host BOs and backed the HBM being written, so
 * nothing here allocates while the job's fence is pending.
 *
 * Jobs are bounded like compute jobs: at most NEURON_MAX_DMA_JOB_BYTES
 * (submit checks), and the job timeout from the moment the copies start. A
 * job that overruns it stops at the next chunk with -ETIMEDOUT and bans its
 * file; at teardown a running job stops at the next chunk with -ENODEV.
 */
#include <linux/dma-fence.h>
#include <linux/sched.h>
#include <drm/drm_print.h>

#include "neuron_drv.h"

#define NEURON_DMA_CHUNK	(1024 * 1024)

static int neuron_dma_copy_chunk(struct neuron_job *job,
				 const struct drm_neuron_dma_copy *c, u64 done,
				 u64 n)
{
	struct neuron_hbm *hbm = &job->queue->ndev->hbm;
	struct drm_gem_object *src = job->bos[c->src_bo];
	struct drm_gem_object *dst = job->bos[c->dst_bo];
	u64 soff = c->src_offset + done, doff = c->dst_offset + done;
	bool sdev = neuron_bo_is_device(src), ddev = neuron_bo_is_device(dst);

	if (sdev && ddev)
		return neuron_hbm_copy(hbm, neuron_bo_device_addr(dst) + doff,
				       neuron_bo_device_addr(src) + soff, n);
	if (ddev)
		return neuron_hbm_write(hbm, neuron_bo_device_addr(dst) + doff,
					job->maps[c->src_bo].vaddr + soff, n);
	if (sdev)
		neuron_hbm_read(hbm, neuron_bo_device_addr(src) + soff,
				job->maps[c->dst_bo].vaddr + doff, n);
	else
		memcpy(job->maps[c->dst_bo].vaddr + doff,
		       job->maps[c->src_bo].vaddr + soff, n);
	return 0;
}

/* Between chunks: the device going away, or the job out of time? */
static int neuron_dma_check(struct neuron_job *job, u64 deadline)
{
	struct neuron_device *ndev = job->queue->ndev;

	if (READ_ONCE(ndev->dying)) {
		drm_info(&ndev->drm, "%s: job %llu of client %llu stopped: device going away\n",
			 job->queue->name, job->seq, job->nfile->client_id);
		return -ENODEV;
	}
	if (ktime_get_ns() > deadline) {
		neuron_job_overran(job);
		return -ETIMEDOUT;
	}
	return 0;
}

static int neuron_dma_execute(struct neuron_job *job)
{
	u64 deadline = job->start_ns +
		       (u64)job->queue->ndev->desc.job_timeout_ms * NSEC_PER_MSEC;
	u32 i;
	int ret = 0;

	for (i = 0; i < job->copy_count && !ret; i++) {
		const struct drm_neuron_dma_copy *c = &job->copies[i];
		u64 done, n;

		for (done = 0; done < c->size && !ret; done += n) {
			n = min_t(u64, c->size - done, NEURON_DMA_CHUNK);
			ret = neuron_dma_check(job, deadline);
			if (!ret)
				ret = neuron_dma_copy_chunk(job, c, done, n);
			cond_resched();
		}
	}
	return ret;
}

void neuron_dma_work(struct work_struct *work)
{
	struct neuron_queue *q = container_of(work, struct neuron_queue,
					      dma_work);
	struct neuron_job *job;
	bool cookie;
	int ret;

	for (;;) {
		spin_lock(&q->dma_lock);
		job = list_first_entry_or_null(&q->dma_jobs, struct neuron_job,
					       dma_link);
		if (job)
			list_del(&job->dma_link);
		spin_unlock(&q->dma_lock);
		if (!job)
			break;

		cookie = dma_fence_begin_signalling();
		job->start_ns = ktime_get_ns();	/* the timeout starts now */
		ret = neuron_dma_execute(job);
		neuron_job_account(job, ret);
		if (ret)
			dma_fence_set_error(job->hw_fence, ret);
		dma_fence_signal(job->hw_fence);
		dma_fence_end_signalling(cookie);
	}
}

/* run_job of a DMA queue: hand the job to the queue's worker. */
struct dma_fence *neuron_dma_run(struct neuron_job *job)
{
	struct neuron_queue *q = job->queue;
	struct dma_fence *fence;

	neuron_job_start_fence(job);
	fence = dma_fence_get(job->hw_fence);
	spin_lock(&q->dma_lock);
	list_add_tail(&job->dma_link, &q->dma_jobs);
	spin_unlock(&q->dma_lock);
	queue_work(q->ndev->dma_wq, &q->dma_work);
	return fence;
}
