// SPDX-License-Identifier: GPL-2.0
/*
 * gpio_responder_user - the user-space GPIO responder (seed 002): waits for
 * edges on an input GPIO line and answers each one by setting an output
 * line, so that a scope on both lines measures the response time of a
 * user-space program (the kernel module gpio_responder.ko is the in-kernel
 * counterpart).
 *
 * Two ways to the lines:
 *   character device (default): libgpiod v1 (1.6, Debian 12 / Raspberry Pi OS
 *     bookworm): edge events from the kernel's line event queue, each with
 *     its edge type; the output is set through a line handle.
 *   --sysfs: the legacy /sys/class/gpio interface the seed used: export,
 *     direction, edge, poll() for POLLPRI on value, read the level, write the
 *     output's value file. Lines it exported are unexported at exit.
 *
 * --mode echo sets the output to the input's level (the event's edge type,
 * or the level read in sysfs mode); --mode toggle flips the output at each
 * edge. --priority runs it SCHED_FIFO, --cpu pins it; memory is locked
 * (mlockall) so that no page fault lies between edge and answer.
 * SIGTERM and SIGINT end it cleanly; it prints the edges it handled.
 *
 * Build: make -C target_modules/tools gpio_responder_user (needs libgpiod-dev)
 */

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <gpiod.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef GPIOD_LINE_BULK_MAX_LINES
#error "gpio_responder_user is written for the libgpiod v1 API (1.6: Debian 12, Raspberry Pi OS bookworm)"
#endif

#define PROG		"gpio_responder_user"
#define SYSFS_GPIO	"/sys/class/gpio"
#define EVENT_BATCH	16

enum edge { EDGE_RISING, EDGE_FALLING, EDGE_BOTH };

struct options {
	const char *chip;
	long in, out;
	enum edge edge;
	bool toggle;
	int priority;		/* 0: leave the scheduling policy alone */
	int cpu;		/* -1: no pinning */
	unsigned long count;	/* 0: until a signal */
	bool sysfs;
};

/* set by the signal handler: a lock-free atomic is safe to touch there */
static atomic_int stop_signal;

static void on_signal(int sig)
{
	atomic_store(&stop_signal, sig);
}

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void print_usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--chip CHIP] --in N --out N [--edge rising|falling|both]\n"
		"       [--mode echo|toggle] [--priority P] [--cpu C] [--count N] [--sysfs]\n"
		"\n"
		"  --chip CHIP    character device: gpiochip name, path, number or label (default gpiochip0);\n"
		"                 --sysfs: the label of a chip in " SYSFS_GPIO "/gpiochip*/label\n"
		"  --in N         input (stimulus) line: offset in the chip; with --sysfs and no --chip,\n"
		"                 a global GPIO number\n"
		"  --out N        output (response) line, the same way\n"
		"  --edge E       edges answered (default both)\n"
		"  --mode M       echo: output := input level (default); toggle: flip per edge\n"
		"  --priority P   run SCHED_FIFO at priority P (1..99)\n"
		"  --cpu C        pin to CPU C\n"
		"  --count N      exit after N edges (default: until SIGTERM/SIGINT)\n"
		"  --sysfs        use the legacy " SYSFS_GPIO " interface instead of the character device\n");
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		die("%s %s: expected an integer in %ld..%ld", opt, s, min, max);
	return v;
}

