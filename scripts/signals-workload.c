/* signals-workload.c: the program scripts/capture-signals.sh records with perf.
 *
 * Four threads in two pairs. Each pair owns one 2 MiB-aligned 2 MiB slice of a shared buffer (one
 * co-access bucket of the model); every round each thread gives back its own half of its pair's slice
 * (MADV_DONTNEED) and then writes every page of the whole slice, so both threads of a pair take page
 * faults in the same slice, and threads of different pairs never do. ROUNDS rounds, SLEEP_US apart.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLICE (2u << 20)
#define PAGE 4096u
#define ROUNDS 15
#define SLEEP_US 100000

static char *slices;

static void *worker(void *arg)
{
	long id = (long)arg;
	char *slice = slices + (size_t)(id / 2) * SLICE;
	char *mine = slice + (size_t)(id % 2) * (SLICE / 2);
	for (int r = 0; r < ROUNDS; r++) {
		madvise(mine, SLICE / 2, MADV_DONTNEED);
		for (size_t off = 0; off < SLICE; off += PAGE)
			((volatile char *)slice)[off] = (char)r;
		usleep(SLEEP_US);
	}
	return NULL;
}

int main(void)
{
	/* 2 MiB alignment by over-allocating; no transparent huge pages, so one fault per 4 kB page. */
	char *raw = mmap(NULL, 3 * SLICE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return 1;
	slices = (char *)(((uintptr_t)raw + SLICE - 1) & ~((uintptr_t)SLICE - 1));
	madvise(slices, 2 * SLICE, MADV_NOHUGEPAGE);
	pthread_t t[4];
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	printf("%d\n", (int)getpid());
	return 0;
}
