// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * DRM_IOCTL_NEURON_SUBMIT: validate, look up, allocate everything, then arm
 * and push the job. Nothing can fail after drm_sched_job_arm(). Memory of
 * the job, and the HBM pages it needs, are charged to the memory cgroup of
 * the file's opener.
 */
#include <linux/dma-fence-chain.h>
#include <linux/dma-resv.h>
#include <linux/overflow.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <drm/drm_drv.h>
#include <drm/drm_syncobj.h>

#include "neuron_drv.h"

/**
 * struct neuron_syncs - syncobjs of one submit
 * @in: in-syncs
 * @out: out-syncs
 * @objs: syncobj of each out-sync
 * @chains: preallocated chain node of each timeline out-sync
 */
struct neuron_syncs {
	struct drm_neuron_sync *in;
	struct drm_neuron_sync *out;
	struct drm_syncobj **objs;
	struct dma_fence_chain **chains;
};

/* Read @count elements of @stride bytes into @dst, @size bytes each. */
static int neuron_copy_array(void *dst, size_t size, u64 uptr, u32 count,
			     u32 stride)
{
	u32 i;
	int ret;

	for (i = 0; i < count; i++) {
		ret = copy_struct_from_user(dst + i * size, size,
					    u64_to_user_ptr(uptr + (u64)i * stride),
					    stride);
		if (ret)
			return ret == -E2BIG ? -EINVAL : ret;
	}
	return 0;
}

static bool neuron_stride_ok(u32 count, u32 stride, size_t v1)
{
	return !count || (stride >= v1 && stride <= DRM_NEURON_MAX_STRIDE);
}

static int neuron_submit_check(struct neuron_device *ndev,
			       struct neuron_file *nfile,
			       const struct drm_neuron_submit *args,
			       struct neuron_queue **queue)
{
	const struct neuron_hw_desc *d = &ndev->desc;

	if (args->flags || args->pad ||
	    args->bo_count > DRM_NEURON_MAX_SUBMIT_BOS ||
	    args->in_sync_count > DRM_NEURON_MAX_SUBMIT_SYNCS ||
	    args->out_sync_count > DRM_NEURON_MAX_SUBMIT_SYNCS ||
	    !neuron_stride_ok(args->bo_count, args->bo_stride, 8) ||
	    !neuron_stride_ok(args->in_sync_count + args->out_sync_count,
			      args->sync_stride, 16))
		return -EINVAL;

	switch (args->queue_type) {
	case DRM_NEURON_QUEUE_CORE:
		if (args->queue_index >= d->num_cores || !args->cmd_size ||
		    args->cmd_size > NEURON_MAX_CMD_SIZE || args->copies ||
		    args->copy_count || args->copy_stride)
			return -EINVAL;
		*queue = &ndev->queues[args->queue_index];
		break;
	case DRM_NEURON_QUEUE_DMA:
		if (args->queue_index >= d->num_dma_queues || args->cmd ||
		    args->cmd_size || !args->copy_count ||
		    args->copy_count > DRM_NEURON_MAX_DMA_COPIES ||
		    !neuron_stride_ok(args->copy_count, args->copy_stride,
				      sizeof(struct drm_neuron_dma_copy)))
			return -EINVAL;
		*queue = &ndev->queues[d->num_cores + args->queue_index];
		break;
	default:
		return -EINVAL;
	}
	return neuron_queue_allowed(nfile, *queue);
}

static int neuron_job_lookup_bos(struct neuron_job *job, struct drm_file *file,
				 const struct drm_neuron_submit *args)
{
	struct drm_neuron_submit_bo *ubos;
	u32 i, j;
	int ret;

	job->bo_count = args->bo_count;
	if (!job->bo_count)
		return 0;
	job->bos = kcalloc(job->bo_count, sizeof(*job->bos), NEURON_GFP_JOB);
	job->bo_access = kcalloc(job->bo_count, sizeof(*job->bo_access),
				 NEURON_GFP_JOB);
	ubos = kcalloc(job->bo_count, sizeof(*ubos), GFP_KERNEL);
	if (!job->bos || !job->bo_access || !ubos) {
		ret = -ENOMEM;
		goto out;
	}
	ret = neuron_copy_array(ubos, sizeof(*ubos), args->bos, job->bo_count,
				args->bo_stride);
	if (ret)
		goto out;
	for (i = 0; i < job->bo_count; i++) {
		u32 flags = ubos[i].flags;

		if (!flags || flags & ~(DRM_NEURON_BO_ACCESS_READ |
					DRM_NEURON_BO_ACCESS_WRITE)) {
			ret = -EINVAL;
			goto out;
		}
		job->bo_access[i] = flags;
	}
	for (i = 0; i < job->bo_count; i++) {
		job->bos[i] = drm_gem_object_lookup(file, ubos[i].handle);
		if (!job->bos[i]) {
			ret = -ENOENT;
			goto out;
		}
		for (j = 0; j < i; j++) {
			if (job->bos[j] == job->bos[i]) {
				ret = -EINVAL;
				goto out;
			}
		}
	}
out:
	kfree(ubos);
	return ret;
}