static void parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "chip", required_argument, NULL, 'c' },
		{ "in", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },
		{ "edge", required_argument, NULL, 'e' },
		{ "mode", required_argument, NULL, 'm' },
		{ "priority", required_argument, NULL, 'p' },
		{ "cpu", required_argument, NULL, 'C' },
		{ "count", required_argument, NULL, 'n' },
		{ "sysfs", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct options){ .in = -1, .out = -1, .edge = EDGE_BOTH, .cpu = -1 };
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o->chip = optarg;
			break;
		case 'i':
			o->in = parse_long("--in", optarg, 0, INT_MAX);
			break;
		case 'o':
			o->out = parse_long("--out", optarg, 0, INT_MAX);
			break;
		case 'e':
			if (!strcmp(optarg, "rising"))
				o->edge = EDGE_RISING;
			else if (!strcmp(optarg, "falling"))
				o->edge = EDGE_FALLING;
			else if (!strcmp(optarg, "both"))
				o->edge = EDGE_BOTH;
			else
				die("--edge %s: expected rising, falling or both", optarg);
			break;
		case 'm':
			if (!strcmp(optarg, "echo"))
				o->toggle = false;
			else if (!strcmp(optarg, "toggle"))
				o->toggle = true;
			else
				die("--mode %s: expected echo or toggle", optarg);
			break;
		case 'p':
			o->priority = parse_long("--priority", optarg, 1, 99);
			break;
		case 'C':
			o->cpu = parse_long("--cpu", optarg, 0, CPU_SETSIZE - 1);
			break;
		case 'n':
			o->count = parse_long("--count", optarg, 1, LONG_MAX);
			break;
		case 's':
			o->sysfs = true;
			break;
		case 'h':
			print_usage(stdout);
			exit(0);
		default:
			print_usage(stderr);
			exit(2);
		}
	}
	if (optind != argc) {
		print_usage(stderr);
		die("unexpected argument: %s", argv[optind]);
	}
	if (o->in < 0 || o->out < 0) {
		print_usage(stderr);
		die("--in and --out are required");
	}
	if (o->in == o->out)
		die("--in and --out name the same line (%ld)", o->in);
}

static const char *edge_name(enum edge e)
{
	return e == EDGE_RISING ? "rising" : e == EDGE_FALLING ? "falling" : "both";
}

/* Real-time set-up: signals first, so that nothing is left behind. */
static void setup_process(const struct options *o, sigset_t *wait_mask)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block;

	/* no SA_RESTART; blocked except while waiting, so none is lost */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, wait_mask);
	sigdelset(wait_mask, SIGTERM);
	sigdelset(wait_mask, SIGINT);

	if (o->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			die("cannot pin to CPU %d: %s", o->cpu, strerror(errno));
	}
	if (o->priority) {
		struct sched_param sp = { .sched_priority = o->priority };

		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			die("cannot run SCHED_FIFO %d: %s (root or CAP_SYS_NICE needed)",
			    o->priority, strerror(errno));
	}
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		fprintf(stderr, PROG ": warning: mlockall: %s (page faults may delay answers)\n",
			strerror(errno));
}

/* Waits for fd to have @events; false when a stop signal came. */
static bool wait_for(int fd, short events, const sigset_t *wait_mask)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	while (!atomic_load(&stop_signal)) {
		int n = ppoll(&pfd, 1, NULL, wait_mask);

		if (n > 0)
			return true;
		if (n < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
	}
	return false;
}

static void report_ready(const char *how)
{
	printf(PROG ": ready: %s\n", how);
	fflush(stdout);
}

/* ---- character device (libgpiod v1) ---- */

