// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * DRM driver description: file operations, ioctl table, per-file contexts.
 */
#include <linux/memcontrol.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <drm/drm_accel.h>
#include <drm/drm_drv.h>
#include <drm/drm_gem.h>
#include <drm/drm_gem_shmem_helper.h>
#include <drm/drm_ioctl.h>

#include "neuron_drv.h"

struct neuron_file *neuron_file_get(struct neuron_file *nfile)
{
	kref_get(&nfile->ref);
	return nfile;
}

static void neuron_file_release(struct kref *ref)
{
	struct neuron_file *nfile = container_of(ref, struct neuron_file, ref);

	neuron_file_access_fini(nfile);
	mem_cgroup_put(nfile->memcg);
	mutex_destroy(&nfile->lock);
	kfree(nfile->busy_ns);
	kfree(nfile->entities);
	kfree(nfile);
}

void neuron_file_put(struct neuron_file *nfile)
{
	kref_put(&nfile->ref, neuron_file_release);
}

/*
 * A new file may use no core and no DMA queue until the controller grants
 * them (neuron_access.c). Its device memory and jobs are charged to the
 * opener's memory cgroup.
 */
static int neuron_open(struct drm_device *drm, struct drm_file *file)
{
	struct neuron_device *ndev = to_neuron_device(drm);
	struct neuron_file *nfile;

	nfile = kzalloc(sizeof(*nfile), GFP_KERNEL_ACCOUNT);
	if (!nfile)
		return -ENOMEM;
	nfile->entities = kcalloc(ndev->num_queues, sizeof(*nfile->entities),
				  GFP_KERNEL_ACCOUNT);
	nfile->busy_ns = kcalloc(ndev->num_queues, sizeof(*nfile->busy_ns),
				 GFP_KERNEL_ACCOUNT);
	if (!nfile->entities || !nfile->busy_ns) {
		kfree(nfile->entities);
		kfree(nfile->busy_ns);
		kfree(nfile);
		return -ENOMEM;
	}
	kref_init(&nfile->ref);
	mutex_init(&nfile->lock);
	nfile->ndev = ndev;
	nfile->client_id = file->client_id;
	nfile->memcg = get_mem_cgroup_from_mm(current->mm);
	file->driver_priv = nfile;
	/*
	 * The DRM core lets a CAP_SYS_ADMIN opener use DRM_AUTH ioctls, i.e.
	 * GEM_FLINK and GEM_OPEN: global names that would hand BOs (device
	 * ones too) from file to file past the per-file handles. Accel files
	 * share through PRIME only.
	 */
	file->authenticated = false;
	return 0;
}

static void neuron_postclose(struct drm_device *drm, struct drm_file *file)
{
	struct neuron_file *nfile = file->driver_priv;

	neuron_engine_file_close(nfile);
	neuron_file_entities_fini(nfile);
	file->driver_priv = NULL;
	neuron_file_put(nfile);
}

/* Closing a descriptor of the engine in the process that attached detaches. */
static int neuron_flush(struct file *filp, fl_owner_t id)
{
	struct drm_file *file = filp->private_data;

	neuron_engine_file_flush(file->driver_priv, id);
	return 0;
}

