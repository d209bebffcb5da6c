// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Buffer objects: host BOs are shmem GEM objects (mmap-able, PRIME); device
 * BOs are ranges of HBM with no CPU mapping for tenants.
 */
#include <linux/dma-resv.h>
#include <linux/slab.h>
#include <drm/drm_drv.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_utils.h>

#include "neuron_drv.h"

/**
 * struct neuron_hbm_bo - a device BO
 * @base: GEM object without backing file
 * @node: the HBM range
 * @populated: every page of @node is backed (pages only go when the BO does)
 */
struct neuron_hbm_bo {
	struct drm_gem_object base;
	struct drm_mm_node node;
	bool populated;
};

static void neuron_hbm_bo_free(struct drm_gem_object *obj)
{
	struct neuron_hbm_bo *bo = container_of(obj, struct neuron_hbm_bo, base);

	neuron_hbm_free(to_neuron_device(obj->dev), &bo->node);
	drm_gem_object_release(obj);
	kfree(bo);
}

static struct dma_buf *neuron_hbm_bo_export(struct drm_gem_object *obj,
					    int flags)
{
	/* Device memory is not shared through dma-buf. */
	return ERR_PTR(-EOPNOTSUPP);
}

static const struct drm_gem_object_funcs neuron_hbm_bo_funcs = {
	.free = neuron_hbm_bo_free,
	.export = neuron_hbm_bo_export,
};

bool neuron_bo_is_device(struct drm_gem_object *obj)
{
	return obj->funcs == &neuron_hbm_bo_funcs;
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
 * @memcg: memory cgroup to charge (the opener's of the submitting file)
 * @offset: first byte
 * @size: bytes, nonzero, inside the BO
 *
 * A BO backed whole once stays so: later calls return at once.
 *
 * Return: 0 or the error of neuron_hbm_populate().
 */
int neuron_bo_populate(struct drm_gem_object *obj, struct mem_cgroup *memcg,
		       u64 offset, u64 size)
{
	struct neuron_hbm_bo *bo = container_of(obj, struct neuron_hbm_bo, base);
	int ret;

	if (READ_ONCE(bo->populated))
		return 0;
	ret = neuron_hbm_populate(&to_neuron_device(obj->dev)->hbm, memcg,
				  bo->node.start + offset, size);
	if (!ret && !offset && size == obj->size)
		WRITE_ONCE(bo->populated, true);
	return ret;
}

static struct drm_gem_object *neuron_hbm_bo_create(struct neuron_device *ndev,
						   u64 size)
{
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
		obj = neuron_hbm_bo_create(ndev, size);
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
