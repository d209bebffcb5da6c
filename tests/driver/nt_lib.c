// SPDX-License-Identifier: GPL-2.0-only
/*
 * Helpers of the neuron.ko tests (neuron_test) and of the ioctl fuzzer
 * (neuron_fuzz): device files, BOs, syncobjs, jobs, sysfs, cgroups.
 */
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/sync_file.h>

#include "nt.h"

int nt_job_timeout_ms = 500;

void nt_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	printf("# %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

int nt_open_bare(int minor)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/dev/accel/accel%d", minor);
	fd = open(path, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	return fd;
}

int nt_grant(int ctl, int fd, uint64_t cores, uint64_t dmas, uint32_t flags,
	     uint64_t tenant)
{
	struct drm_neuron_set_core_mask m = {
		.fd = fd, .flags = flags | DRM_NEURON_MASK_DMA,
		.core_mask = cores, .dma_mask = dmas, .tenant_id = tenant,
	};

	if (tenant)
		m.flags |= DRM_NEURON_MASK_TENANT;
	return ioctl(ctl, DRM_IOCTL_NEURON_SET_CORE_MASK, &m) ? -errno : 0;
}

uint64_t nt_all_cores(int fd)
{
	return (1ull << nt_param(fd, DRM_NEURON_PARAM_NUM_CORES)) - 1;
}

uint64_t nt_all_dmas(int fd)
{
	return (1ull << nt_param(fd, DRM_NEURON_PARAM_NUM_DMA_QUEUES)) - 1;
}

int nt_open(int minor)
{
	int fd = nt_open_bare(minor), r;

	/*
	 * The file grants itself every core and DMA queue (we are root). A
	 * driver before API 1.1 gives them to every file (and refuses the
	 * DMA flag): the suite still runs there, to show what fails.
	 */
	if (!(nt_param(fd, DRM_NEURON_PARAM_CAPABILITIES) &
	      DRM_NEURON_CAP_ACCESS_CONTROL))
		return fd;
	r = nt_grant(fd, fd, nt_all_cores(fd), nt_all_dmas(fd), 0, 0);
	CHECK(r == 0, "granting queues: %s", strerror(-r));
	return fd;
}

int nt_ioctl(int fd, unsigned long req, void *arg)
{
	return ioctl(fd, req, arg);
}

uint64_t nt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

uint64_t nt_deadline_ms(int ms)
{
	return nt_now_ns() + ms * 1000000ull;
}

uint64_t nt_param(int fd, uint32_t param)
{
	struct drm_neuron_get_param p = { .param = param };

	OK(ioctl(fd, DRM_IOCTL_NEURON_GET_PARAM, &p));
	return p.value;
}

uint32_t nt_bo(int fd, uint64_t size, uint32_t flags)
{
	struct drm_neuron_bo_create c = { .size = size, .flags = flags };

	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_CREATE, &c));
	return c.handle;
}

void *nt_map(int fd, uint32_t handle, size_t size)
{
	struct drm_neuron_bo_mmap_offset m = { .handle = handle };
	void *p;

	OK(ioctl(fd, DRM_IOCTL_NEURON_BO_MMAP_OFFSET, &m));
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, m.offset);
	CHECK(p != MAP_FAILED, "mmap: %s", strerror(errno));
	return p;
}

void nt_close_bo(int fd, uint32_t handle)
{
	struct drm_gem_close c = { .handle = handle };

	OK(ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c));
}

int nt_bo_wait(int fd, uint32_t handle, int ms)
{
	struct drm_neuron_bo_wait w = { .handle = handle,
					.timeout_ns = nt_deadline_ms(ms) };

	return ioctl(fd, DRM_IOCTL_NEURON_BO_WAIT, &w) ? -errno : 0;
}

uint32_t nt_syncobj(int fd)
{
	struct drm_syncobj_create c = { 0 };

	OK(ioctl(fd, DRM_IOCTL_SYNCOBJ_CREATE, &c));
	return c.handle;
}

