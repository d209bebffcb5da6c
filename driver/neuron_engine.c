// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * The compute engine: a privileged process (neurond's simulator) attaches to
 * the device, fetches compute jobs and reports their completion. Without an
 * engine, compute jobs fail at once with -ENODEV. Every hardware fence of a
 * compute job is signalled under engine_lock by whoever takes the job off
 * the engine lists: completion, timeout or detach.
 */
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <drm/drm_print.h>
#include <drm/drm_utils.h>
#include <drm/drm_vma_manager.h>

#include "neuron_drv.h"

static void neuron_payload_release(struct kref *ref)
{
	struct neuron_payload *p = container_of(ref, struct neuron_payload, ref);

	kfree(p->cmd);
	kfree(p);
}

void neuron_payload_put(struct neuron_payload *payload)
{
	kref_put(&payload->ref, neuron_payload_release);
}

/* Take @job off the engine lists and signal it. */
static void neuron_engine_signal_locked(struct neuron_job *job, int error)
{
	lockdep_assert_held(&job->queue->ndev->engine_lock);
	list_del(&job->engine_link);
	job->on_engine = false;
	neuron_job_account(job, error);
	if (error)
		dma_fence_set_error(job->hw_fence, error);
	dma_fence_signal(job->hw_fence);
}

/* run_job of a core queue. */
struct dma_fence *neuron_engine_run(struct neuron_job *job)
{
	struct neuron_device *ndev = job->queue->ndev;
	struct dma_fence *fence;

	spin_lock(&ndev->engine_lock);
	if (!ndev->engine) {
		spin_unlock(&ndev->engine_lock);
		drm_dbg(&ndev->drm,
			"core %u: job %llu of client %llu: no engine attached, failing with ENODEV\n",
			job->queue->index, job->seq, job->nfile->client_id);
		neuron_job_account(job, -ENODEV);
		return ERR_PTR(-ENODEV);
	}
	neuron_job_start_fence(job);
	job->engine_id = ++ndev->next_job_id;
	job->on_engine = true;
	list_add_tail(&job->engine_link, &ndev->engine_pending);
	fence = dma_fence_get(job->hw_fence);
	spin_unlock(&ndev->engine_lock);
	wake_up_interruptible_all(&ndev->engine_wq);
	return fence;
}

/**
 * neuron_engine_timeout - fail a job that overran the timeout
 * @job: the job the scheduler timed out
 *
 * Return: true if the job was still on the engine (it is guilty), false if
 * it finished meanwhile.
 */
bool neuron_engine_timeout(struct neuron_job *job)
{
	struct neuron_device *ndev = job->queue->ndev;
	bool guilty;

	spin_lock(&ndev->engine_lock);
	guilty = job->on_engine;
	if (guilty)
		neuron_engine_signal_locked(job, -ETIMEDOUT);
	spin_unlock(&ndev->engine_lock);
	return guilty;
}

/* Take a job the scheduler is about to free off the engine lists. */
void neuron_engine_forget(struct neuron_job *job)
{
	struct neuron_device *ndev = job->queue->ndev;

	spin_lock(&ndev->engine_lock);
	if (WARN_ON_ONCE(job->on_engine))
		neuron_engine_signal_locked(job, -ECANCELED);
	spin_unlock(&ndev->engine_lock);
}

static void neuron_engine_detach_locked(struct neuron_device *ndev)
{
	struct neuron_job *job, *tmp;

	ndev->engine = NULL;
	list_for_each_entry_safe(job, tmp, &ndev->engine_active, engine_link)
		neuron_engine_signal_locked(job, -ENODEV);
	list_for_each_entry_safe(job, tmp, &ndev->engine_pending, engine_link)
		neuron_engine_signal_locked(job, -ENODEV);
}

void neuron_engine_file_close(struct neuron_file *nfile)
{
	struct neuron_device *ndev = nfile->ndev;

	spin_lock(&ndev->engine_lock);
	if (ndev->engine == nfile)
		neuron_engine_detach_locked(ndev);
	spin_unlock(&ndev->engine_lock);
	wake_up_interruptible_all(&ndev->engine_wq);
}

int neuron_ioctl_engine_attach(struct drm_device *drm, void *data,
			       struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_engine_attach *args = data;
	int ret = 0;

	if (!neuron_is_privileged())
		return -EPERM;
	if (args->flags & ~DRM_NEURON_ENGINE_DETACH || args->pad)
		return -EINVAL;

	spin_lock(&ndev->engine_lock);
	if (args->flags & DRM_NEURON_ENGINE_DETACH) {
		if (ndev->engine == nfile)
			neuron_engine_detach_locked(ndev);
		else
			ret = -EINVAL;
	} else if (ndev->engine && ndev->engine != nfile) {
		ret = -EBUSY;
	} else {
		ndev->engine = nfile;
	}
	spin_unlock(&ndev->engine_lock);
	wake_up_interruptible_all(&ndev->engine_wq);
	if (ret)
		return ret;

	args->hbm_size = ndev->hbm.size;
	args->hbm_mmap_offset = drm_vma_node_offset_addr(&ndev->hbm.vma);
	if (args->flags & DRM_NEURON_ENGINE_DETACH)
		drm_dbg(drm, "engine detached (client %llu)\n", nfile->client_id);
	else
		drm_dbg(drm, "engine attached (client %llu)\n", nfile->client_id);
	return 0;
}

