// openblas_worker times cblas_sgemm for bench/sgemm: it reads "n iters"
// lines on stdin and prints the seconds iters products took, after one
// untimed warm-up. Its banner names the BLAS library the process really
// mapped (from /proc/self/maps) and OpenBLAS's own configuration.
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern char *openblas_get_config(void);
extern int openblas_get_num_threads(void);

static void print_banner(void) {
	char line[4096], seen[4096] = "";
	FILE *maps = fopen("/proc/self/maps", "r");
	if (maps) {
		while (fgets(line, sizeof line, maps)) {
			char *path = strchr(line, '/');
			if (!path)
				continue;
			path[strcspn(path, "\n")] = 0;
			if (strstr(path, "blas") && strstr(path, ".so") && !strstr(seen, path)) {
				if (strlen(seen) + strlen(path) + 2 < sizeof seen) {
					strcat(seen, path);
					strcat(seen, " ");
				}
			}
		}
		fclose(maps);
	}
	printf("cblas_sgemm %s threads=%d loaded: %s\n", openblas_get_config(), openblas_get_num_threads(), seen);
	fflush(stdout);
}

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void) {
	print_banner();
	int n, iters, cached = 0;
	float *a = NULL, *b = NULL, *c = NULL;
	while (scanf("%d %d", &n, &iters) == 2) {
		if (n != cached) {
			free(a), free(b), free(c);
			a = malloc(sizeof(float) * n * n);
			b = malloc(sizeof(float) * n * n);
			c = malloc(sizeof(float) * n * n);
			if (!a || !b || !c) {
				fprintf(stderr, "openblas_worker: out of memory for n=%d\n", n);
				return 1;
			}
			srand(n);
			for (long i = 0; i < (long)n * n; i++) {
				a[i] = 2.0f * rand() / RAND_MAX - 1;
				b[i] = 2.0f * rand() / RAND_MAX - 1;
			}
			cached = n;
		}
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
		double start = now();
		for (int i = 0; i < iters; i++)
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
		printf("%.9f\n", now() - start);
		fflush(stdout);
	}
	return 0;
}
