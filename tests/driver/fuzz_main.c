// SPDX-License-Identifier: GPL-2.0-only
/*
 * neuron_fuzz: ioctl fuzzer of neuron.ko (two devices loaded).
 *
 * usage: neuron_fuzz [-s seconds] [-n calls] [-S seed] [-w workers]
 *
 * Runs, until the time or call budget is spent:
 *  - fuzz workers (processes of FUZZ_THREADS calling threads, fuzz_ops.c),
 *    the last one unprivileged after opening its files; each also closes
 *    and dup2()s one of its descriptors under the calling threads, and
 *    forks children that submit on inherited descriptors and exit;
 *  - the checked worker (fuzz_valid.c) on accel0;
 *  - the test engine on accel0, killed and restarted every 3 s.
 * Worker w's calls come from seed + w, so "-S seed" replays them (not their
 * interleaving). Prints calls, errors by errno, the seed and "N crashes"; a
 * crash is a worker or engine that died of a signal nobody sent it (its last
 * calls are printed), or a new kernel taint bit. Exits 1 on a crash, a
 * call that must fail and did not (a violation) or wrong data.
 */
#define _GNU_SOURCE	/* strerrorname_np */
#include <dirent.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"

#define RESTART_NS	3000000000ull	/* engine restarts */
#define HANG_NS		60000000000ull	/* a worker this late hangs */

struct fuzz_stats *fuzz_stats;
static uint64_t max_calls = 2000000, deadline;

int fuzz_count(struct fuzz_worker *w, const char *what, int ret)
{
	int e = ret < 0 ? errno : 0;

	atomic_fetch_add(&fuzz_stats->calls, 1);
	if (ret < 0) {
		atomic_fetch_add(&fuzz_stats->errors, 1);
		atomic_fetch_add(&fuzz_stats->by_errno[e < 134 ? e : 0], 1);
	}
	fuzz_trace(w, "%s -> %d %s", what, ret, ret < 0 ? strerror(e) : "");
	errno = e;
	return ret;
}

void fuzz_trace(struct fuzz_worker *w, const char *fmt, ...)
{
	unsigned int i = atomic_fetch_add(&fuzz_stats->trace_pos[w->id], 1);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fuzz_stats->trace[w->id][i % FUZZ_TRACE], 48, fmt, ap);
	va_end(ap);
}

static int fuzz_done(void)
{
	return nt_now_ns() >= deadline ||
	       atomic_load(&fuzz_stats->calls) >= max_calls;
}

static void *calling_thread(void *arg)
{
	struct fuzz_thread *t = arg;

	while (!fuzz_done())
		fuzz_one(t);
	return NULL;
}

/*
 * Closes and replaces the churn descriptor under the calling threads. Always
 * by dup2(): the file is closed as by close(), but the number never comes
 * free, so no other thread's new descriptor lands on it.
 */
static void churn(struct fuzz_worker *w, struct fuzz_rng *rng)
{
	int fd = w->files[FUZZ_CHURN].fd, fresh;

	while (!fuzz_done()) {
		usleep(1000 + fuzz_below(rng, 4000));
		fresh = w->privileged ? nt_open(w->files[FUZZ_CHURN].minor) :
					dup(w->files[fuzz_below(rng, 2)].fd);
		if (fuzz_chance(rng, 2)) {
			CHECK(dup2(w->devnull, fd) == fd);	/* closed */
			usleep(fuzz_below(rng, 2000));
		}
		CHECK(dup2(fresh, fd) == fd);
		close(fresh);
	}
}