static unsigned long run_chardev(const struct options *o, const sigset_t *wait_mask)
{
	const char *name = o->chip ? o->chip : "gpiochip0";
	struct gpiod_line_event ev[EVENT_BATCH];
	struct gpiod_line *in, *out;
	struct gpiod_chip *chip;
	unsigned long handled = 0;
	char how[256];
	int level, ret, fd;

	chip = gpiod_chip_open_lookup(name);
	if (!chip)
		die("cannot open GPIO chip %s: %s (gpiodetect lists them)", name, strerror(errno));
	in = gpiod_chip_get_line(chip, o->in);
	out = gpiod_chip_get_line(chip, o->out);
	if (!in || !out)
		die("%s has no line %ld (it has %u)", gpiod_chip_name(chip),
		    in ? o->out : o->in, gpiod_chip_num_lines(chip));

	if (o->edge == EDGE_RISING)
		ret = gpiod_line_request_rising_edge_events(in, PROG);
	else if (o->edge == EDGE_FALLING)
		ret = gpiod_line_request_falling_edge_events(in, PROG);
	else
		ret = gpiod_line_request_both_edges_events(in, PROG);
	if (ret)
		die("cannot request %s line %ld for %s edge events: %s", gpiod_chip_name(chip),
		    o->in, edge_name(o->edge), strerror(errno));
	/* echo: the response starts at the stimulus's level; toggle: low */
	level = o->toggle ? 0 : gpiod_line_get_value(in) > 0;
	if (gpiod_line_request_output(out, PROG, level))
		die("cannot request %s line %ld as an output: %s", gpiod_chip_name(chip),
		    o->out, strerror(errno));
	fd = gpiod_line_event_get_fd(in);
	if (fd < 0)
		die("no event file descriptor: %s", strerror(errno));

	snprintf(how, sizeof(how), "chardev %s (%s) in %ld out %ld edge %s mode %s",
		 gpiod_chip_name(chip), gpiod_chip_label(chip), o->in, o->out,
		 edge_name(o->edge), o->toggle ? "toggle" : "echo");
	report_ready(how);

	while ((!o->count || handled < o->count) && wait_for(fd, POLLIN, wait_mask)) {
		int n = gpiod_line_event_read_multiple(in, ev, EVENT_BATCH);

		if (n < 0)
			die("reading line events: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			level = o->toggle ? !level :
				ev[i].event_type == GPIOD_LINE_EVENT_RISING_EDGE;
			if (gpiod_line_set_value(out, level))
				die("setting the output: %s", strerror(errno));
			handled++;
		}
	}
	gpiod_line_release(out);
	gpiod_line_release(in);
	gpiod_chip_close(chip);
	return handled;
}

/* ---- legacy sysfs ---- */

struct sysfs_line {
	long gpio;
	bool exported;	/* by us: unexport at exit */
};

static struct sysfs_line sys_in = { .gpio = -1 }, sys_out = { .gpio = -1 };

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static void write_attr(long gpio, const char *attr, const char *text)
{
	char path[128];

	snprintf(path, sizeof(path), SYSFS_GPIO "/gpio%ld/%s", gpio, attr);
	if (write_file(path, text))
		die("writing \"%s\" to %s: %s", text, path, strerror(errno));
}

static void sysfs_export(struct sysfs_line *l)
{
	char num[24], path[128];

	snprintf(num, sizeof(num), "%ld", l->gpio);
	if (write_file(SYSFS_GPIO "/export", num)) {
		if (errno != EBUSY)
			die("cannot export GPIO %ld: %s", l->gpio, strerror(errno));
		/* exported before us: used as it is, left exported */
	} else {
		l->exported = true;
	}
	/* udev may still be setting the permissions of the new files */
	snprintf(path, sizeof(path), SYSFS_GPIO "/gpio%ld/value", l->gpio);
	for (int i = 0; access(path, R_OK | W_OK); i++) {
		if (i == 200)
			die("%s did not become accessible: %s", path, strerror(errno));
		nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	}
}

static void sysfs_unexport(struct sysfs_line *l)
{
	char num[24];

	if (!l->exported)
		return;
	snprintf(num, sizeof(num), "%ld", l->gpio);
	if (write_file(SYSFS_GPIO "/unexport", num))
		fprintf(stderr, PROG ": warning: cannot unexport GPIO %ld: %s\n", l->gpio,
			strerror(errno));
	l->exported = false;
}

static void sysfs_cleanup(void)
{
	sysfs_unexport(&sys_out);
	sysfs_unexport(&sys_in);
}