static bool neuron_range_ok(struct drm_gem_object *obj, u64 offset, u64 size)
{
	return size <= obj->size && offset <= obj->size - size;
}

/* A copy inside its BOs, with the right access, and not overlapping itself. */
static bool neuron_copy_ok(struct neuron_job *job,
			   const struct drm_neuron_dma_copy *c)
{
	if (c->src_bo >= job->bo_count || c->dst_bo >= job->bo_count ||
	    !(job->bo_access[c->src_bo] & DRM_NEURON_BO_ACCESS_READ) ||
	    !(job->bo_access[c->dst_bo] & DRM_NEURON_BO_ACCESS_WRITE) ||
	    !c->size ||
	    !neuron_range_ok(job->bos[c->src_bo], c->src_offset, c->size) ||
	    !neuron_range_ok(job->bos[c->dst_bo], c->dst_offset, c->size))
		return false;
	return c->src_bo != c->dst_bo ||
	       c->src_offset >= c->dst_offset + c->size ||
	       c->dst_offset >= c->src_offset + c->size;
}

static int neuron_job_check_copies(struct neuron_job *job)
{
	u64 total = 0;
	u32 i;

	for (i = 0; i < job->copy_count; i++) {
		const struct drm_neuron_dma_copy *c = &job->copies[i];

		/* Sizes are within BOs (< 2^63): the sum cannot wrap. */
		if (!neuron_copy_ok(job, c))
			return -EINVAL;
		total += c->size;
		if (total > NEURON_MAX_DMA_JOB_BYTES)
			return -EINVAL;
	}
	return 0;
}

