// SPDX-License-Identifier: GPL-2.0-only
/*
 * neuron_test runner.
 *
 * usage: neuron_test [-t job_timeout_ms] [name-prefix...]
 * Prints "PASS: name" or "FAIL: name" per test (reasons on "# " lines).
 */
#include <sys/wait.h>
#include <unistd.h>

#include "nt.h"

extern const struct nt_test __start_nt_tests[], __stop_nt_tests[];

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