int nt_syncobj_wait(int fd, uint32_t h, uint64_t point, int ms)
{
	struct drm_syncobj_timeline_wait w = {
		.handles = (uintptr_t)&h, .points = (uintptr_t)&point,
		.count_handles = 1, .timeout_nsec = nt_deadline_ms(ms),
		.flags = DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
	};

	return ioctl(fd, DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &w) ? -errno : 0;
}

/* Status of a binary syncobj's fence: 1 signalled ok, 0 pending, -errno. */
int nt_fence_status(int fd, uint32_t h)
{
	struct drm_syncobj_handle e = {
		.handle = h, .flags = DRM_SYNCOBJ_HANDLE_TO_FD_FLAGS_EXPORT_SYNC_FILE,
	};
	struct sync_file_info info = { 0 };

	OK(ioctl(fd, DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD, &e));
	OK(ioctl(e.fd, SYNC_IOC_FILE_INFO, &info));
	close(e.fd);
	return info.status;
}

static int nt_submit(int fd, struct drm_neuron_submit *s,
		     struct drm_neuron_submit_bo *bos, uint32_t nbos,
		     const struct nt_sync *in, const struct nt_sync *out)
{
	struct drm_neuron_sync si = { 0 }, so = { 0 };

	s->bos = (uintptr_t)bos;
	s->bo_count = nbos;
	s->bo_stride = sizeof(*bos);
	s->sync_stride = sizeof(si);
	if (in) {
		si.handle = in->handle;
		si.point = in->point;
		s->in_syncs = (uintptr_t)&si;
		s->in_sync_count = 1;
	}
	if (out) {
		so.handle = out->handle;
		so.point = out->point;
		s->out_syncs = (uintptr_t)&so;
		s->out_sync_count = 1;
	}
	return ioctl(fd, DRM_IOCTL_NEURON_SUBMIT, s) ? -errno : 0;
}

int nt_dma(int fd, uint32_t q, uint32_t src, uint64_t soff, uint32_t dst,
	   uint64_t doff, uint64_t size, const struct nt_sync *in,
	   const struct nt_sync *out)
{
	struct drm_neuron_submit_bo bos[2] = {
		{ src, DRM_NEURON_BO_ACCESS_READ },
		{ dst, DRM_NEURON_BO_ACCESS_WRITE },
	};
	struct drm_neuron_dma_copy c = { 0, src == dst ? 0 : 1, soff, doff, size };
	struct drm_neuron_submit s = {
		.queue_type = DRM_NEURON_QUEUE_DMA, .queue_index = q,
		.copies = (uintptr_t)&c, .copy_count = 1, .copy_stride = sizeof(c),
	};

	if (src == dst)
		bos[0].flags |= DRM_NEURON_BO_ACCESS_WRITE;
	return nt_submit(fd, &s, bos, src == dst ? 1 : 2, in, out);
}

int nt_dma_repeat(int fd, uint32_t src, uint32_t dst, uint32_t n,
		  uint64_t size, const struct nt_sync *out)
{
	static struct drm_neuron_dma_copy c[DRM_NEURON_MAX_DMA_COPIES];
	struct drm_neuron_submit_bo bos[2] = {
		{ src, DRM_NEURON_BO_ACCESS_READ },
		{ dst, DRM_NEURON_BO_ACCESS_WRITE },
	};
	struct drm_neuron_submit s = {
		.queue_type = DRM_NEURON_QUEUE_DMA,
		.copies = (uintptr_t)c, .copy_count = n, .copy_stride = sizeof(c[0]),
	};
	uint32_t i;

	/* n may exceed the limit on purpose: the copies past it are never read. */
	for (i = 0; i < n && i < DRM_NEURON_MAX_DMA_COPIES; i++)
		c[i] = (struct drm_neuron_dma_copy){ 0, 1, 0, 0, size };
	return nt_submit(fd, &s, bos, 2, NULL, out);
}

