/* Issues io_uring sync requests on a file, one at a time, and prints each one's duration.
 *
 *   uring_sync FILE OP...     OP: fsync | fdatasync | sync_file_range
 *
 * fsync is IORING_OP_FSYNC, fdatasync is IORING_OP_FSYNC with IORING_FSYNC_DATASYNC, and
 * sync_file_range is IORING_OP_SYNC_FILE_RANGE with WAIT_BEFORE|WRITE|WAIT_AFTER over the whole
 * file. Output: one line "OP NANOSECONDS" per request, submission to completion. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int prep(struct io_uring_sqe *sqe, int fd, const char *op)
{
	if (!strcmp(op, "fsync"))
		io_uring_prep_fsync(sqe, fd, 0);
	else if (!strcmp(op, "fdatasync"))
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	else if (!strcmp(op, "sync_file_range"))
		io_uring_prep_sync_file_range(sqe, fd, 0, 0,
					      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
						      SYNC_FILE_RANGE_WAIT_AFTER);
	else
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	int fd, ret, i;

	if (argc < 3) {
		fprintf(stderr, "usage: %s FILE fsync|fdatasync|sync_file_range...\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	ret = io_uring_queue_init(4, &ring, 0);
	if (ret < 0) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret));
		return 1;
	}
	for (i = 2; i < argc; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		long long t0;

		if (!sqe || prep(sqe, fd, argv[i]) < 0) {
			fprintf(stderr, "cannot prepare %s\n", argv[i]);
			return 2;
		}
		t0 = now_ns();
		ret = io_uring_submit(&ring);
		if (ret != 1) {
			fprintf(stderr, "io_uring_submit: %d\n", ret);
			return 1;
		}
		ret = io_uring_wait_cqe(&ring, &cqe);
		if (ret < 0) {
			fprintf(stderr, "io_uring_wait_cqe: %s\n", strerror(-ret));
			return 1;
		}
		if (cqe->res < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(-cqe->res));
			return 1;
		}
		io_uring_cqe_seen(&ring, cqe);
		printf("%s %lld\n", argv[i], now_ns() - t0);
	}
	io_uring_queue_exit(&ring);
	close(fd);
	return 0;
}
