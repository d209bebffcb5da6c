// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Buffer objects: host BOs are shmem GEM objects (mmap-able, PRIME); device
 * BOs are ranges of HBM with no CPU mapping for tenants. A device BO exports
 * as a dma-buf that only files of the same device can import (the daemon
 * names BOs of several tenants in one job that way); nothing else may attach
 * to it, map it or access it with the CPU.
 */
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
#include <linux/memcontrol.h>
#include <linux/slab.h>
#include <drm/drm_drv.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_prime.h>
#include <drm/drm_utils.h>

#include "neuron_drv.h"

/**
 * struct neuron_hbm_bo - a device BO
 * @base: GEM object without backing file
 * @node: the HBM range
 * @populated: every page of @node is backed (pages only go when the BO does)
 * @memcg: memory cgroup of the creating file's opener (a reference), or NULL
 * @owner: DRM client id of the creating file
 *
 * Accounting of a shared BO stays with its creator: its HBM pages are
 * charged to @memcg whichever file's job backs them (an importing file,
 * neurond's, is not charged for a tenant's BO), and fdinfo's drm-memory-hbm
 * of a file counts only the device BOs it created (see neuron_show_fdinfo()),
 * so summing it over files counts every BO once. The device-wide counters
 * (HBM used, BO count) count every BO once anyway.
 */
struct neuron_hbm_bo {
	struct drm_gem_object base;
	struct drm_mm_node node;
	bool populated;
	struct mem_cgroup *memcg;
	u64 owner;
};

static void neuron_hbm_bo_free(struct drm_gem_object *obj)
{
	struct neuron_hbm_bo *bo = container_of(obj, struct neuron_hbm_bo, base);

	neuron_hbm_free(to_neuron_device(obj->dev), &bo->node);
	mem_cgroup_put(bo->memcg);
	drm_gem_object_release(obj);
	kfree(bo);
}

/*
 * dma-buf of a device BO: a token that files of the same device import (see
 * neuron_gem_prime_import()). HBM has no struct pages nor DMA addresses for
 * another device, and tenants never map it, so everything else is refused:
 * attach (any importer but ourselves) fails with EOPNOTSUPP, map_dma_buf
 * likewise (unreachable without an attachment), begin/end_cpu_access
 * (DMA_BUF_IOCTL_SYNC) with EOPNOTSUPP; without .mmap and .vmap the dma-buf
 * core fails mmap of the fd and dma_buf_vmap() with EINVAL.
 */
static int neuron_hbm_dmabuf_attach(struct dma_buf *dma_buf,
				    struct dma_buf_attachment *attach)
{
	return -EOPNOTSUPP;
}

static struct sg_table *neuron_hbm_dmabuf_map(struct dma_buf_attachment *attach,
					      enum dma_data_direction dir)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static void neuron_hbm_dmabuf_unmap(struct dma_buf_attachment *attach,
				    struct sg_table *sgt,
				    enum dma_data_direction dir)
{
}

static int neuron_hbm_dmabuf_cpu_access(struct dma_buf *dma_buf,
					enum dma_data_direction dir)
{
	return -EOPNOTSUPP;
}

static const struct dma_buf_ops neuron_hbm_dmabuf_ops = {
	.attach = neuron_hbm_dmabuf_attach,
	.map_dma_buf = neuron_hbm_dmabuf_map,
	.unmap_dma_buf = neuron_hbm_dmabuf_unmap,
	.begin_cpu_access = neuron_hbm_dmabuf_cpu_access,
	.end_cpu_access = neuron_hbm_dmabuf_cpu_access,
	.release = drm_gem_dmabuf_release,
};

/*
 * As drm_gem_prime_export() but with our ops: drm_gem_dmabuf_export() takes
 * the device and object references that drm_gem_dmabuf_release() drops.
 */
