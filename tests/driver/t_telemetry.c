// SPDX-License-Identifier: GPL-2.0-only
/* sysfs attributes and DRM fdinfo. */
#include "nt.h"

static const char *sysfs_str(int minor, const char *attr)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/accel/accel%d/device/%s",
		 minor, attr);
	return nt_read_file(path);
}

NT_TEST(sysfs_values)
{
	int fd = nt_open(0);
	long long used = nt_sysfs(0, "hbm_used_bytes");
	long long done = nt_sysfs(0, "jobs_completed");
	long long failed = nt_sysfs(0, "jobs_failed");
	uint32_t h = nt_bo(fd, 65536, 0), d = nt_bo(fd, MIB, DRM_NEURON_BO_DEVICE);
	long long b0, b1;

	CHECK(!strcmp(sysfs_str(0, "profile"), "trn2\n"));
	CHECK(!strcmp(sysfs_str(0, "platform"), "simulated\n"));
	CHECK(nt_sysfs(0, "cores") == 8 && nt_sysfs(0, "dma_queues") == 2);
	CHECK(nt_sysfs(0, "hbm_total_bytes") == (long long)(256 * MIB));
	CHECK(nt_sysfs(0, "hbm_used_bytes") == used + (long long)MIB);
	CHECK(nt_sysfs(0, "engine_attached") == 0);
	b0 = strtoll(sysfs_str(0, "dma_busy_ns"), NULL, 10);
	OK(nt_dma(fd, 0, h, 0, d, 0, 65536, NULL, NULL));
	OK(nt_bo_wait(fd, d, 5000));
	b1 = strtoll(sysfs_str(0, "dma_busy_ns"), NULL, 10);
	CHECK(b1 > b0, "dma0 busy %lld -> %lld", b0, b1);
	CHECK(nt_sysfs(0, "jobs_completed") >= done + 1);
	/* A failed compute job (no engine) on core 3. */
	OK(nt_compute(fd, 3, NT_OP_ADD, 1, d, NULL, NULL));
	OK(nt_bo_wait(fd, d, 5000));
	CHECK(nt_sysfs(0, "jobs_failed") >= failed + 1);
	{
		const char *s = sysfs_str(0, "core_jobs_failed");
		long long v[8];
		int n = sscanf(s, "%lld %lld %lld %lld %lld %lld %lld %lld", &v[0],
			       &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);

		CHECK(n == 8 && v[3] >= 1, "core_jobs_failed '%s'", s);
	}
	/* Device 1 is separate. */
	CHECK(nt_sysfs(1, "hbm_used_bytes") == 0);
}

NT_TEST(fdinfo_values)
{
	int fd = nt_open(0), other = nt_open(0);
	uint32_t h = nt_bo(fd, 65536, 0), d = nt_bo(fd, MIB, DRM_NEURON_BO_DEVICE);
	char path[64];

	OK(nt_dma(fd, 1, h, 0, d, 0, 65536, NULL, NULL));
	OK(nt_bo_wait(fd, d, 5000));
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	CHECK(strstr(nt_read_file(path), "drm-driver:\tneuron\n"));
	CHECK(nt_fdinfo(fd, "drm-client-id") > 0);
	CHECK(nt_fdinfo(fd, "drm-client-id") != nt_fdinfo(other, "drm-client-id"));
	CHECK(nt_fdinfo(fd, "drm-engine-dma1") > 0);
	CHECK(nt_fdinfo(fd, "drm-engine-dma0") == 0);
	CHECK(nt_fdinfo(fd, "drm-engine-core7") == 0);
	CHECK(nt_fdinfo(fd, "drm-memory-hbm") == 1024);
	CHECK(nt_fdinfo(fd, "drm-memory-host") == 64);
	CHECK(nt_fdinfo(fd, "drm-total-memory") >= 64);
	CHECK(nt_fdinfo(other, "drm-memory-hbm") == 0);
	CHECK(nt_fdinfo(other, "drm-engine-dma1") == 0);
	nt_close_bo(fd, d);
	CHECK(nt_fdinfo(fd, "drm-memory-hbm") == 0);
}
