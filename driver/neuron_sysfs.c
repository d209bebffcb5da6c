// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Telemetry: sysfs attributes of the device (under
 * /sys/class/accel/accelN/device/) and DRM fdinfo of each open file.
 */
#include <linux/device.h>
#include <linux/idr.h>
#include <linux/sysfs.h>
#include <drm/drm_file.h>
#include <drm/drm_print.h>

#include "neuron_drv.h"

static struct neuron_device *neuron_from_dev(struct device *dev)
{
	return dev_get_drvdata(dev);
}

static ssize_t profile_show(struct device *dev, struct device_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%s\n", neuron_from_dev(dev)->desc.profile_name);
}
static DEVICE_ATTR_RO(profile);

static ssize_t platform_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	bool sim = neuron_from_dev(dev)->desc.platform ==
		   DRM_NEURON_PLATFORM_SIMULATED;

	return sysfs_emit(buf, "%s\n", sim ? "simulated" : "silicon");
}
static DEVICE_ATTR_RO(platform);

static ssize_t cores_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%u\n", neuron_from_dev(dev)->desc.num_cores);
}
static DEVICE_ATTR_RO(cores);

static ssize_t dma_queues_show(struct device *dev,
			       struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", neuron_from_dev(dev)->desc.num_dma_queues);
}
static DEVICE_ATTR_RO(dma_queues);

static ssize_t hbm_total_bytes_show(struct device *dev,
				    struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%llu\n", neuron_from_dev(dev)->hbm.size);
}
static DEVICE_ATTR_RO(hbm_total_bytes);

static ssize_t hbm_used_bytes_show(struct device *dev,
				   struct device_attribute *attr, char *buf)
{
	struct neuron_hbm *hbm = &neuron_from_dev(dev)->hbm;
	u64 used;

	mutex_lock(&hbm->lock);
	used = hbm->used;
	mutex_unlock(&hbm->lock);
	return sysfs_emit(buf, "%llu\n", used);
}
static DEVICE_ATTR_RO(hbm_used_bytes);

static ssize_t hbm_resident_bytes_show(struct device *dev,
				       struct device_attribute *attr, char *buf)
{
	struct neuron_hbm *hbm = &neuron_from_dev(dev)->hbm;

	return sysfs_emit(buf, "%llu\n",
			  (u64)atomic64_read(&hbm->resident) << PAGE_SHIFT);
}
static DEVICE_ATTR_RO(hbm_resident_bytes);

/* One value per queue of @type, space separated, in index order. */
static ssize_t neuron_show_queues(struct device *dev, char *buf, u32 type,
				  size_t offset)
{
	struct neuron_device *ndev = neuron_from_dev(dev);
	ssize_t len = 0;
	u32 i;

	for (i = 0; i < ndev->num_queues; i++) {
		struct neuron_queue *q = &ndev->queues[i];

		if (q->type != type)
			continue;
		len += sysfs_emit_at(buf, len, "%s%lld", len ? " " : "",
				     atomic64_read((atomic64_t *)((char *)q + offset)));
	}
	return len + sysfs_emit_at(buf, len, "\n");
}

/* Sum over every queue. */
static ssize_t neuron_show_total(struct device *dev, char *buf, size_t offset)
{
	struct neuron_device *ndev = neuron_from_dev(dev);
	s64 sum = 0;
	u32 i;

	for (i = 0; i < ndev->num_queues; i++)
		sum += atomic64_read((atomic64_t *)((char *)&ndev->queues[i] +
						    offset));
	return sysfs_emit(buf, "%lld\n", sum);
}

#define NEURON_QUEUE_ATTR(name, type, field)				\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return neuron_show_queues(dev, buf, type,			\
				  offsetof(struct neuron_queue, field));	\
}									\
static DEVICE_ATTR_RO(name)

#define NEURON_TOTAL_ATTR(name, field)					\
static ssize_t name##_show(struct device *dev,				\
			   struct device_attribute *attr, char *buf)	\
{									\
	return neuron_show_total(dev, buf,				\
				 offsetof(struct neuron_queue, field));	\
}									\
static DEVICE_ATTR_RO(name)