/* A worker's own fault: where it was, for addr2line on the binary. */
static void on_crash(int sig)
{
	void *frames[32];
	int n = backtrace(frames, 32), i;
	char line[64];

	for (i = 0; i < n; i++) {
		int len = snprintf(line, sizeof(line), "# fuzz: crash frame %d: %p\n", i, frames[i]);

		if (write(1, line, len) < 0)
			break;
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void fuzz_worker_run(int id, uint64_t seed, int privileged)
{
	static const int minors[FUZZ_MAX_FILES] = { 0, 1, 1, 0 };
	struct fuzz_worker w = { .id = id, .privileged = privileged };
	struct fuzz_thread t[FUZZ_THREADS];
	pthread_t th[FUZZ_THREADS];
	struct fuzz_rng rng = { seed * 0x9e3779b97f4a7c15ull + 1 };
	int i;

	signal(SIGSEGV, on_crash);
	signal(SIGABRT, on_crash);
	signal(SIGBUS, on_crash);
	for (i = 0; i < FUZZ_MAX_FILES; i++)
		fuzz_file_open(&w, &w.files[i], minors[i]);
	w.devnull = open("/dev/null", O_RDWR);
	if (!privileged)
		nt_drop_privileges();
	for (i = 0; i < FUZZ_THREADS; i++) {
		t[i] = (struct fuzz_thread){ &w, { fuzz_next(&rng) | 1 }, i };
		CHECK(pthread_create(&th[i], NULL, calling_thread, &t[i]) == 0);
	}
	churn(&w, &rng);
	for (i = 0; i < FUZZ_THREADS; i++)
		pthread_join(th[i], NULL);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static pid_t spawn(void (*fn)(int, uint64_t, int), int id, uint64_t seed, int priv)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (!pid) {
		fn(id, seed, priv);
		exit(0);
	}
	return pid;
}

static void valid_run(int id, uint64_t seed, int priv)
{
	fuzz_valid_worker(0, deadline);
}

static void print_trace(int id)
{
	unsigned int n = atomic_load(&fuzz_stats->trace_pos[id]), i;

	for (i = n > FUZZ_TRACE ? n - FUZZ_TRACE : 0; i < n; i++)
		printf("#   worker %d call %u: %s\n", id, i, fuzz_stats->trace[id][i % FUZZ_TRACE]);
}

/*
 * The OOM kills in the fuzzer's memory cgroup so far (memory.events), -1 if it
 * cannot tell. HBM is charged to its opener's cgroup: workers that allocate it,
 * memfds and jobs until memory.max get killed by the cgroup's OOM killer, which
 * is the charging working, not a crash.
 */
static long memcg_oom_kills(void)
{
	char cg[256] = "", path[512], key[64];
	long n = -1, v;
	FILE *f = fopen("/proc/self/cgroup", "r");

	if (!f)
		return -1;
	if (fscanf(f, "0::%255s", cg) != 1)
		cg[0] = 0;
	fclose(f);
	if (!cg[0])
		return -1;
	snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.events", cg);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fscanf(f, "%63s %ld", key, &v) == 2)
		if (!strcmp(key, "oom_kill"))
			n = v;
	fclose(f);
	return n;
}

static long oom_kills_seen;

/* A worker's end: 1 if it crashed. */
static int reap(pid_t pid, int status, int id, const char *what)
{
	long oom;

	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return 0;
	oom = memcg_oom_kills();
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && oom > oom_kills_seen) {
		oom_kills_seen++;
		printf("# fuzz: %s %d killed by its memory cgroup's OOM killer (memory.max reached): not a crash\n",
		       what, id);
		return 0;
	}
	if (WIFSIGNALED(status))
		printf("# fuzz: %s %d killed by signal %d (%s)\n", what, id,
		       WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		printf("# fuzz: %s %d exited with %d\n", what, id, WEXITSTATUS(status));
	if (id >= 0)
		print_trace(id);
	return 1;
}

/* Workers that ended: 0 or 1 each for a crash; the engine restarted if it died. */
static int reap_workers(pid_t *pids, int workers, int *left, pid_t *engine)
{
	int status, i, crashes = 0;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid == *engine) {	/* it died on its own */
			crashes += reap(pid, status, -1, "engine");
			*engine = nt_engine_start(0);
			continue;
		}
		for (i = 0; i <= workers && pids[i] != pid; i++)
			;
		if (i > workers)
			continue;
		crashes += reap(pid, status, i, i ? "worker" : "checked worker");
		pids[i] = 0;
		(*left)--;
	}
	return crashes;
}

