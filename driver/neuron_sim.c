// SPDX-License-Identifier: GPL-2.0-only
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Simulated devices: a platform driver "neuron-sim" and one platform device
 * per simulated accelerator, described by module parameters. A PCI driver
 * for real hardware would sit beside this file and call the same
 * neuron_device_create().
 */
#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <drm/drm_vma_manager.h>

#include "neuron_drv.h"

#define NEURON_SIM_MAX_DEVICES	8
/*
 * 512 GiB: the HBM aperture takes that much of the device's DRM mmap offset
 * space (1 TiB on 64-bit), which must leave room for host BOs (256 GiB at
 * least: 64 of the largest).
 */
#define NEURON_SIM_MAX_HBM_MIB	(512 * 1024)
#define NEURON_SIM_HOST_OFFSET_PAGES	(256ULL << (30 - PAGE_SHIFT))

static unsigned int devices = 1;
module_param(devices, uint, 0444);
MODULE_PARM_DESC(devices, "Number of simulated devices (1-8, default 1)");

static char *profile = "trn2";
module_param(profile, charp, 0444);
MODULE_PARM_DESC(profile, "Chip profile: trn1, trn2 or trn3 (default trn2)");

static unsigned int cores;
module_param(cores, uint, 0444);
MODULE_PARM_DESC(cores, "NeuronCores per device (0 = profile default)");

static unsigned long hbm_mib;
module_param(hbm_mib, ulong, 0444);
MODULE_PARM_DESC(hbm_mib, "HBM per device in MiB, backed on first write (0 = profile default)");

static unsigned int dma_queues = 2;
module_param(dma_queues, uint, 0444);
MODULE_PARM_DESC(dma_queues, "DMA queues per device (1-16, default 2)");

static unsigned int job_timeout_ms = 2000;
module_param(job_timeout_ms, uint, 0444);
MODULE_PARM_DESC(job_timeout_ms, "Compute job timeout in ms (10-600000, default 2000)");

struct neuron_sim_profile {
	const char *name;
	u32 profile;
	u32 cores;
	u64 hbm_gib;
};

static const struct neuron_sim_profile neuron_sim_profiles[] = {
	{ "trn1", DRM_NEURON_PROFILE_TRN1, 2, 32 },
	{ "trn2", DRM_NEURON_PROFILE_TRN2, 8, 96 },
	{ "trn3", DRM_NEURON_PROFILE_TRN3, 8, 144 },
};

static struct platform_device *neuron_sim_pdevs[NEURON_SIM_MAX_DEVICES];

static int neuron_sim_probe(struct platform_device *pdev)
{
	const struct neuron_hw_desc *desc = dev_get_platdata(&pdev->dev);
	struct neuron_device *ndev;
	int ret;

	/* No real DMA, but shmem sg tables are mapped for the device. */
	ret = dma_coerce_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		return ret;

	ndev = neuron_device_create(&pdev->dev, desc);
	if (IS_ERR(ndev))
		return PTR_ERR(ndev);
	platform_set_drvdata(pdev, ndev);
	return 0;
}

static void neuron_sim_remove(struct platform_device *pdev)
{
	neuron_device_destroy(platform_get_drvdata(pdev));
}

static struct platform_driver neuron_sim_driver = {
	.probe = neuron_sim_probe,
	.remove = neuron_sim_remove,
	.driver = {
		.name = "neuron-sim",
		.dev_groups = neuron_dev_groups,
		/* Unbinding with open files is not supported; rmmod is. */
		.suppress_bind_attrs = true,
	},
};

static int neuron_sim_bad(const char *param, const char *range)
{
	pr_err("neuron: module parameter %s out of range; use %s\n", param, range);
	return -EINVAL;
}

static int neuron_sim_desc(struct neuron_hw_desc *desc)
{
	const struct neuron_sim_profile *p = NULL;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(neuron_sim_profiles); i++)
		if (sysfs_streq(profile, neuron_sim_profiles[i].name))
			p = &neuron_sim_profiles[i];
	if (!p) {
		pr_err("neuron: unknown profile \"%s\"; use trn1, trn2 or trn3\n",
		       profile);
		return -EINVAL;
	}
	if (!devices || devices > NEURON_SIM_MAX_DEVICES)
		return neuron_sim_bad("devices", "1-8");
	if (cores > NEURON_MAX_CORES)
		return neuron_sim_bad("cores", "0-64 (0: profile default)");
	if (!dma_queues || dma_queues > NEURON_MAX_DMA_QUEUES)
		return neuron_sim_bad("dma_queues", "1-16");
	if (job_timeout_ms < 10 || job_timeout_ms > 600000)
		return neuron_sim_bad("job_timeout_ms", "10-600000");
	BUILD_BUG_ON(((u64)NEURON_SIM_MAX_HBM_MIB << (20 - PAGE_SHIFT)) >
		     DRM_FILE_PAGE_OFFSET_SIZE - NEURON_SIM_HOST_OFFSET_PAGES);
	if (hbm_mib > NEURON_SIM_MAX_HBM_MIB)
		return neuron_sim_bad("hbm_mib", "0-524288 (0: profile default)");
	desc->platform = DRM_NEURON_PLATFORM_SIMULATED;
	desc->profile = p->profile;
	desc->profile_name = p->name;
	desc->num_cores = cores ? cores : p->cores;
	desc->num_dma_queues = dma_queues;
	desc->hbm_size = hbm_mib ? (u64)hbm_mib << 20 : p->hbm_gib << 30;
	desc->job_timeout_ms = job_timeout_ms;
	return 0;
}

void neuron_sim_unregister(void)
{
	int i;

	for (i = NEURON_SIM_MAX_DEVICES - 1; i >= 0; i--) {
		platform_device_unregister(neuron_sim_pdevs[i]);
		neuron_sim_pdevs[i] = NULL;
	}
	platform_driver_unregister(&neuron_sim_driver);
}

int neuron_sim_register(void)
{
	struct neuron_hw_desc desc;
	struct platform_device *pdev;
	unsigned int i;
	int ret;

	ret = neuron_sim_desc(&desc);
	if (ret)
		return ret;

	ret = platform_driver_register(&neuron_sim_driver);
	if (ret)
		return ret;

	for (i = 0; i < devices; i++) {
		pdev = platform_device_register_data(NULL, "neuron-sim", i,
						     &desc, sizeof(desc));
		if (IS_ERR(pdev)) {
			ret = PTR_ERR(pdev);
			goto err;
		}
		neuron_sim_pdevs[i] = pdev;
		if (!platform_get_drvdata(pdev)) {
			/* The probe failed; its error is in the log. */
			ret = -ENODEV;
			goto err;
		}
	}
	return 0;

err:
	neuron_sim_unregister();
	return ret;
}