static int neuron_job_prepare_dma(struct neuron_job *job,
				  const struct drm_neuron_submit *args)
{
	u32 i;
	int ret;

	job->copy_count = args->copy_count;
	job->copies = kcalloc(job->copy_count, sizeof(*job->copies),
			      NEURON_GFP_JOB);
	if (!job->copies)
		return -ENOMEM;
	ret = neuron_copy_array(job->copies, sizeof(*job->copies), args->copies,
				job->copy_count, args->copy_stride);
	if (!ret)
		ret = neuron_job_check_copies(job);
	if (ret)
		return ret;

	/* Map the host BOs; back the HBM the copies will write. */
	job->maps = kcalloc(job->bo_count, sizeof(*job->maps),
			    NEURON_GFP_JOB);
	if (!job->maps)
		return -ENOMEM;
	for (i = 0; i < job->bo_count; i++) {
		if (neuron_bo_is_device(job->bos[i]))
			continue;
		ret = drm_gem_vmap_unlocked(job->bos[i], &job->maps[i]);
		if (ret)
			return ret;
		if (job->maps[i].is_iomem)
			return -EOPNOTSUPP;
	}
	for (i = 0; i < job->copy_count; i++) {
		const struct drm_neuron_dma_copy *c = &job->copies[i];
		struct drm_gem_object *dst = job->bos[c->dst_bo];

		if (!neuron_bo_is_device(dst))
			continue;
		ret = neuron_bo_populate(dst, c->dst_offset, c->size);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * The engine gets a private copy of the commands and the BO list. Every
 * device BO is backed whole now: the engine's mapping shows only backed
 * pages, and backing them on the engine's page faults would charge the
 * engine and block it on allocations.
 */
static int neuron_job_prepare_compute(struct neuron_job *job,
				      const struct drm_neuron_submit *args)
{
	struct neuron_payload *p;
	u32 i;
	int ret;

	p = kzalloc(struct_size(p, bos, job->bo_count), NEURON_GFP_JOB);
	if (!p)
		return -ENOMEM;
	kref_init(&p->ref);
	INIT_LIST_HEAD(&p->quarantine_link);
	p->bo_count = job->bo_count;
	job->payload = p;
	p->objs = kcalloc(job->bo_count, sizeof(*p->objs), NEURON_GFP_JOB);
	p->cmd = kvmalloc(args->cmd_size, NEURON_GFP_JOB);
	if (!p->objs || !p->cmd)
		return -ENOMEM;
	if (copy_from_user(p->cmd, u64_to_user_ptr(args->cmd), args->cmd_size))
		return -EFAULT;
	p->cmd_size = args->cmd_size;
	for (i = 0; i < job->bo_count; i++) {
		struct drm_gem_object *obj = job->bos[i];
		bool dev = neuron_bo_is_device(obj);

		p->bos[i].device_addr = neuron_bo_device_addr(obj);
		p->bos[i].size = obj->size;
		p->bos[i].access = job->bo_access[i];
		p->bos[i].bo_flags = dev ? DRM_NEURON_BO_DEVICE : 0;
		if (!dev)
			continue;
		ret = neuron_bo_populate(obj, 0, obj->size);
		if (ret)
			return ret;
	}
	return 0;
}

static void neuron_syncs_fini(struct neuron_syncs *s, u32 out_count)
{
	u32 i;

	for (i = 0; s->objs && s->chains && i < out_count; i++) {
		if (s->objs[i])
			drm_syncobj_put(s->objs[i]);
		dma_fence_chain_free(s->chains[i]);
	}
	kfree(s->objs);
	kfree(s->chains);
	kfree(s->in);
	kfree(s->out);
}

static int neuron_syncs_prepare(struct neuron_syncs *s, struct drm_file *file,
				const struct drm_neuron_submit *args)
{
	u32 i, n_in = args->in_sync_count, n_out = args->out_sync_count;
	int ret;

	s->in = kcalloc(n_in, sizeof(*s->in), NEURON_GFP_JOB);
	s->out = kcalloc(n_out, sizeof(*s->out), NEURON_GFP_JOB);
	s->objs = kcalloc(n_out, sizeof(*s->objs), NEURON_GFP_JOB);
	s->chains = kcalloc(n_out, sizeof(*s->chains), NEURON_GFP_JOB);
	if (!s->in || !s->out || !s->objs || !s->chains)
		return -ENOMEM;
	ret = neuron_copy_array(s->in, sizeof(*s->in), args->in_syncs, n_in,
				args->sync_stride);
	if (!ret)
		ret = neuron_copy_array(s->out, sizeof(*s->out), args->out_syncs,
					n_out, args->sync_stride);
	if (ret)
		return ret;
	for (i = 0; i < n_in; i++)
		if (s->in[i].flags)
			return -EINVAL;
	for (i = 0; i < n_out; i++) {
		if (s->out[i].flags)
			return -EINVAL;
		s->objs[i] = drm_syncobj_find(file, s->out[i].handle);
		if (!s->objs[i])
			return -ENOENT;
		if (s->out[i].point) {
			s->chains[i] = dma_fence_chain_alloc();
			if (!s->chains[i])
				return -ENOMEM;
		}
	}
	return 0;
}

/* Dependencies: explicit in-syncs, then implicit ones from the BOs. */
static int neuron_job_add_deps(struct neuron_job *job, struct drm_file *file,
			       struct neuron_syncs *s, u32 n_in)
{
	struct dma_fence *fence;
	u32 i;
	int ret;

	for (i = 0; i < n_in; i++) {
		ret = drm_syncobj_find_fence(file, s->in[i].handle,
					     s->in[i].point, 0, &fence);
		if (ret)
			return ret;
		ret = drm_sched_job_add_dependency(&job->base, fence);
		if (ret)
			return ret;
	}
	for (i = 0; i < job->bo_count; i++) {
		bool write = job->bo_access[i] & DRM_NEURON_BO_ACCESS_WRITE;

		ret = dma_resv_reserve_fences(job->bos[i]->resv, 1);
		if (ret)
			return ret;
		ret = drm_sched_job_add_implicit_dependencies(&job->base,
							      job->bos[i], write);
		if (ret)
			return ret;
	}
	return 0;
}

/* Arm and push under the file lock so that queue order is submit order. */
static int neuron_job_push(struct neuron_job *job, struct drm_file *file,
			   struct neuron_syncs *s,
			   const struct drm_neuron_submit *args, u64 *seq)
{
	struct neuron_file *nfile = job->nfile;
	struct ww_acquire_ctx ctx;
	struct neuron_entity *ent;
	struct dma_fence *fence;
	u32 i;
	int ret;

	mutex_lock(&nfile->lock);
	ent = neuron_file_entity(nfile, job->queue);
	if (IS_ERR(ent)) {
		ret = PTR_ERR(ent);
		goto out_unlock;
	}
	ret = neuron_sched_job_init(&job->base, &ent->base, nfile,
				    nfile->client_id);
	if (ret)
		goto out_unlock;

	ret = drm_gem_lock_reservations(job->bos, job->bo_count, &ctx);
	if (ret)
		goto out_cleanup;
	ret = neuron_job_add_deps(job, file, s, args->in_sync_count);
	if (ret) {
		drm_gem_unlock_reservations(job->bos, job->bo_count, &ctx);
		goto out_cleanup;
	}

	/* Point of no return. */
	drm_sched_job_arm(&job->base);
	job->seq = atomic64_inc_return(&job->queue->submit_seq);
	*seq = job->seq;
	fence = &job->base.s_fence->finished;
	for (i = 0; i < job->bo_count; i++)
		dma_resv_add_fence(job->bos[i]->resv, fence,
				   job->bo_access[i] & DRM_NEURON_BO_ACCESS_WRITE ?
				   DMA_RESV_USAGE_WRITE : DMA_RESV_USAGE_READ);
	drm_gem_unlock_reservations(job->bos, job->bo_count, &ctx);

	for (i = 0; i < args->out_sync_count; i++) {
		if (s->out[i].point) {
			drm_syncobj_add_point(s->objs[i], s->chains[i], fence,
					      s->out[i].point);
			s->chains[i] = NULL;
		} else {
			drm_syncobj_replace_fence(s->objs[i], fence);
		}
	}
	drm_sched_entity_push_job(&job->base);
	mutex_unlock(&nfile->lock);
	return 0;

out_cleanup:
	drm_sched_job_cleanup(&job->base);
out_unlock:
	mutex_unlock(&nfile->lock);
	return ret;
}

static int neuron_submit(struct drm_file *file, struct neuron_queue *queue,
			 struct drm_neuron_submit *args)
{
	struct neuron_file *nfile = file->driver_priv;
	struct neuron_syncs syncs = {};
	struct neuron_job *job;
	u64 seq = 0;
	int ret;

	job = neuron_job_alloc(nfile, queue);
	if (IS_ERR(job))
		return PTR_ERR(job);
	ret = neuron_job_lookup_bos(job, file, args);
	if (ret)
		goto out_free;
	if (queue->type == DRM_NEURON_QUEUE_DMA)
		ret = neuron_job_prepare_dma(job, args);
	else
		ret = neuron_job_prepare_compute(job, args);
	if (ret)
		goto out_free;
	ret = neuron_syncs_prepare(&syncs, file, args);
	if (ret)
		goto out_free;

	ret = neuron_job_push(job, file, &syncs, args, &seq);
	if (ret)
		goto out_free;
	args->job_seq = seq;
	goto out_syncs;

out_free:
	neuron_job_free(job);
out_syncs:
	neuron_syncs_fini(&syncs, args->out_sync_count);
	return ret;
}

int neuron_ioctl_submit(struct drm_device *drm, void *data,
			struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_submit *args = data;
	struct neuron_queue *queue;
	struct mem_cgroup *old;
	int ret, idx;

	neuron_might_sleep();
	ret = neuron_submit_check(ndev, nfile, args, &queue);
	if (ret)
		return ret;
	if (neuron_file_banned(nfile))
		return -ECANCELED;
	if (!drm_dev_enter(drm, &idx))
		return -ENODEV;
	old = set_active_memcg(nfile->memcg);
	ret = neuron_submit(file, queue, args);
	set_active_memcg(old);
	drm_dev_exit(idx);
	return ret;
}
