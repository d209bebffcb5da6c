// SPDX-License-Identifier: GPL-2.0-only
/* Buffer objects: creation, info, mmap, wait, lifetimes, HBM. */
#include <sys/mman.h>

#include "nt.h"

NT_TEST(bo_create_errors)
{
	struct drm_neuron_bo_create c;
	int fd = nt_open(0);

#define C(...) (c = (struct drm_neuron_bo_create){ __VA_ARGS__ }, \
		ioctl(fd, DRM_IOCTL_NEURON_BO_CREATE, &c))
	OK(C(.size = 1));
	CHECK(c.size == 4096 && c.handle && !c.device_addr);
	OK(C(.size = 4096, .flags = DRM_NEURON_BO_DEVICE));
	CHECK(c.size == 4096 && c.handle);
	EXPECT_ERR(EINVAL, C(.size = 0));
	EXPECT_ERR(EINVAL, C(.size = 4096, .flags = 2));
	EXPECT_ERR(EINVAL, C(.size = 4096, .handle = 1));
	EXPECT_ERR(EINVAL, C(.size = 4096, .device_addr = 4096));
	EXPECT_ERR(EINVAL, C(.size = UINT64_MAX));
	EXPECT_ERR(EINVAL, C(.size = 4096 * MIB + 1));
	EXPECT_ERR(ENOSPC, C(.size = 257 * MIB, .flags = DRM_NEURON_BO_DEVICE));
#undef C
}

NT_TEST(bo_info_mmap_wait_errors)
{
	int fd = nt_open(0);
	uint32_t host = nt_bo(fd, 8192, 0), dev = nt_bo(fd, 8192, DRM_NEURON_BO_DEVICE);
	struct drm_neuron_bo_info i = { .handle = dev };
	struct drm_neuron_bo_mmap_offset m = { .handle = host };
	struct drm_neuron_bo_wait w = { .handle = host };

	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_INFO, &i));
	CHECK(i.size == 8192 && i.bo_flags == DRM_NEURON_BO_DEVICE);
	i.handle = host;
	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_INFO, &i));
	CHECK(i.bo_flags == 0 && i.device_addr == 0);
	i = (struct drm_neuron_bo_info){ .handle = 999 };
	EXPECT_ERR(ENOENT, ioctl(fd, DRM_IOCTL_NEURON_BO_INFO, &i));
	i = (struct drm_neuron_bo_info){ .handle = host, .flags = 1 };
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_BO_INFO, &i));
	i = (struct drm_neuron_bo_info){ .handle = host, .pad = 1 };
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_BO_INFO, &i));

	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	CHECK(m.offset && !(m.offset & 4095));
	m = (struct drm_neuron_bo_mmap_offset){ .handle = 999 };
	EXPECT_ERR(ENOENT, ioctl(fd, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	m = (struct drm_neuron_bo_mmap_offset){ .handle = host, .flags = 1 };
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	/* Device memory is never mappable by tenants. */
	m = (struct drm_neuron_bo_mmap_offset){ .handle = dev };
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));

	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_WAIT, &w));	/* idle, past deadline */
	w.flags = 1;
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_NEURON_BO_WAIT, &w));
	w = (struct drm_neuron_bo_wait){ .handle = 999 };
	EXPECT_ERR(ENOENT, ioctl(fd, DRM_IOCTL_NEURON_BO_WAIT, &w));
}

NT_TEST(bo_mmap_lifetime)
{
	int fd = nt_open(0);
	uint32_t h = nt_bo(fd, 3 * 4096, 0);
	uint32_t *p = nt_map(fd, h, 3 * 4096), *q;
	size_t i;

	for (i = 0; i < 3 * 1024; i++)
		CHECK(p[i] == 0, "fresh BO not zeroed");
	for (i = 0; i < 3 * 1024; i++)
		p[i] = i * 7;
	q = nt_map(fd, h, 3 * 4096);
	CHECK(q[3000] == 3000 * 7);
	munmap(q, 3 * 4096);
	/* The mapping outlives the handle and the file. */
	nt_close_bo(fd, h);
	close(fd);
	for (i = 0; i < 3 * 1024; i++)
		CHECK(p[i] == i * 7);
	p[5] = 1;
	munmap(p, 3 * 4096);
	/* Private (COW) mappings are refused. */
	fd = nt_open(0);
	h = nt_bo(fd, 4096, 0);
	{
		struct drm_neuron_bo_mmap_offset m = { .handle = h };

		OK(ioctl(fd, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
		CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd,
			   m.offset) == MAP_FAILED);
	}
}

