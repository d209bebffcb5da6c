// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Who may use what. A file starts with no core and no DMA queue; the
 * controller (CAP_SYS_ADMIN: DRM_ROOT_ONLY in the ioctl table) grants them
 * with SET_CORE_MASK and may put the file into a tenant, an id of its own
 * for one user of the device. A job that overruns the timeout bans its file
 * and the file's tenant. The device keeps a banned tenant alive, so a file
 * the controller later puts into the same tenant is banned from the start:
 * opening the node again escapes neither a mask nor a ban. Only the
 * controller lifts a ban.
 *
 * Why per tenant and not per opener: the opener of every file is neurond, so
 * a ban per pid or cred would ban every tenant at once; only the controller
 * knows which files belong to one user.
 */
#include <linux/file.h>
#include <linux/slab.h>
#include <drm/drm_drv.h>
#include <drm/drm_print.h>

#include "neuron_drv.h"

/* The tenant with @id, created on first use; NULL-free: ERR_PTR on error. */
static struct neuron_tenant *neuron_tenant_get(struct neuron_device *ndev,
					       u64 id)
{
	struct neuron_tenant *t;
	int ret;

	if ((unsigned long)id != id)
		return ERR_PTR(-EINVAL);
	mutex_lock(&ndev->tenants_lock);
	t = xa_load(&ndev->tenants, id);
	if (t) {
		/* Nonzero: the last put erases it under tenants_lock. */
		refcount_inc(&t->ref);
		goto out;
	}
	t = kzalloc(sizeof(*t), GFP_KERNEL_ACCOUNT);
	if (!t) {
		t = ERR_PTR(-ENOMEM);
		goto out;
	}
	refcount_set(&t->ref, 1);
	t->id = id;
	ret = xa_err(xa_store(&ndev->tenants, id, t, GFP_KERNEL));
	if (ret) {
		kfree(t);
		t = ERR_PTR(ret);
	}
out:
	mutex_unlock(&ndev->tenants_lock);
	return t;
}

static void neuron_tenant_put(struct neuron_device *ndev,
			      struct neuron_tenant *t)
{
	if (!refcount_dec_and_mutex_lock(&t->ref, &ndev->tenants_lock))
		return;
	xa_erase(&ndev->tenants, t->id);
	mutex_unlock(&ndev->tenants_lock);
	kfree(t);
}

/* A banned tenant holds a reference of its own: it outlives its files. */
static void neuron_tenant_ban(struct neuron_tenant *t)
{
	if (atomic_cmpxchg(&t->banned, 0, 1) == 0)
		refcount_inc(&t->ref);
}

static void neuron_tenant_lift_ban(struct neuron_device *ndev,
				   struct neuron_tenant *t)
{
	if (atomic_cmpxchg(&t->banned, 1, 0) == 1)
		neuron_tenant_put(ndev, t);
}

/* At device teardown, every file is gone: what is left is banned. */
void neuron_tenants_fini(struct neuron_device *ndev)
{
	struct neuron_tenant *t;
	unsigned long id;

	xa_for_each(&ndev->tenants, id, t)
		kfree(t);
	xa_destroy(&ndev->tenants);
	mutex_destroy(&ndev->tenants_lock);
}

/* When the last reference to the file context goes. */
void neuron_file_access_fini(struct neuron_file *nfile)
{
	if (nfile->tenant)
		neuron_tenant_put(nfile->ndev, nfile->tenant);
}

bool neuron_file_banned(struct neuron_file *nfile)
{
	struct neuron_tenant *t = READ_ONCE(nfile->tenant);

	return atomic_read(&nfile->banned) || (t && atomic_read(&t->banned));
}

/*
 * Ban the file, then its tenant. Joining a tenant sets the tenant, then reads
 * the file's ban: with the barriers, one of the two sees the other.
 */
static void neuron_file_ban(struct neuron_file *nfile)
{
	struct neuron_tenant *t;

	atomic_set(&nfile->banned, 1);
	smp_mb__after_atomic();	/* pairs with the cmpxchg in neuron_file_join() */
	t = READ_ONCE(nfile->tenant);
	if (t)
		neuron_tenant_ban(t);
}

static int neuron_file_join(struct neuron_file *nfile, u64 id)
{
	struct neuron_tenant *t, *cur;

	t = neuron_tenant_get(nfile->ndev, id);
	if (IS_ERR(t))
		return PTR_ERR(t);
	cur = cmpxchg(&nfile->tenant, NULL, t);	/* full barrier */
	if (cur) {
		neuron_tenant_put(nfile->ndev, t);
		return cur->id == id ? 0 : -EINVAL;
	}
	if (atomic_read(&nfile->banned))
		neuron_tenant_ban(t);
	return 0;
}

