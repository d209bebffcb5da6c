// SPDX-License-Identifier: GPL-2.0-only
/*
 * neuron_test runner and helpers.
 *
 * usage: neuron_test [-t job_timeout_ms] [name-prefix...]
 * Prints "PASS: name" or "FAIL: name" per test (reasons on "# " lines).
 */
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <linux/sync_file.h>

#include "nt.h"

int nt_job_timeout_ms = 500;

extern const struct nt_test __start_nt_tests[], __stop_nt_tests[];

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

int nt_open(int minor)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/dev/accel/accel%d", minor);
	fd = open(path, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
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

static int nt_selected(const char *name, int argc, char **argv)
{
	int i;

	if (!argc)	/* x_*: only when named (they unload the module) */
		return strncmp(name, "x_", 2) != 0;
	for (i = 0; i < argc; i++)
		if (!strncmp(name, argv[i], strlen(argv[i])))
			return 1;
	return 0;
}

/* Source order: by file (link order), then line. */
static const struct nt_test *nt_sorted[256];

static int nt_cmp(const void *a, const void *b)
{
	const struct nt_test *x = *(const struct nt_test **)a;
	const struct nt_test *y = *(const struct nt_test **)b;
	const struct nt_test *t;

	if (strcmp(x->file, y->file)) {
		for (t = __start_nt_tests; t < __stop_nt_tests; t++)
			if (!strcmp(t->file, x->file) || !strcmp(t->file, y->file))
				return !strcmp(t->file, x->file) ? -1 : 1;
	}
	return x->line - y->line;
}

int main(int argc, char **argv)
{
	const struct nt_test *t;
	int passed = 0, failed = 0, n = 0, k;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2 && !strcmp(argv[1], "-t")) {
		nt_job_timeout_ms = atoi(argv[2]);
		argc -= 2;
		argv += 2;
	}
	for (t = __start_nt_tests; t < __stop_nt_tests && n < 256; t++)
		nt_sorted[n++] = t;
	qsort(nt_sorted, n, sizeof(nt_sorted[0]), nt_cmp);
	for (k = 0; k < n; k++) {
		uint64_t t0 = nt_now_ns();
		int status;
		pid_t pid;

		t = nt_sorted[k];
		if (!nt_selected(t->name, argc - 1, argv + 1))
			continue;
		pid = fork();
		if (!pid) {
			alarm(60);
			t->fn();
			exit(0);
		}
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && !WEXITSTATUS(status)) {
			printf("PASS: %s (%llu ms)\n", t->name,
			       (unsigned long long)(nt_now_ns() - t0) / 1000000);
			passed++;
		} else {
			if (WIFSIGNALED(status))
				printf("# killed by signal %d\n", WTERMSIG(status));
			printf("FAIL: %s\n", t->name);
			failed++;
		}
	}
	printf("# neuron_test: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