static const struct drm_ioctl_desc neuron_ioctls[] = {
	/*
	 * Flags 0: any opener of the node (root alone with the udev rule);
	 * DRM_ROOT_ONLY: CAP_SYS_ADMIN at the call, the controller's ioctls.
	 * FETCH and COMPLETE check that the file is the attached engine.
	 */
	DRM_IOCTL_DEF_DRV(NEURON_GET_PARAM, neuron_ioctl_get_param, 0),
	DRM_IOCTL_DEF_DRV(NEURON_QUERY, neuron_ioctl_query, 0),
	DRM_IOCTL_DEF_DRV(NEURON_BO_CREATE, neuron_ioctl_bo_create, 0),
	DRM_IOCTL_DEF_DRV(NEURON_BO_INFO, neuron_ioctl_bo_info, 0),
	DRM_IOCTL_DEF_DRV(NEURON_BO_MMAP_OFFSET, neuron_ioctl_bo_mmap_offset, 0),
	DRM_IOCTL_DEF_DRV(NEURON_BO_WAIT, neuron_ioctl_bo_wait, 0),
	DRM_IOCTL_DEF_DRV(NEURON_SUBMIT, neuron_ioctl_submit, 0),
	DRM_IOCTL_DEF_DRV(NEURON_GET_RESET_STATUS, neuron_ioctl_get_reset_status, 0),
	DRM_IOCTL_DEF_DRV(NEURON_SET_CORE_MASK, neuron_ioctl_set_core_mask,
			  DRM_ROOT_ONLY),
	DRM_IOCTL_DEF_DRV(NEURON_ENGINE_ATTACH, neuron_ioctl_engine_attach,
			  DRM_ROOT_ONLY),
	DRM_IOCTL_DEF_DRV(NEURON_ENGINE_FETCH, neuron_ioctl_engine_fetch, 0),
	DRM_IOCTL_DEF_DRV(NEURON_ENGINE_COMPLETE, neuron_ioctl_engine_complete, 0),
};

/* The HBM aperture (engine only) or a GEM object. */
static int neuron_mmap(struct file *filp, struct vm_area_struct *vma)
{
	struct drm_file *file = filp->private_data;
	struct neuron_device *ndev = to_neuron_device(file->minor->dev);

	if (vma->vm_pgoff == drm_vma_node_start(&ndev->hbm.vma)) {
		struct neuron_file *nfile = file->driver_priv;
		bool engine;

		spin_lock(&ndev->engine_lock);
		engine = ndev->engine == nfile;
		spin_unlock(&ndev->engine_lock);
		if (!engine)
			return -EACCES;
		return neuron_hbm_mmap(ndev, vma);
	}
	return drm_gem_mmap(filp, vma);
}

/* DRM_ACCEL_FOPS with our mmap and flush, plus fdinfo (6.12 lacks it). */
static const struct file_operations neuron_fops = {
	.owner = THIS_MODULE,
	.open = accel_open,
	.flush = neuron_flush,
	.release = drm_release,
	.unlocked_ioctl = drm_ioctl,
	.compat_ioctl = drm_compat_ioctl,
	.poll = drm_poll,
	.read = drm_read,
	.llseek = noop_llseek,
	.mmap = neuron_mmap,
	.show_fdinfo = drm_show_fdinfo,
	.fop_flags = FOP_UNSIGNED_OFFSET,
};

const struct drm_driver neuron_drm_driver = {
	.driver_features = DRIVER_GEM | DRIVER_COMPUTE_ACCEL |
			   DRIVER_SYNCOBJ | DRIVER_SYNCOBJ_TIMELINE,
	.open = neuron_open,
	.postclose = neuron_postclose,
	.gem_prime_import = neuron_gem_prime_import,
	.gem_prime_import_sg_table = drm_gem_shmem_prime_import_sg_table,
	.show_fdinfo = neuron_show_fdinfo,
	.ioctls = neuron_ioctls,
	.num_ioctls = ARRAY_SIZE(neuron_ioctls),
	.fops = &neuron_fops,
	.name = NEURON_DRIVER_NAME,
	.desc = NEURON_DRIVER_DESC,
	.major = DRM_NEURON_API_MAJOR,
	.minor = DRM_NEURON_API_MINOR,
};

static int __init neuron_init(void)
{
	return neuron_sim_register();
}

static void __exit neuron_exit(void)
{
	neuron_sim_unregister();
}

module_init(neuron_init);
module_exit(neuron_exit);

MODULE_AUTHOR("The Neuron stack authors");
MODULE_DESCRIPTION(NEURON_DRIVER_DESC);
MODULE_LICENSE("GPL");