static struct dma_buf *neuron_hbm_bo_export(struct drm_gem_object *obj,
					    int flags)
{
	struct drm_device *dev = obj->dev;
	struct dma_buf_export_info exp_info = {
		.exp_name = KBUILD_MODNAME,
		.owner = dev->driver->fops->owner,
		.ops = &neuron_hbm_dmabuf_ops,
		.size = obj->size,
		.flags = flags,
		.priv = obj,
		.resv = obj->resv,
	};

	return drm_gem_dmabuf_export(dev, &exp_info);
}

/**
 * neuron_gem_prime_import - &drm_driver.gem_prime_import
 * @dev: device to import into
 * @dma_buf: dma-buf to import
 *
 * A device BO's dma-buf imports into a file of the device that exported it
 * as that very GEM object (a new reference, as drm_gem_prime_import_dev()
 * does for its own dma-bufs). Any other dma-buf, a device BO's of another
 * neuron device included, goes to drm_gem_prime_import(): host BOs and
 * foreign buffers (udmabuf...) become shmem objects, and a device BO's
 * dma-buf refuses the attach.
 *
 * Context: called with &drm_device.object_name_lock held.
 * Return: the GEM object (a reference) or an ERR_PTR().
 */
struct drm_gem_object *neuron_gem_prime_import(struct drm_device *dev,
					       struct dma_buf *dma_buf)
{
	struct drm_gem_object *obj = dma_buf->priv;

	if (dma_buf->ops == &neuron_hbm_dmabuf_ops && obj->dev == dev) {
		drm_gem_object_get(obj);
		return obj;
	}
	return drm_gem_prime_import(dev, dma_buf);
}

static const struct drm_gem_object_funcs neuron_hbm_bo_funcs = {
	.free = neuron_hbm_bo_free,
	.export = neuron_hbm_bo_export,
};

bool neuron_bo_is_device(struct drm_gem_object *obj)
{
	return obj->funcs == &neuron_hbm_bo_funcs;
}

/**
 * neuron_bo_owned_by - whether a file created a BO
 * @obj: any BO
 * @file: DRM file
 *
 * Return: false for a device BO @file imported from another file, else true.
 */
bool neuron_bo_owned_by(struct drm_gem_object *obj, struct drm_file *file)
{
	if (!neuron_bo_is_device(obj))
		return true;
	return container_of(obj, struct neuron_hbm_bo, base)->owner ==
	       file->client_id;
}

u64 neuron_bo_device_addr(struct drm_gem_object *obj)
{
	if (!neuron_bo_is_device(obj))
		return 0;
	return container_of(obj, struct neuron_hbm_bo, base)->node.start;
}

/**
 * neuron_bo_populate - back a byte range of a device BO with host pages
 * @obj: device BO the caller holds a reference to
 * @offset: first byte
 * @size: bytes, nonzero, inside the BO
 *
 * The pages are charged to the memory cgroup of the BO's creator, not to the
 * submitting file's: a file that imported the BO does not pay for it.
 * A BO backed whole once stays so: later calls return at once.
 *
 * Return: 0 or the error of neuron_hbm_populate().
 */
int neuron_bo_populate(struct drm_gem_object *obj, u64 offset, u64 size)
{
	struct neuron_hbm_bo *bo = container_of(obj, struct neuron_hbm_bo, base);
	int ret;

	if (READ_ONCE(bo->populated))
		return 0;
	ret = neuron_hbm_populate(&to_neuron_device(obj->dev)->hbm, bo->memcg,
				  bo->node.start + offset, size);
	if (!ret && !offset && size == obj->size)
		WRITE_ONCE(bo->populated, true);
	return ret;
}