static long read_long_file(const char *path)
{
	char buf[32] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/* The base and line count of the sysfs gpiochip whose label is @label. */
static void sysfs_chip_range(const char *label, long *base, long *ngpio)
{
	DIR *d = opendir(SYSFS_GPIO);
	struct dirent *e;

	if (!d)
		die("cannot list " SYSFS_GPIO ": %s (a kernel without CONFIG_GPIO_SYSFS?)",
		    strerror(errno));
	while ((e = readdir(d))) {
		char path[300], text[128] = "";
		ssize_t n;
		int fd;

		if (strncmp(e->d_name, "gpiochip", 8))
			continue;
		snprintf(path, sizeof(path), SYSFS_GPIO "/%s/label", e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
		if (n <= 0)
			continue;
		text[strcspn(text, "\n")] = '\0';
		if (strcmp(text, label))
			continue;
		snprintf(path, sizeof(path), SYSFS_GPIO "/%s/base", e->d_name);
		*base = read_long_file(path);
		snprintf(path, sizeof(path), SYSFS_GPIO "/%s/ngpio", e->d_name);
		*ngpio = read_long_file(path);
		closedir(d);
		if (*base < 0 || *ngpio <= 0)
			die("cannot read the base and ngpio of %s (%s)", e->d_name, label);
		return;
	}
	closedir(d);
	die("no GPIO chip labelled \"%s\" in " SYSFS_GPIO, label);
}

static int read_level(int fd)
{
	char c;

	if (pread(fd, &c, 1, 0) != 1)
		die("reading the input's value: %s", strerror(errno));
	return c == '1';
}

static unsigned long run_sysfs(const struct options *o, const sigset_t *wait_mask)
{
	unsigned long handled = 0;
	char path[128], how[256];
	int in_fd, out_fd, level;

	sys_in.gpio = o->in;
	sys_out.gpio = o->out;
	if (o->chip) {
		long base, ngpio;

		sysfs_chip_range(o->chip, &base, &ngpio);
		if (o->in >= ngpio || o->out >= ngpio)
			die("chip %s has lines 0..%ld", o->chip, ngpio - 1);
		sys_in.gpio += base;
		sys_out.gpio += base;
	}
	atexit(sysfs_cleanup);
	sysfs_export(&sys_in);
	sysfs_export(&sys_out);

	write_attr(sys_in.gpio, "direction", "in");
	write_attr(sys_in.gpio, "edge", edge_name(o->edge));
	snprintf(path, sizeof(path), SYSFS_GPIO "/gpio%ld/value", sys_in.gpio);
	in_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (in_fd < 0)
		die("cannot open %s: %s", path, strerror(errno));
	/* the read also clears a pending notification */
	level = read_level(in_fd);
	if (o->toggle)
		level = 0;
	write_attr(sys_out.gpio, "direction", level ? "high" : "low");
	snprintf(path, sizeof(path), SYSFS_GPIO "/gpio%ld/value", sys_out.gpio);
	out_fd = open(path, O_WRONLY | O_CLOEXEC);
	if (out_fd < 0)
		die("cannot open %s: %s", path, strerror(errno));

	snprintf(how, sizeof(how), "sysfs gpio%ld -> gpio%ld edge %s mode %s", sys_in.gpio,
		 sys_out.gpio, edge_name(o->edge), o->toggle ? "toggle" : "echo");
	report_ready(how);

	while ((!o->count || handled < o->count) &&
	       wait_for(in_fd, POLLPRI | POLLERR, wait_mask)) {
		int in_level = read_level(in_fd);	/* acknowledges the edge */

		level = o->toggle ? !level : in_level;
		if (pwrite(out_fd, level ? "1" : "0", 1, 0) != 1)
			die("setting the output: %s", strerror(errno));
		handled++;
	}
	close(out_fd);
	close(in_fd);
	sysfs_cleanup();
	return handled;
}

int main(int argc, char **argv)
{
	struct options o;
	sigset_t wait_mask;
	unsigned long handled;
	int sig;

	parse_args(argc, argv, &o);
	setup_process(&o, &wait_mask);
	handled = o.sysfs ? run_sysfs(&o, &wait_mask) : run_chardev(&o, &wait_mask);
	sig = atomic_load(&stop_signal);
	printf(PROG ": handled %lu edges%s%s\n", handled, sig ? ", stopped by " : "",
	       sig ? strsignal(sig) : "");
	return 0;
}