int nt_compute(int fd, uint32_t core, uint32_t op, uint32_t arg,
	       uint32_t bo, const struct nt_sync *in, const struct nt_sync *out)
{
	struct drm_neuron_submit_bo b = {
		bo, DRM_NEURON_BO_ACCESS_READ | DRM_NEURON_BO_ACCESS_WRITE };
	uint32_t cmd[2] = { op, arg };
	struct drm_neuron_submit s = {
		.queue_type = DRM_NEURON_QUEUE_CORE, .queue_index = core,
		.cmd = (uintptr_t)cmd, .cmd_size = sizeof(cmd),
	};

	return nt_submit(fd, &s, &b, bo ? 1 : 0, in, out);
}

/* Fill a device BO with u32 values i from a host BO, or read it back. */
void nt_dev_fill(int fd, uint32_t dev, uint32_t n)
{
	uint32_t h = nt_bo(fd, n * 4, 0), *p = nt_map(fd, h, n * 4), i;

	for (i = 0; i < n; i++)
		p[i] = i;
	OK(nt_dma(fd, 0, h, 0, dev, 0, n * 4, NULL, NULL));
}

uint32_t *nt_dev_read(int fd, uint32_t dev, uint32_t n)
{
	uint32_t h = nt_bo(fd, n * 4, 0), *p = nt_map(fd, h, n * 4);

	OK(nt_dma(fd, 1, dev, 0, h, 0, n * 4, NULL, NULL));
	OK(nt_bo_wait(fd, h, 5000));
	return p;
}

char *nt_read_file(const char *path)
{
	static char buf[8192];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n >= 0, "read %s", path);
	buf[n] = 0;
	return buf;
}

long long nt_sysfs(int minor, const char *attr)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/class/accel/accel%d/device/%s",
		 minor, attr);
	return strtoll(nt_read_file(path), NULL, 0);
}

/* Value of "key:<tab>value" in /proc/self/fdinfo/fd, -1 if missing. */
long long nt_fdinfo(int fd, const char *key)
{
	char path[64], *s, *p;
	size_t n = strlen(key);

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	s = nt_read_file(path);
	for (p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == ':')
			return strtoll(p + n + 1, NULL, 0);
	return -1;
}

void nt_drop_privileges(void)
{
	gid_t g = NT_UID;

	CHECK(setgroups(1, &g) == 0);
	CHECK(setgid(NT_UID) == 0);
	CHECK(setuid(NT_UID) == 0);
	CHECK(geteuid() == NT_UID);
}


/* cgroup v2 (guest-init.sh mounts it with the memory controller on). */
static void nt_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);

	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text),
	      "write '%s' to %s: %s", text, path, strerror(errno));
	close(fd);
}

void nt_cgroup_create(const char *name, long long max_bytes)
{
	char path[128], val[32];

	snprintf(path, sizeof(path), NT_CGROUP "/%s", name);
	CHECK(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path,
	      strerror(errno));
	snprintf(path, sizeof(path), NT_CGROUP "/%s/memory.max", name);
	if (max_bytes > 0)
		snprintf(val, sizeof(val), "%lld", max_bytes);
	else
		snprintf(val, sizeof(val), "max");
	nt_write_file(path, val);
}

void nt_cgroup_enter(const char *name)
{
	char path[128], pid[32];

	snprintf(path, sizeof(path), NT_CGROUP "/%s/cgroup.procs", name);
	snprintf(pid, sizeof(pid), "%d", getpid());
	nt_write_file(path, pid);
}

long long nt_cgroup_value(const char *name, const char *file)
{
	char path[128];

	snprintf(path, sizeof(path), NT_CGROUP "/%s/%s", name, file);
	return strtoll(nt_read_file(path), NULL, 10);
}

/* Runs fn in a child process; returns its wait status. */
int nt_in_child(void (*fn)(void *), void *arg)
{
	int status;
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (!pid) {
		fn(arg);
		exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	return status;
}