NT_TEST(bo_gem_close_twice)
{
	int fd = nt_open(0);
	uint32_t h = nt_bo(fd, 4096, DRM_NEURON_BO_DEVICE);
	struct drm_gem_close c = { .handle = h };

	OK(ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c));
	EXPECT_ERR(EINVAL, ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c));
	struct drm_neuron_bo_info i = { .handle = h };
	EXPECT_ERR(ENOENT, ioctl(fd, DRM_IOCTL_NEURON_BO_INFO, &i));
}

NT_TEST(hbm_accounting_and_full)
{
	int a = nt_open(0), b = nt_open(0);
	uint64_t used0 = nt_param(a, DRM_NEURON_PARAM_HBM_USED);
	struct drm_neuron_bo_create c = { .size = 100 * MIB,
					  .flags = DRM_NEURON_BO_DEVICE };
	uint32_t h1, h2;

	h1 = nt_bo(b, 100 * MIB, DRM_NEURON_BO_DEVICE);
	h2 = nt_bo(b, 100 * MIB, DRM_NEURON_BO_DEVICE);
	CHECK(nt_param(a, DRM_NEURON_PARAM_HBM_USED) == used0 + 200 * MIB);
	CHECK(nt_sysfs(0, "hbm_used_bytes") == (long long)(used0 + 200 * MIB));
	/* 56 MiB left: the third fails with ENOSPC, nothing leaks. */
	EXPECT_ERR(ENOSPC, ioctl(a, DRM_IOCTL_NEURON_BO_CREATE, &c));
	CHECK(nt_param(a, DRM_NEURON_PARAM_HBM_USED) == used0 + 200 * MIB);
	nt_close_bo(b, h1);
	CHECK(nt_param(a, DRM_NEURON_PARAM_HBM_USED) == used0 + 100 * MIB);
	OK(ioctl(a, DRM_IOCTL_NEURON_BO_CREATE, &c));
	(void)h2;
	/* Closing a file frees its BOs. */
	close(b);
	CHECK(nt_param(a, DRM_NEURON_PARAM_HBM_USED) == used0 + 100 * MIB);
	close(a);
	a = nt_open(0);
	CHECK(nt_param(a, DRM_NEURON_PARAM_HBM_USED) == used0);
	/* The device is lazily backed: 256 MiB allocated, little resident. */
	h1 = nt_bo(a, 256 * MIB - used0, DRM_NEURON_BO_DEVICE);
	CHECK(nt_sysfs(0, "hbm_resident_bytes") < 64 * (long long)MIB);
}

/* Device memory comes back zeroed to the next owner. */
NT_TEST(hbm_zeroed_between_owners)
{
	int a = nt_open(0), b;
	uint32_t src = nt_bo(a, MIB, 0), dev, dst;
	uint8_t *p = nt_map(a, src, MIB);
	struct nt_sync s;
	size_t i;

	memset(p, 0xab, MIB);
	dev = nt_bo(a, 64 * MIB, DRM_NEURON_BO_DEVICE);
	s.handle = nt_syncobj(a);
	s.point = 0;
	for (i = 0; i < 64; i++)
		OK(nt_dma(a, 0, src, 0, dev, i * MIB, MIB, NULL, &s));
	OK(nt_syncobj_wait(a, s.handle, 0, 5000));
	close(a);
	b = nt_open(0);
	dev = nt_bo(b, 64 * MIB, DRM_NEURON_BO_DEVICE);
	dst = nt_bo(b, MIB, 0);
	p = nt_map(b, dst, MIB);
	memset(p, 0x11, MIB);
	s.handle = nt_syncobj(b);
	for (i = 0; i < 64; i += 9) {
		OK(nt_dma(b, 1, dev, i * MIB, dst, 0, MIB, NULL, &s));
		OK(nt_syncobj_wait(b, s.handle, 0, 5000));
		CHECK(p[0] == 0 && p[MIB / 2] == 0 && p[MIB - 1] == 0,
		      "stale HBM data at %zu MiB", i);
	}
}