static void neuron_file_lift_ban(struct neuron_file *nfile)
{
	struct neuron_tenant *t = READ_ONCE(nfile->tenant);

	atomic_set(&nfile->banned, 0);
	if (t)
		neuron_tenant_lift_ban(nfile->ndev, t);
}

/**
 * neuron_queue_allowed - may the file submit to the queue?
 * @nfile: submitting file
 * @q: core or DMA queue
 *
 * Return: 0, or -EACCES outside the file's core or DMA queue mask.
 */
int neuron_queue_allowed(struct neuron_file *nfile, struct neuron_queue *q)
{
	atomic64_t *mask = q->type == DRM_NEURON_QUEUE_CORE ? &nfile->core_mask :
							      &nfile->dma_mask;

	return atomic64_read(mask) & BIT_ULL(q->index) ? 0 : -EACCES;
}

/**
 * neuron_job_overran - the job overran the timeout: count a reset of its
 * queue and ban its file and tenant
 * @job: the guilty job; its fence is about to fail with -ETIMEDOUT
 *
 * Allocates nothing: called while fences are being signalled.
 */
void neuron_job_overran(struct neuron_job *job)
{
	struct neuron_queue *q = job->queue;
	struct neuron_file *nfile = job->nfile;
	struct neuron_tenant *t = READ_ONCE(nfile->tenant);

	atomic64_inc(&q->resets);
	atomic64_inc(&q->ndev->reset_count);
	atomic64_inc(&nfile->guilty_jobs);
	neuron_file_ban(nfile);
	drm_warn(&q->ndev->drm,
		 "%s: job %llu of client %llu (tenant %llu) overran %u ms: queue reset, banned\n",
		 q->name, job->seq, nfile->client_id, t ? t->id : 0,
		 q->ndev->desc.job_timeout_ms);
}

static int neuron_set_mask_check(struct neuron_device *ndev,
				 const struct drm_neuron_set_core_mask *args)
{
	const struct neuron_hw_desc *d = &ndev->desc;
	u32 known = DRM_NEURON_MASK_DMA | DRM_NEURON_MASK_TENANT |
		    DRM_NEURON_MASK_LIFT_BAN;
	bool dma = args->flags & DRM_NEURON_MASK_DMA;
	bool tenant = args->flags & DRM_NEURON_MASK_TENANT;

	if (args->flags & ~known ||
	    args->core_mask & ~GENMASK_ULL(d->num_cores - 1, 0) ||
	    args->dma_mask & ~(dma ? GENMASK_ULL(d->num_dma_queues - 1, 0) : 0) ||
	    tenant != !!args->tenant_id)
		return -EINVAL;
	return 0;
}

/* SET_CORE_MASK (DRM_ROOT_ONLY): grant a file of this device its queues. */
int neuron_ioctl_set_core_mask(struct drm_device *drm, void *data,
			       struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct drm_neuron_set_core_mask *args = data;
	struct neuron_file *nfile;
	struct drm_file *target;
	struct file *filp;
	int ret;

	ret = neuron_set_mask_check(ndev, args);
	if (ret)
		return ret;
	filp = fget(args->fd);
	if (!filp)
		return -EBADF;
	target = filp->private_data;
	if (filp->f_op != drm->driver->fops || !target ||
	    target->minor->dev != drm) {
		ret = -EINVAL;
		goto out;
	}
	nfile = target->driver_priv;
	if (args->flags & DRM_NEURON_MASK_TENANT) {
		ret = neuron_file_join(nfile, args->tenant_id);
		if (ret)
			goto out;
	}
	atomic64_set(&nfile->core_mask, args->core_mask);
	if (args->flags & DRM_NEURON_MASK_DMA)
		atomic64_set(&nfile->dma_mask, args->dma_mask);
	if (args->flags & DRM_NEURON_MASK_LIFT_BAN)
		neuron_file_lift_ban(nfile);
	drm_dbg(drm, "client %llu: cores %#llx, DMA queues %#llx, tenant %llu\n",
		target->client_id, args->core_mask,
		(u64)atomic64_read(&nfile->dma_mask), args->tenant_id);
out:
	fput(filp);
	return ret;
}
