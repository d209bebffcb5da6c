// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Information ioctls: GET_PARAM, QUERY, GET_RESET_STATUS.
 */
#include <linux/string.h>
#include <linux/uaccess.h>
#include <drm/drm_drv.h>

#include "neuron_drv.h"

#define NEURON_CAPS (DRM_NEURON_CAP_DEVICE_BO | DRM_NEURON_CAP_TIMELINE_SYNCOBJ | \
		     DRM_NEURON_CAP_DMA_QUEUES | DRM_NEURON_CAP_ENGINE | \
		     DRM_NEURON_CAP_RESET_STATUS | DRM_NEURON_CAP_ACCESS_CONTROL | \
		     DRM_NEURON_CAP_ENGINE_PROGRESS | DRM_NEURON_CAP_JOB_LIMITS)

static u64 neuron_hbm_used(struct neuron_device *ndev)
{
	u64 used;

	mutex_lock(&ndev->hbm.lock);
	used = ndev->hbm.used;
	mutex_unlock(&ndev->hbm.lock);
	return used;
}

static bool neuron_engine_attached(struct neuron_device *ndev)
{
	bool attached;

	spin_lock(&ndev->engine_lock);
	attached = ndev->engine;
	spin_unlock(&ndev->engine_lock);
	return attached;
}

