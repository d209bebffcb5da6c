/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Copyright (C) 2025 The Neuron stack authors
 *
 * Kernel API differences between 6.12 point releases (and later kernels).
 * The NEURON_HAVE_* macros come from neuron_config.h, which
 * scripts/conftest.sh writes by compiling small probes against the target
 * kernel headers: they describe the headers, not a version number.
 */
#ifndef _NEURON_COMPAT_H_
#define _NEURON_COMPAT_H_

#include <drm/gpu_scheduler.h>

#include "neuron_config.h"

static inline int
neuron_sched_init(struct drm_gpu_scheduler *sched,
		  const struct drm_sched_backend_ops *ops,
		  struct workqueue_struct *submit_wq, long timeout,
		  const char *name, struct device *dev)
{
#ifdef NEURON_HAVE_SCHED_INIT_ARGS
	const struct drm_sched_init_args args = {
		.ops = ops,
		.num_rqs = DRM_SCHED_PRIORITY_COUNT,
		.credit_limit = 1,
		.submit_wq = submit_wq,
		.timeout = timeout,
		.name = name,
		.dev = dev,
	};

	return drm_sched_init(sched, &args);
#else
	return drm_sched_init(sched, ops, submit_wq, DRM_SCHED_PRIORITY_COUNT,
			      1, 0, timeout, NULL, NULL, name, dev);
#endif
}

static inline int
neuron_sched_job_init(struct drm_sched_job *job,
		      struct drm_sched_entity *entity, void *owner,
		      u64 client_id)
{
#ifdef NEURON_HAVE_SCHED_JOB_INIT_CLIENT_ID
	return drm_sched_job_init(job, entity, 1, owner, client_id);
#else
	return drm_sched_job_init(job, entity, 1, owner);
#endif
}

#endif /* _NEURON_COMPAT_H_ */
