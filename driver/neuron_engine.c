// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * The compute engine: a privileged process (neurond's simulator) attaches to
 * the device, fetches compute jobs and reports their completion. Without an
 * engine, compute jobs fail at once with -ENODEV. Every hardware fence of a
 * compute job is signalled under engine_lock by whoever takes the job off
 * the engine lists: completion, timeout or detach.
 *
 * Timeouts: a job's timeout starts when the engine fetches it (a job waiting
 * to be fetched is guilty of nothing), a progress report restarts it (at
 * most NEURON_JOB_MAX_TIMEOUTS timeouts after the fetch), and the watchdog
 * fails a job whose deadline passed with -ETIMEDOUT, bans its file and
 * quarantines its device BOs: the engine may still be writing them through
 * its mapping, so they are neither freed nor reused until the engine
 * completes the job (late) or detaches. Detaching revokes the mapping.
 *
 * Detaching (DETACH, or the attaching process closing the file or dying)
 * fails every compute job submitted while that engine was attached and not
 * completed: fetched, waiting to be fetched, or still queued in the
 * scheduler (those when it gets to them). None runs for a later engine.
 *
 * A job the engine leaves unfetched for NEURON_JOB_MAX_TIMEOUTS timeouts
 * fails with -ENODEV, as if no engine were attached: nobody is banned, and
 * neither the job's queue nor a close() of its file (which waits for the
 * file's queued jobs to start) waits forever for an engine that takes none.
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

	kvfree(p->cmd);
	kfree(p->objs);
	kfree(p);
}

void neuron_payload_put(struct neuron_payload *payload)
{
	kref_put(&payload->ref, neuron_payload_release);
}

/* Take @job off the engine lists and signal it. */
static void neuron_engine_signal_locked(struct neuron_job *job, int error)
{
	neuron_assert_spin_held(&job->queue->ndev->engine_lock);
	list_del(&job->engine_link);
	job->on_engine = false;
	neuron_job_account(job, error);
	if (error)
		dma_fence_set_error(job->hw_fence, error);
	dma_fence_signal(job->hw_fence);
}

/*
 * Keep the device BOs of a job that overran: the job holds them, so taking
 * references allocates nothing (we are signalling fences).
 */
static void neuron_engine_quarantine_locked(struct neuron_job *job)
{
	struct neuron_device *ndev = job->queue->ndev;
	struct neuron_payload *p = job->payload;
	u32 i;

	neuron_assert_spin_held(&ndev->engine_lock);
	for (i = 0; i < p->bo_count; i++) {
		if (!neuron_bo_is_device(job->bos[i]))
			continue;
		drm_gem_object_get(job->bos[i]);
		p->objs[i] = job->bos[i];
	}
	kref_get(&p->ref);
	list_add_tail(&p->quarantine_link, &ndev->engine_quarantine);
}

/* Let the BOs of quarantined payloads go: nobody can write them now. */
static void neuron_engine_release(struct list_head *quarantine)
{
	struct neuron_payload *p, *tmp;
	u32 i;

	neuron_might_sleep();
	list_for_each_entry_safe(p, tmp, quarantine, quarantine_link) {
		list_del(&p->quarantine_link);
		for (i = 0; i < p->bo_count; i++)
			if (p->objs[i])
				drm_gem_object_put(p->objs[i]);
		neuron_payload_put(p);
	}
}

/* Have the watchdog run by @deadline (ns); it runs once for all. */
static void neuron_engine_watch_locked(struct neuron_device *ndev,
				       u64 deadline, u64 now)
{
	neuron_assert_spin_held(&ndev->engine_lock);
	if (deadline >= ndev->watchdog_at)
		return;
	ndev->watchdog_at = deadline;
	mod_delayed_work(ndev->reset_wq, &ndev->watchdog,
			 deadline > now ? nsecs_to_jiffies(deadline - now) + 1 : 0);
}