int neuron_ioctl_get_param(struct drm_device *drm, void *data,
			   struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_get_param *args = data;
	const struct neuron_hw_desc *d = &ndev->desc;

	if (args->param == DRM_NEURON_PARAM_CORE_BUSY_NS) {
		if (args->index >= d->num_cores)
			return -EINVAL;
		args->value = atomic64_read(&ndev->queues[args->index].busy_ns);
		return 0;
	}
	if (args->index)
		return -EINVAL;

	switch (args->param) {
	case DRM_NEURON_PARAM_API_VERSION:
		args->value = (u64)DRM_NEURON_API_MAJOR << 32 | DRM_NEURON_API_MINOR;
		break;
	case DRM_NEURON_PARAM_PLATFORM_TYPE:
		args->value = d->platform;
		break;
	case DRM_NEURON_PARAM_PROFILE:
		args->value = d->profile;
		break;
	case DRM_NEURON_PARAM_NUM_CORES:
		args->value = d->num_cores;
		break;
	case DRM_NEURON_PARAM_NUM_DMA_QUEUES:
		args->value = d->num_dma_queues;
		break;
	case DRM_NEURON_PARAM_HBM_SIZE:
		args->value = ndev->hbm.size;
		break;
	case DRM_NEURON_PARAM_HBM_USED:
		args->value = neuron_hbm_used(ndev);
		break;
	case DRM_NEURON_PARAM_CORE_MASK:
		args->value = atomic64_read(&nfile->core_mask);
		break;
	case DRM_NEURON_PARAM_CAPABILITIES:
		args->value = NEURON_CAPS;
		break;
	case DRM_NEURON_PARAM_RESET_COUNT:
		args->value = atomic64_read(&ndev->reset_count);
		break;
	case DRM_NEURON_PARAM_MAX_BO_SIZE:
		args->value = NEURON_MAX_HOST_BO_SIZE;
		break;
	case DRM_NEURON_PARAM_MAX_CMD_SIZE:
		args->value = NEURON_MAX_CMD_SIZE;
		break;
	case DRM_NEURON_PARAM_JOB_TIMEOUT_MS:
		args->value = d->job_timeout_ms;
		break;
	case DRM_NEURON_PARAM_ENGINE_ATTACHED:
		args->value = neuron_engine_attached(ndev);
		break;
	case DRM_NEURON_PARAM_DMA_MASK:
		args->value = atomic64_read(&nfile->dma_mask);
		break;
	case DRM_NEURON_PARAM_MAX_DMA_BYTES:
		args->value = NEURON_MAX_DMA_JOB_BYTES;
		break;
	case DRM_NEURON_PARAM_MAX_JOBS:
		args->value = NEURON_MAX_JOBS_PER_FILE;
		break;
	case DRM_NEURON_PARAM_JOB_MAX_MS:
		args->value = (u64)d->job_timeout_ms * NEURON_JOB_MAX_TIMEOUTS;
		break;
	case DRM_NEURON_PARAM_TENANT_ID:
		args->value = nfile->tenant ? nfile->tenant->id : 0;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

union neuron_query_buf {
	struct drm_neuron_device_info dev;
	struct drm_neuron_core_info core;
	struct drm_neuron_hbm_info hbm;
};

static void neuron_query_device(struct neuron_device *ndev,
				struct neuron_file *nfile,
				struct drm_neuron_device_info *info)
{
	const struct neuron_hw_desc *d = &ndev->desc;

	info->api_major = DRM_NEURON_API_MAJOR;
	info->api_minor = DRM_NEURON_API_MINOR;
	info->platform = d->platform;
	info->profile = d->profile;
	info->num_cores = d->num_cores;
	info->num_dma_queues = d->num_dma_queues;
	info->hbm_size = ndev->hbm.size;
	info->hbm_used = neuron_hbm_used(ndev);
	info->capabilities = NEURON_CAPS;
	info->core_mask = atomic64_read(&nfile->core_mask);
	info->reset_count = atomic64_read(&ndev->reset_count);
	info->job_timeout_ms = d->job_timeout_ms;
	info->engine_attached = neuron_engine_attached(ndev);
	strscpy(info->platform_name,
		d->platform == DRM_NEURON_PLATFORM_SIMULATED ? "simulated" :
		"silicon", sizeof(info->platform_name));
	strscpy(info->profile_name, d->profile_name, sizeof(info->profile_name));
}

static void neuron_query_core(struct neuron_device *ndev,
			      struct neuron_file *nfile, u32 index,
			      struct drm_neuron_core_info *info)
{
	struct neuron_queue *q = &ndev->queues[index];

	info->index = index;
	if (atomic64_read(&nfile->core_mask) & BIT_ULL(index))
		info->flags |= DRM_NEURON_CORE_IN_MASK;
	info->busy_ns = atomic64_read(&q->busy_ns);
	info->jobs_completed = atomic64_read(&q->jobs_completed);
	info->jobs_failed = atomic64_read(&q->jobs_failed);
	info->resets = atomic64_read(&q->resets);
}

static void neuron_query_hbm(struct neuron_device *ndev,
			     struct drm_neuron_hbm_info *info)
{
	struct neuron_hbm *hbm = &ndev->hbm;

	info->size = hbm->size;
	info->largest_free = neuron_hbm_largest_free(hbm);
	mutex_lock(&hbm->lock);
	info->used = hbm->used;
	info->bo_count = hbm->bo_count;
	mutex_unlock(&hbm->lock);
	info->resident = (u64)atomic64_read(&hbm->resident) << PAGE_SHIFT;
}

int neuron_ioctl_query(struct drm_device *drm, void *data,
		       struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct drm_neuron_query *args = data;
	union neuron_query_buf buf = {};
	void __user *ptr = u64_to_user_ptr(args->data);
	u32 size;

	/* The zero-fill below is bounded: no clearing gigabytes for a caller. */
	if (args->flags || args->size > DRM_NEURON_MAX_QUERY_SIZE)
		return -EINVAL;
	switch (args->type) {
	case DRM_NEURON_QUERY_DEVICE_INFO:
		if (args->index)
			return -EINVAL;
		neuron_query_device(ndev, file->driver_priv, &buf.dev);
		size = sizeof(buf.dev);
		break;
	case DRM_NEURON_QUERY_CORE_INFO:
		if (args->index >= ndev->desc.num_cores)
			return -EINVAL;
		neuron_query_core(ndev, file->driver_priv, args->index,
				  &buf.core);
		size = sizeof(buf.core);
		break;
	case DRM_NEURON_QUERY_HBM_INFO:
		if (args->index)
			return -EINVAL;
		neuron_query_hbm(ndev, &buf.hbm);
		size = sizeof(buf.hbm);
		break;
	default:
		return -EINVAL;
	}

	if (ptr) {
		/* A prefix for older callers, zeros for newer ones. */
		if (copy_to_user(ptr, &buf, min(size, args->size)))
			return -EFAULT;
		if (args->size > size &&
		    clear_user(ptr + size, args->size - size))
			return -EFAULT;
	}
	args->size = size;
	return 0;
}

int neuron_ioctl_get_reset_status(struct drm_device *drm, void *data,
				  struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile = file->driver_priv;
	struct drm_neuron_reset_status *args = data;

	if (args->flags)
		return -EINVAL;
	args->status = neuron_file_banned(nfile) ? DRM_NEURON_CONTEXT_BANNED :
						   DRM_NEURON_CONTEXT_OK;
	args->device_resets = atomic64_read(&ndev->reset_count);
	args->guilty_jobs = atomic64_read(&nfile->guilty_jobs);
	return 0;
}