static struct drm_gem_object *neuron_hbm_bo_create(struct neuron_device *ndev,
						   struct drm_file *file,
						   u64 size)
{
	struct neuron_file *nfile = file->driver_priv;
	struct neuron_hbm_bo *bo;
	int ret;

	if (size > ndev->hbm.size)
		return ERR_PTR(-ENOSPC);
	bo = kzalloc(sizeof(*bo), GFP_KERNEL_ACCOUNT);
	if (!bo)
		return ERR_PTR(-ENOMEM);
	ret = neuron_hbm_alloc(ndev, &bo->node, size);
	if (ret) {
		kfree(bo);
		return ERR_PTR(ret);
	}
	/* The file holds a reference to its memcg: this one cannot fail. */
	if (mem_cgroup_tryget(nfile->memcg))
		bo->memcg = nfile->memcg;
	bo->owner = file->client_id;
	bo->base.funcs = &neuron_hbm_bo_funcs;
	drm_gem_private_object_init(&ndev->drm, &bo->base, size);
	return &bo->base;
}

int neuron_ioctl_bo_create(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct drm_neuron_bo_create *args = data;
	struct drm_gem_object *obj;
	u64 size;
	int ret;

	if (args->flags & ~DRM_NEURON_BO_DEVICE || args->handle ||
	    args->device_addr || !args->size || args->size > U64_MAX - PAGE_SIZE)
		return -EINVAL;
	size = PAGE_ALIGN(args->size);

	if (args->flags & DRM_NEURON_BO_DEVICE) {
		obj = neuron_hbm_bo_create(ndev, file, size);
		if (IS_ERR(obj))
			return PTR_ERR(obj);
	} else {
		struct drm_gem_shmem_object *shmem;

		if (size > NEURON_MAX_HOST_BO_SIZE)
			return -EINVAL;
		shmem = drm_gem_shmem_create(drm, size);
		if (IS_ERR(shmem))
			return PTR_ERR(shmem);
		obj = &shmem->base;
	}

	ret = drm_gem_handle_create(file, obj, &args->handle);
	if (!ret) {
		args->size = size;
		args->device_addr = neuron_bo_device_addr(obj);
	}
	/* The handle holds the reference now (or the object goes away). */
	drm_gem_object_put(obj);
	return ret;
}

int neuron_ioctl_bo_info(struct drm_device *drm, void *data,
			 struct drm_file *file)
{
	struct drm_neuron_bo_info *args = data;
	struct drm_gem_object *obj;

	if (args->flags || args->pad)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	args->size = obj->size;
	args->device_addr = neuron_bo_device_addr(obj);
	args->bo_flags = neuron_bo_is_device(obj) ? DRM_NEURON_BO_DEVICE : 0;
	drm_gem_object_put(obj);
	return 0;
}

int neuron_ioctl_bo_mmap_offset(struct drm_device *drm, void *data,
				struct drm_file *file)
{
	struct drm_neuron_bo_mmap_offset *args = data;
	struct drm_gem_object *obj;
	int ret;

	if (args->flags)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;
	if (neuron_bo_is_device(obj)) {
		ret = -EINVAL;
		goto out;
	}
	ret = drm_gem_create_mmap_offset(obj);
	if (!ret)
		args->offset = drm_vma_node_offset_addr(&obj->vma_node);
out:
	drm_gem_object_put(obj);
	return ret;
}

int neuron_ioctl_bo_wait(struct drm_device *drm, void *data,
			 struct drm_file *file)
{
	struct drm_neuron_bo_wait *args = data;
	struct drm_gem_object *obj;
	long timeout, ret;

	if (args->flags)
		return -EINVAL;
	obj = drm_gem_object_lookup(file, args->handle);
	if (!obj)
		return -ENOENT;

	timeout = drm_timeout_abs_to_jiffies(args->timeout_ns);
	if (timeout)
		ret = dma_resv_wait_timeout(obj->resv, DMA_RESV_USAGE_READ,
					    true, timeout);
	else	/* deadline passed: just poll */
		ret = dma_resv_test_signaled(obj->resv, DMA_RESV_USAGE_READ);
	drm_gem_object_put(obj);
	if (ret < 0)
		return ret;	/* -ERESTARTSYS: interrupted, restartable */
	return ret ? 0 : -ETIME;
}