/* Fail the jobs whose deadline passed; returns the next deadline. */
static u64 neuron_engine_expire_locked(struct neuron_device *ndev, u64 now)
{
	struct neuron_job *job, *tmp;
	u64 next = U64_MAX;

	list_for_each_entry_safe(job, tmp, &ndev->engine_active, engine_link) {
		if (job->deadline_ns > now) {
			next = min(next, job->deadline_ns);
			continue;
		}
		neuron_job_overran(job);
		neuron_engine_quarantine_locked(job);
		neuron_engine_signal_locked(job, -ETIMEDOUT);
	}
	list_for_each_entry_safe(job, tmp, &ndev->engine_pending, engine_link) {
		if (job->deadline_ns > now) {
			next = min(next, job->deadline_ns);
			continue;
		}
		drm_warn(&ndev->drm,
			 "core %u: job %llu of client %llu not fetched by the engine in time: failing it with ENODEV\n",
			 job->queue->index, job->seq, job->nfile->client_id);
		neuron_engine_signal_locked(job, -ENODEV);
	}
	return next;
}

static void neuron_engine_watchdog(struct work_struct *work)
{
	struct neuron_device *ndev = container_of(to_delayed_work(work),
						  struct neuron_device, watchdog);
	u64 now = ktime_get_ns(), next;
	bool cookie;

	cookie = dma_fence_begin_signalling();
	spin_lock(&ndev->engine_lock);
	ndev->watchdog_at = U64_MAX;
	next = neuron_engine_expire_locked(ndev, now);
	if (next != U64_MAX)
		neuron_engine_watch_locked(ndev, next, now);
	spin_unlock(&ndev->engine_lock);
	dma_fence_end_signalling(cookie);
}

void neuron_engine_init(struct neuron_device *ndev)
{
	spin_lock_init(&ndev->engine_lock);
	INIT_LIST_HEAD(&ndev->engine_pending);
	INIT_LIST_HEAD(&ndev->engine_active);
	INIT_LIST_HEAD(&ndev->engine_quarantine);
	init_waitqueue_head(&ndev->engine_wq);
	INIT_DELAYED_WORK(&ndev->watchdog, neuron_engine_watchdog);
	ndev->watchdog_at = U64_MAX;
}

static u64 neuron_job_max_ns(struct neuron_device *ndev)
{
	return (u64)ndev->desc.job_timeout_ms * NSEC_PER_MSEC *
	       NEURON_JOB_MAX_TIMEOUTS;
}

/* Start or restart the timeout of a fetched job. */
static void neuron_engine_arm_locked(struct neuron_job *job, u64 now)
{
	struct neuron_device *ndev = job->queue->ndev;
	u64 timeout = (u64)ndev->desc.job_timeout_ms * NSEC_PER_MSEC;

	job->deadline_ns = min(now + timeout,
			       job->start_ns + neuron_job_max_ns(ndev));
	neuron_engine_watch_locked(ndev, job->deadline_ns, now);
}

/* run_job of a core queue. */
struct dma_fence *neuron_engine_run(struct neuron_job *job)
{
	struct neuron_device *ndev = job->queue->ndev;
	struct dma_fence *fence;
	u64 now;

	spin_lock(&ndev->engine_lock);
	if (!ndev->engine || job->engine_era != ndev->engine_era) {
		bool stale = job->engine_era != ndev->engine_era;

		spin_unlock(&ndev->engine_lock);
		drm_dbg(&ndev->drm,
			"core %u: job %llu of client %llu: %s, failing with ENODEV\n",
			job->queue->index, job->seq, job->nfile->client_id,
			stale ? "submitted for an engine that detached" :
				"no engine attached");
		neuron_job_account(job, -ENODEV);
		return ERR_PTR(-ENODEV);
	}
	neuron_job_start_fence(job);
	job->engine_id = ++ndev->next_job_id;
	job->payload->engine_id = job->engine_id;
	job->on_engine = true;
	list_add_tail(&job->engine_link, &ndev->engine_pending);
	now = ktime_get_ns();
	job->deadline_ns = now + neuron_job_max_ns(ndev);	/* to be fetched */
	neuron_engine_watch_locked(ndev, job->deadline_ns, now);
	fence = dma_fence_get(job->hw_fence);
	spin_unlock(&ndev->engine_lock);
	wake_up_interruptible_all(&ndev->engine_wq);
	return fence;
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

/*
 * Fail every job the engine holds with -ENODEV and hand its quarantine to
 * the caller, who revokes the mapping (neuron_hbm_revoke()) before letting
 * the quarantined BOs go. A new era begins: jobs submitted before now and
 * not yet handed to the engine (behind another job of their queue, or
 * waiting for a fence) fail with -ENODEV when the scheduler runs them, even
 * if another engine attached meanwhile. A job submitted for one engine is
 * never run by the next: that engine (a restarted neurond) knows nothing of
 * the commands its predecessor had in flight.
 */
static void neuron_engine_detach_locked(struct neuron_device *ndev,
					struct list_head *quarantine)
{
	struct neuron_job *job, *tmp;