static struct neuron_job *neuron_engine_first(struct neuron_device *ndev,
					      u64 mask)
{
	struct neuron_job *job;

	list_for_each_entry(job, &ndev->engine_pending, engine_link)
		if (BIT_ULL(job->queue->index) & mask)
			return job;
	return NULL;
}

static bool neuron_engine_ready(struct neuron_device *ndev,
				struct neuron_file *nfile, u64 mask)
{
	bool ready;

	spin_lock(&ndev->engine_lock);
	ready = ndev->engine != nfile || neuron_engine_first(ndev, mask);
	spin_unlock(&ndev->engine_lock);
	return ready;
}

static int neuron_engine_copy_out(struct drm_neuron_engine_fetch *args,
				  const struct neuron_payload *p)
{
	u32 i;

	if (p->cmd_size > args->cmd_size || p->bo_count > args->bo_count) {
		args->cmd_size = p->cmd_size;
		args->bo_count = p->bo_count;
		return -EOVERFLOW;
	}
	if (copy_to_user(u64_to_user_ptr(args->cmd), p->cmd, p->cmd_size))
		return -EFAULT;
	for (i = 0; i < p->bo_count; i++) {
		void __user *dst = u64_to_user_ptr(args->bos +
						   (u64)i * args->bo_stride);

		if (copy_to_user(dst, &p->bos[i], sizeof(p->bos[i])) ||
		    clear_user(dst + sizeof(p->bos[i]),
			       args->bo_stride - sizeof(p->bos[i])))
			return -EFAULT;
	}
	args->cmd_size = p->cmd_size;
	args->bo_count = p->bo_count;
	return 0;
}

/* Move the job with @id from pending to active; false if it went away. */
static bool neuron_engine_claim(struct neuron_device *ndev, u64 id)
{
	struct neuron_job *job;

	list_for_each_entry(job, &ndev->engine_pending, engine_link) {
		if (job->engine_id == id) {
			list_move_tail(&job->engine_link, &ndev->engine_active);
			return true;
		}
	}
	return false;
}

int neuron_ioctl_engine_fetch(struct drm_device *drm, void *data,
			      struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_engine_fetch *args = data;
	u64 mask = args->core_mask ? args->core_mask : U64_MAX;
	struct drm_neuron_engine_fetch out;
	struct neuron_payload *p = NULL;
	struct neuron_job *job;
	long timeout;
	bool claimed;
	int ret;

	if (args->flags || args->pad ||
	    args->bo_stride < sizeof(struct drm_neuron_engine_bo) ||
	    args->bo_stride > DRM_NEURON_MAX_STRIDE)
		return -EINVAL;
	timeout = drm_timeout_abs_to_jiffies(args->timeout_ns);

	for (;;) {
		spin_lock(&ndev->engine_lock);
		if (ndev->engine != nfile) {
			spin_unlock(&ndev->engine_lock);
			return -EPERM;
		}
		job = neuron_engine_first(ndev, mask);
		if (job) {
			p = job->payload;
			kref_get(&p->ref);
			out = *args;
			out.job_id = job->engine_id;
			out.client_id = job->nfile->client_id;
			out.job_seq = job->seq;
			out.core = job->queue->index;
		}
		spin_unlock(&ndev->engine_lock);

		if (job) {
			/* Copy first, claim after: a fault leaves it queued. */
			ret = neuron_engine_copy_out(&out, p);
			neuron_payload_put(p);
			if (ret == -EOVERFLOW) {
				args->cmd_size = out.cmd_size;
				args->bo_count = out.bo_count;
			}
			if (ret)
				return ret;
			spin_lock(&ndev->engine_lock);
			claimed = ndev->engine == nfile &&
				  neuron_engine_claim(ndev, out.job_id);
			spin_unlock(&ndev->engine_lock);
			if (claimed) {
				*args = out;
				return 0;
			}
			continue;	/* it timed out meanwhile */
		}

		if (!timeout)
			return -ETIME;
		timeout = wait_event_interruptible_timeout(ndev->engine_wq,
							   neuron_engine_ready(ndev, nfile, mask),
							   timeout);
		if (timeout < 0)
			return timeout;
		if (!timeout)
			return -ETIME;
	}
}

int neuron_ioctl_engine_complete(struct drm_device *drm, void *data,
				 struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_engine_complete *args = data;
	struct neuron_job *job;
	int ret = -ENOENT;

	if (args->flags || args->status > 0 || args->status < -MAX_ERRNO)
		return -EINVAL;

	spin_lock(&ndev->engine_lock);
	if (ndev->engine != nfile) {
		ret = -EPERM;
		goto out;
	}
	list_for_each_entry(job, &ndev->engine_active, engine_link) {
		if (job->engine_id == args->job_id) {
			neuron_engine_signal_locked(job, args->status);
			ret = 0;
			break;
		}
	}
out:
	spin_unlock(&ndev->engine_lock);
	return ret;
}
