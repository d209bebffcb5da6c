// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Bus-independent device life cycle: a front end (neuron_sim.c, or a PCI
 * probe) describes the hardware and gets a registered accel device back.
 */
#include <linux/device.h>
#include <linux/slab.h>
#include <drm/drm_drv.h>
#include <drm/drm_managed.h>
#include <drm/drm_print.h>

#include "neuron_drv.h"

static void neuron_queues_fini(struct neuron_device *ndev, u32 count)
{
	while (count--)
		neuron_queue_fini(&ndev->queues[count]);
}

static int neuron_queues_init(struct neuron_device *ndev)
{
	u32 i;
	int ret;

	for (i = 0; i < ndev->num_queues; i++) {
		bool core = i < ndev->desc.num_cores;

		ret = neuron_queue_init(ndev, &ndev->queues[i],
					core ? DRM_NEURON_QUEUE_CORE :
					       DRM_NEURON_QUEUE_DMA,
					core ? i : i - ndev->desc.num_cores, i);
		if (ret) {
			neuron_queues_fini(ndev, i);
			return ret;
		}
	}
	return 0;
}

/**
 * neuron_device_create - create and register one accelerator
 * @parent: bus device; the DRM device is freed with its devres
 * @desc: hardware description, copied
 *
 * Return: the device or an ERR_PTR.
 */
struct neuron_device *neuron_device_create(struct device *parent,
					   const struct neuron_hw_desc *desc)
{
	struct neuron_device *ndev;
	int ret;

	ndev = devm_drm_dev_alloc(parent, &neuron_drm_driver,
				  struct neuron_device, drm);
	if (IS_ERR(ndev))
		return ndev;

	ndev->desc = *desc;
	ndev->num_queues = desc->num_cores + desc->num_dma_queues;
	neuron_engine_init(ndev);
	init_waitqueue_head(&ndev->jobs_idle);
	mutex_init(&ndev->tenants_lock);
	xa_init(&ndev->tenants);

	ndev->queues = drmm_kcalloc(&ndev->drm, ndev->num_queues,
				    sizeof(*ndev->queues), GFP_KERNEL);
	if (!ndev->queues)
		return ERR_PTR(-ENOMEM);

	ndev->reset_wq = alloc_ordered_workqueue("neuron-reset-%s", 0,
						 dev_name(parent));
	ndev->dma_wq = alloc_workqueue("neuron-dma-%s",
				       WQ_UNBOUND | WQ_MEM_RECLAIM, 0,
				       dev_name(parent));
	if (!ndev->reset_wq || !ndev->dma_wq) {
		ret = -ENOMEM;
		goto err_wq;
	}

	ret = neuron_hbm_init(ndev);
	if (ret)
		goto err_wq;

	ret = neuron_queues_init(ndev);
	if (ret)
		goto err_hbm;

	ret = drm_dev_register(&ndev->drm, 0);
	if (ret)
		goto err_queues;

	drm_info(&ndev->drm, "%s %s: %u cores, %u DMA queues, %llu MiB HBM\n",
		 desc->platform == DRM_NEURON_PLATFORM_SIMULATED ?
		 "simulated" : "silicon", desc->profile_name, desc->num_cores,
		 desc->num_dma_queues, desc->hbm_size >> 20);
	return ndev;

err_queues:
	neuron_queues_fini(ndev, ndev->num_queues);
err_hbm:
	neuron_hbm_fini(ndev);
err_wq:
	if (ndev->dma_wq)
		destroy_workqueue(ndev->dma_wq);
	if (ndev->reset_wq)
		destroy_workqueue(ndev->reset_wq);
	neuron_tenants_fini(ndev);
	return ERR_PTR(ret);
}

static bool neuron_jobs_idle(struct neuron_device *ndev)
{
	bool idle;

	spin_lock(&ndev->engine_lock);
	idle = !ndev->jobs_alive;
	spin_unlock(&ndev->engine_lock);
	return idle;
}

/**
 * neuron_device_destroy - unregister a device created by neuron_device_create
 * @ndev: device; no file may be open (the module is pinned while one is)
 *
 * With every file closed the engine has detached, so no compute job is
 * left on it; jobs still around are DMA jobs (running or queued behind one)
 * or waiting to be freed. Running DMA jobs stop at their next chunk; then
 * every job is freed before the schedulers go (drm_sched_fini() in 6.12
 * would leak them).
 */
void neuron_device_destroy(struct neuron_device *ndev)
{
	drm_dev_unplug(&ndev->drm);
	WRITE_ONCE(ndev->dying, true);
	if (!wait_event_timeout(ndev->jobs_idle, neuron_jobs_idle(ndev),
				30 * HZ))
		drm_WARN(&ndev->drm, 1, "%llu jobs still alive at teardown\n",
			 ndev->jobs_alive);
	cancel_delayed_work_sync(&ndev->watchdog);
	neuron_queues_fini(ndev, ndev->num_queues);
	destroy_workqueue(ndev->dma_wq);
	destroy_workqueue(ndev->reset_wq);
	neuron_hbm_fini(ndev);
	neuron_tenants_fini(ndev);
}