NEURON_QUEUE_ATTR(core_busy_ns, DRM_NEURON_QUEUE_CORE, busy_ns);
NEURON_QUEUE_ATTR(core_jobs_completed, DRM_NEURON_QUEUE_CORE, jobs_completed);
NEURON_QUEUE_ATTR(core_jobs_failed, DRM_NEURON_QUEUE_CORE, jobs_failed);
NEURON_QUEUE_ATTR(core_resets, DRM_NEURON_QUEUE_CORE, resets);
NEURON_QUEUE_ATTR(dma_busy_ns, DRM_NEURON_QUEUE_DMA, busy_ns);
NEURON_QUEUE_ATTR(dma_jobs_completed, DRM_NEURON_QUEUE_DMA, jobs_completed);
NEURON_QUEUE_ATTR(dma_resets, DRM_NEURON_QUEUE_DMA, resets);
NEURON_TOTAL_ATTR(jobs_completed, jobs_completed);
NEURON_TOTAL_ATTR(jobs_failed, jobs_failed);

static ssize_t resets_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	return sysfs_emit(buf, "%lld\n",
			  atomic64_read(&neuron_from_dev(dev)->reset_count));
}
static DEVICE_ATTR_RO(resets);

static ssize_t engine_attached_show(struct device *dev,
				    struct device_attribute *attr, char *buf)
{
	struct neuron_device *ndev = neuron_from_dev(dev);
	bool attached;

	spin_lock(&ndev->engine_lock);
	attached = ndev->engine;
	spin_unlock(&ndev->engine_lock);
	return sysfs_emit(buf, "%d\n", attached);
}
static DEVICE_ATTR_RO(engine_attached);

static struct attribute *neuron_dev_attrs[] = {
	&dev_attr_profile.attr,
	&dev_attr_platform.attr,
	&dev_attr_cores.attr,
	&dev_attr_dma_queues.attr,
	&dev_attr_hbm_total_bytes.attr,
	&dev_attr_hbm_used_bytes.attr,
	&dev_attr_hbm_resident_bytes.attr,
	&dev_attr_core_busy_ns.attr,
	&dev_attr_core_jobs_completed.attr,
	&dev_attr_core_jobs_failed.attr,
	&dev_attr_core_resets.attr,
	&dev_attr_dma_busy_ns.attr,
	&dev_attr_dma_jobs_completed.attr,
	&dev_attr_dma_resets.attr,
	&dev_attr_jobs_completed.attr,
	&dev_attr_jobs_failed.attr,
	&dev_attr_resets.attr,
	&dev_attr_engine_attached.attr,
	NULL,
};

static const struct attribute_group neuron_dev_group = {
	.attrs = neuron_dev_attrs,
};

const struct attribute_group *neuron_dev_groups[] = {
	&neuron_dev_group,
	NULL,
};

/*
 * fdinfo: drm-engine-<queue> (busy time of this file's jobs), and
 * drm-memory-{host,hbm} (BOs this file holds handles to; device BOs only
 * if this file created them, as HBM stays charged to its creator: see
 * struct neuron_hbm_bo), then the DRM core's drm-*-memory keys (which count
 * imports too, shared ones also as drm-shared-*).
 */
void neuron_show_fdinfo(struct drm_printer *p, struct drm_file *file)
{
	struct neuron_file *nfile = file->driver_priv;
	struct neuron_device *ndev = nfile->ndev;
	struct drm_gem_object *obj;
	u64 host = 0, hbm = 0;
	u32 i;
	int id;

	for (i = 0; i < ndev->num_queues; i++)
		drm_printf(p, "drm-engine-%s:\t%llu ns\n", ndev->queues[i].name,
			   (u64)atomic64_read(&nfile->busy_ns[i]));

	spin_lock(&file->table_lock);
	idr_for_each_entry(&file->object_idr, obj, id) {
		if (!neuron_bo_is_device(obj))
			host += obj->size;
		else if (neuron_bo_owned_by(obj, file))
			hbm += obj->size;
	}
	spin_unlock(&file->table_lock);
	drm_printf(p, "drm-memory-host:\t%llu KiB\n", host >> 10);
	drm_printf(p, "drm-memory-hbm:\t%llu KiB\n", hbm >> 10);
	drm_show_memory_stats(p, file);
}