	neuron_assert_spin_held(&ndev->engine_lock);
	ndev->engine = NULL;
	ndev->engine_owner = NULL;
	ndev->engine_era++;
	list_for_each_entry_safe(job, tmp, &ndev->engine_active, engine_link)
		neuron_engine_signal_locked(job, -ENODEV);
	list_for_each_entry_safe(job, tmp, &ndev->engine_pending, engine_link)
		neuron_engine_signal_locked(job, -ENODEV);
	list_splice_init(&ndev->engine_quarantine, quarantine);
}

/* Detach if @nfile is the engine and @owner (NULL: anyone) attached it. */
static void neuron_engine_detach(struct neuron_file *nfile, const void *owner)
{
	struct neuron_device *ndev = nfile->ndev;
	LIST_HEAD(quarantine);
	bool detached = false;
	bool cookie;

	cookie = dma_fence_begin_signalling();
	spin_lock(&ndev->engine_lock);
	if (ndev->engine == nfile && (!owner || ndev->engine_owner == owner)) {
		neuron_engine_detach_locked(ndev, &quarantine);
		detached = true;
	}
	spin_unlock(&ndev->engine_lock);
	dma_fence_end_signalling(cookie);
	if (!detached)
		return;
	wake_up_interruptible_all(&ndev->engine_wq);
	neuron_hbm_revoke(ndev);
	neuron_engine_release(&quarantine);
	drm_dbg(&ndev->drm, "engine detached (client %llu)\n", nfile->client_id);
}

/* The last reference to the file is gone. */
void neuron_engine_file_close(struct neuron_file *nfile)
{
	neuron_engine_detach(nfile, NULL);
}

/* A descriptor of the file is being closed by the process with @owner. */
void neuron_engine_file_flush(struct neuron_file *nfile, const void *owner)
{
	neuron_engine_detach(nfile, owner);
}

int neuron_ioctl_engine_attach(struct drm_device *drm, void *data,
			       struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_engine_attach *args = data;
	int ret = 0;

	if (args->flags & ~DRM_NEURON_ENGINE_DETACH || args->pad)
		return -EINVAL;

	if (args->flags & DRM_NEURON_ENGINE_DETACH) {
		spin_lock(&ndev->engine_lock);
		if (ndev->engine != nfile)
			ret = -EINVAL;
		spin_unlock(&ndev->engine_lock);
		if (!ret)
			neuron_engine_detach(nfile, NULL);
	} else {
		spin_lock(&ndev->engine_lock);
		if (ndev->engine && ndev->engine != nfile) {
			ret = -EBUSY;
		} else {
			ndev->engine = nfile;
			ndev->engine_owner = current->files;
		}
		spin_unlock(&ndev->engine_lock);
		if (!ret)
			drm_dbg(drm, "engine attached (client %llu)\n",
				nfile->client_id);
	}
	if (ret)
		return ret;
	args->hbm_size = ndev->hbm.size;
	args->hbm_mmap_offset = drm_vma_node_offset_addr(&ndev->hbm.vma);
	return 0;
}

static struct neuron_job *neuron_engine_first(struct neuron_device *ndev,
					      u64 mask)
{
	struct neuron_job *job;

	neuron_assert_spin_held(&ndev->engine_lock);
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

/*
 * Move the job with @id from pending to active and start its timeout; false
 * if it went away meanwhile.
 */
static bool neuron_engine_claim(struct neuron_device *ndev, u64 id)
{
	struct neuron_job *job;
	u64 now = ktime_get_ns();

	neuron_assert_spin_held(&ndev->engine_lock);
	list_for_each_entry(job, &ndev->engine_pending, engine_link) {
		if (job->engine_id == id) {
			list_move_tail(&job->engine_link, &ndev->engine_active);
			job->start_ns = now;
			neuron_engine_arm_locked(job, now);
			return true;
		}
	}
	return false;
}

/* The next job for @mask, described in @out with its payload referenced. */
static struct neuron_payload *
neuron_engine_peek(struct neuron_device *ndev, struct neuron_file *nfile,
		   u64 mask, struct drm_neuron_engine_fetch *out, int *ret)
{
	struct neuron_payload *p = NULL;
	struct neuron_job *job;

	spin_lock(&ndev->engine_lock);
	if (ndev->engine != nfile) {
		*ret = -EPERM;
	} else {
		job = neuron_engine_first(ndev, mask);
		if (job) {
			p = job->payload;
			kref_get(&p->ref);
			out->job_id = job->engine_id;
			out->client_id = job->nfile->client_id;
			out->job_seq = job->seq;
			out->core = job->queue->index;
		}
	}
	spin_unlock(&ndev->engine_lock);
	return p;
}

int neuron_ioctl_engine_fetch(struct drm_device *drm, void *data,
			      struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_engine_fetch *args = data;
	u64 mask = args->core_mask ? args->core_mask : U64_MAX;
	struct drm_neuron_engine_fetch out;
	struct neuron_payload *p;
	long timeout;
	bool claimed;
	int ret = 0;

	if (args->flags || args->pad ||
	    args->bo_stride < sizeof(struct drm_neuron_engine_bo) ||
	    args->bo_stride > DRM_NEURON_MAX_STRIDE)
		return -EINVAL;
	timeout = drm_timeout_abs_to_jiffies(args->timeout_ns);

	for (;;) {
		out = *args;
		p = neuron_engine_peek(ndev, nfile, mask, &out, &ret);
		if (ret)
			return ret;
		if (p) {
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
			continue;	/* it went away meanwhile */
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

/* The quarantined payload of job @id, taken off the quarantine, or NULL. */
static struct neuron_payload *
neuron_engine_unquarantine_locked(struct neuron_device *ndev, u64 id)
{
	struct neuron_payload *p;

	neuron_assert_spin_held(&ndev->engine_lock);
	list_for_each_entry(p, &ndev->engine_quarantine, quarantine_link) {
		if (p->engine_id == id) {
			list_del(&p->quarantine_link);
			return p;
		}
	}
	return NULL;
}

static int neuron_engine_complete_locked(struct neuron_device *ndev,
					 const struct drm_neuron_engine_complete *args,
					 struct list_head *released)
{
	struct neuron_payload *late;
	struct neuron_job *job;

	neuron_assert_spin_held(&ndev->engine_lock);
	list_for_each_entry(job, &ndev->engine_active, engine_link) {
		if (job->engine_id != args->job_id)
			continue;
		if (args->flags & DRM_NEURON_ENGINE_PROGRESS)
			neuron_engine_arm_locked(job, ktime_get_ns());
		else
			neuron_engine_signal_locked(job, args->status);
		return 0;
	}
	/* Late: the job overran; the engine is done with its memory now. */
	late = neuron_engine_unquarantine_locked(ndev, args->job_id);
	if (late)
		list_add(&late->quarantine_link, released);
	return -ENOENT;
}

int neuron_ioctl_engine_complete(struct drm_device *drm, void *data,
				 struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_engine_complete *args = data;
	LIST_HEAD(released);
	bool cookie;
	int ret;

	if (args->flags & ~DRM_NEURON_ENGINE_PROGRESS ||
	    args->status > 0 || args->status < -MAX_ERRNO ||
	    (args->flags && args->status))
		return -EINVAL;

	cookie = dma_fence_begin_signalling();
	spin_lock(&ndev->engine_lock);
	if (ndev->engine != nfile)
		ret = -EPERM;
	else
		ret = neuron_engine_complete_locked(ndev, args, &released);
	spin_unlock(&ndev->engine_lock);
	dma_fence_end_signalling(cookie);
	neuron_engine_release(&released);
	return ret;
}