static void print_stacks(pid_t pid)
{
	char path[320], line[256];
	struct dirent *d;
	DIR *dir;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	while (dir && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stack", pid, d->d_name);
		f = fopen(path, "r");
		printf("#   task %s:\n", d->d_name);
		while (f && fgets(line, sizeof(line), f))
			printf("#     %s", line);
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
}

/* Workers still running long after the deadline hang: show where, end them. */
static int kill_hung(pid_t *pids, int workers)
{
	int i, n = 0;

	for (i = 0; i <= workers; i++) {
		if (!pids[i])
			continue;
		printf("# fuzz: worker %d (pid %d) still running %llu s after the deadline; kernel stacks:\n",
		       i, pids[i], HANG_NS / 1000000000ull);
		print_stacks(pids[i]);
		if (i)
			print_trace(i);
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
		n++;
	}
	return n;
}

static long taint(void)
{
	return strtol(nt_read_file("/proc/sys/kernel/tainted"), NULL, 10);
}

static void report(uint64_t seed, int workers, int crashes, long taint0)
{
	struct fuzz_stats *s = fuzz_stats;
	int e;

	printf("# fuzz: seed %#llx, %d workers x %d threads (1 unprivileged), replay: neuron_fuzz -S %#llx -w %d\n",
	       (unsigned long long)seed, workers, FUZZ_THREADS,
	       (unsigned long long)seed, workers);
	printf("# fuzz: %llu calls, %llu errors:", (unsigned long long)s->calls,
	       (unsigned long long)s->errors);
	for (e = 0; e < 134; e++)
		if (s->by_errno[e])
			printf(" %s %llu", e ? strerrorname_np(e) : "other",
			       (unsigned long long)s->by_errno[e]);
	printf("\n# fuzz: checked jobs: %llu DMA, %llu compute; %llu compute jobs lost to engine restarts or timeouts; %llu engine restarts\n",
	       (unsigned long long)s->dma_checked, (unsigned long long)s->compute_checked,
	       (unsigned long long)s->valid_tolerated,
	       (unsigned long long)s->engine_restarts);
	printf("# fuzz: taint %ld -> %ld\n", taint0, taint());
	printf("# fuzz: %d crashes, %llu violations, %llu wrong results\n", crashes,
	       (unsigned long long)s->violations, (unsigned long long)s->mismatches);
}

int main(int argc, char **argv)
{
	uint64_t seed = nt_now_ns() ^ (uint64_t)getpid() << 32, seconds = 45;
	int workers = 4, opt, i, crashes = 0, status, left;
	pid_t pids[16], engine;
	uint64_t next;
	long taint0 = taint();

	setvbuf(stdout, NULL, _IOLBF, 0);
	oom_kills_seen = memcg_oom_kills();
	if (oom_kills_seen < 0)
		oom_kills_seen = 0;
	while ((opt = getopt(argc, argv, "s:n:S:w:")) != -1) {
		switch (opt) {
		case 's': seconds = strtoull(optarg, NULL, 0); break;
		case 'n': max_calls = strtoull(optarg, NULL, 0); break;
		case 'S': seed = strtoull(optarg, NULL, 0); break;
		case 'w': workers = atoi(optarg); break;
		default: return 2;
		}
	}
	if (workers < 2 || workers > 15)
		return 2;
	printf("# fuzz: seed %#llx, %llu s, at most %llu calls\n",
	       (unsigned long long)seed, (unsigned long long)seconds,
	       (unsigned long long)max_calls);
	fuzz_stats = mmap(NULL, sizeof(*fuzz_stats), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(fuzz_stats != MAP_FAILED);
	fuzz_pointers_init();
	deadline = nt_now_ns() + seconds * 1000000000ull;

	engine = nt_engine_start(0);
	pids[0] = spawn(valid_run, 0, 0, 1);
	for (i = 1; i <= workers; i++)
		pids[i] = spawn(fuzz_worker_run, i, seed + i, i < workers);
	for (left = workers + 1, next = nt_now_ns() + RESTART_NS; left;) {
		usleep(100000);
		crashes += reap_workers(pids, workers, &left, &engine);
		if (nt_now_ns() > deadline + HANG_NS) {
			crashes += kill_hung(pids, workers);
			break;
		}
		if (nt_now_ns() < next)
			continue;
		next = nt_now_ns() + RESTART_NS;
		/* The engine dies with jobs in hand (it must not die alone). */
		kill(engine, SIGKILL);
		CHECK(waitpid(engine, &status, 0) == engine);
		if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
			crashes += reap(engine, status, -1, "engine");
		atomic_fetch_add(&fuzz_stats->engine_restarts, 1);
		engine = nt_engine_start(0);
	}
	nt_engine_stop(engine);
	if (taint() != taint0) {
		printf("# fuzz: new taint bits %#lx\n", taint() & ~taint0);
		crashes++;
	}
	report(seed, workers, crashes, taint0);
	return crashes || fuzz_stats->violations || fuzz_stats->mismatches ||
	       !fuzz_stats->dma_checked;
}
