// SPDX-License-Identifier: GPL-2.0
/*
 * lpt_latency.ko: IRQ latency of a PC parallel port, mainline
 * Linux and PREEMPT_RT.
 *
 * Wiring: LPT pin 2 (D0) to pin 10 (nACK). Every period_us a pinned hard
 * hrtimer takes a timestamp and writes 0xFF to the data port; D0 rises, so
 * does nACK, and the port raises its IRQ. The handler takes a timestamp first
 * thing, optionally checks that the port raised the IRQ (check=1, the seed's
 * "inb" variant), then writes 0x00 to end the pulse a scope sees on pin 10.
 * One struct irqs_record_v1 per event goes to /dev/lpt_latency.
 *
 * The port is driven directly through a claimed I/O region, not through the
 * parport subsystem: parport would put its own IRQ dispatch between the
 * interrupt and our timestamp. Unload parport_pc (and lp, ppdev) first.
 *
 * trigger=emulated (emulation only) drives QEMU's emulated parallel port,
 * which never interrupts on a data write: it raises its IRQ on a control
 * write with INIT and SELECT set and STROBE clear when the previous control
 * value had the IRQ enabled, and a status read clears it. The periodic write
 * is that control write and the handler's clear is the status read, so
 * check=1 and check=0 make the same single inb there.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/hrtimer.h>
#include <linux/init.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/ioport.h>
#include <linux/irqnr.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/string.h>

#include "../include/irqs_params.h"
#include "../include/lpt_regs.h"
#include "irqs_common.h"

#define DRV_NAME		"lpt_latency"

static unsigned int period_us = 100;
module_param(period_us, uint, 0444);
MODULE_PARM_DESC(period_us, IRQS_DESC_PERIOD_US);

static bool check = true;
module_param(check, bool, 0444);
MODULE_PARM_DESC(check, IRQS_DESC_CHECK_LPT);

static int cpu = -1;
module_param(cpu, int, 0444);
MODULE_PARM_DESC(cpu, IRQS_DESC_CPU("periodic timer"));

static char *format = "v1";
module_param(format, charp, 0444);
MODULE_PARM_DESC(format, IRQS_DESC_FORMAT);

static unsigned int bufsize = 65536;
module_param(bufsize, uint, 0444);
MODULE_PARM_DESC(bufsize, IRQS_DESC_BUFSIZE);

static unsigned long base = 0x378;
module_param(base, ulong, 0444);
MODULE_PARM_DESC(base, "I/O base address of the parallel port (default 0x378)");

static int irq = 7;
module_param(irq, int, 0444);
MODULE_PARM_DESC(irq, "IRQ line of the parallel port (default 7)");

static bool threaded;
module_param(threaded, bool, 0444);
MODULE_PARM_DESC(threaded, "Handle the IRQ in an IRQ thread instead of hard IRQ context (default 0)");

static char *trigger = "loopback";
module_param(trigger, charp, 0444);
MODULE_PARM_DESC(trigger, "How the IRQ is raised: loopback (pin 2 wired to pin 10, real port) or emulated (QEMU's parallel port, emulation only) (default loopback)");

static struct irqs_stream stream;
module_param_cb(dropped, &irqs_counter_ops, &stream.dropped, 0444);
MODULE_PARM_DESC(dropped, "Read-only: records dropped because the ring was full");
module_param_cb(missed, &irqs_counter_ops, &stream.missed, 0444);
MODULE_PARM_DESC(missed, "Read-only: writes abandoned because no IRQ came");

static struct irqs_event ev;
static struct hrtimer timer;
static u64 period_ns;
static u16 rec_flags;
static u8 saved_control;
static bool irq_pinned;
static struct cpumask saved_affinity;
static bool emulated;		/* trigger=emulated */

/*
 * trigger=emulated: QEMU raises the IRQ on this control write because the
 * previous control value (IRQEN alone at load, then this one) had IRQEN set.
 */
#define LPT_CONTROL_EMU_FIRE \
	(LPT_CONTROL_IRQEN | LPT_CONTROL_SELECT | LPT_CONTROL_INIT)

/* Stop the port interrupting, before its handler goes away. */
static void lpt_quiet(void)
{
	if (emulated) {
		/* INIT clear: QEMU raises nothing on this write. */
		outb(LPT_CONTROL_SELECT, LPT_CONTROL(base));
		inb(LPT_STATUS(base));	/* drops a raised IRQ */
	} else {
		outb(saved_control & ~LPT_CONTROL_IRQEN, LPT_CONTROL(base));
	}
}

/* threaded=1's primary handler (hard IRQ context): where and when. */
static irqreturn_t lpt_primary(int irqn, void *dev_id)
{
	irqs_note_hard_irq(&ev);
	return IRQ_WAKE_THREAD;
}

/* IRQS_F_OFF_CPU if the kernel took this IRQ away from cpu=N. */
static u16 lpt_where(void)
{
	int hard_cpu = threaded ? READ_ONCE(ev.hard_cpu) : smp_processor_id();

	return irqs_off_cpu(irq_pinned, cpu, hard_cpu);
}

/* Hard IRQ context (or the IRQ thread with threaded=1). */
static irqreturn_t lpt_handler(int irqn, void *dev_id)
{
	u16 flags = rec_flags | irqs_test_hold();	/* 0 but in a test */
	u64 now = ktime_get_ns();	/* first: end of t_SW */
	u64 t_write;
	u8 status;

	if (emulated) {
		/*
		 * QEMU clears its IRQ only on a status read, so check=0 reads
		 * status too: both variants make this one inb, check=1 only
		 * also tests nACK (which QEMU keeps high: always "ours").
		 */
		status = inb(LPT_STATUS(base));
		if (check && !(status & LPT_STATUS_ACK))
			goto not_ours;
	} else {
		/*
		 * The seed read the data port and tested bit 0: that reads
		 * back the latch we wrote, true whatever raised the IRQ. The
		 * status port shows the level of pin 10, which is what the
		 * IRQ came from; the bus cost (one inb, t_rw) is the same.
		 */
		if (check && !(inb(LPT_STATUS(base)) & LPT_STATUS_ACK))
			goto not_ours;
		outb(0x00, LPT_DATA(base));	/* ends the pulse on pin 10 */
	}

	/* Book-keeping after the clear: it does not lengthen the pulse. */
	if (irqs_answers_earlier(&ev, threaded) ||
	    !atomic_xchg(&ev.pending, 0)) {
		/*
		 * No write outstanding, or the IRQ predates it: a stray
		 * edge, or an abandoned event's late answer.
		 */
		flags |= IRQS_F_NOT_OURS;
	} else if (READ_ONCE(ev.overrun)) {
		flags |= IRQS_F_OVERRUN;
	}
	t_write = READ_ONCE(ev.t_write_ns);
	flags |= lpt_where();
	irqs_stream_push(&stream, flags, t_write, now - t_write, 0);
	return IRQ_HANDLED;

not_ours:
	t_write = READ_ONCE(ev.t_write_ns);
	flags |= IRQS_F_NOT_OURS | lpt_where();
	irqs_stream_push(&stream, flags, t_write,
			 now - t_write, 0);
	return IRQ_NONE;
}

/* Hard hrtimer context, pinned to @cpu when cpu >= 0. */
static enum hrtimer_restart lpt_tick(struct hrtimer *t)
{
	hrtimer_forward_now(t, ns_to_ktime(period_ns));

	if (atomic_read(&ev.pending)) {
		/* A new write would make no edge while pin 10 is still high. */
		WRITE_ONCE(ev.overrun, true);
		if (!irqs_event_stale(&ev, ktime_get_ns(), period_ns))
			return HRTIMER_RESTART;
		if (atomic_cmpxchg(&ev.pending, 1, 0) != 1)
			return HRTIMER_RESTART;	/* the handler took it */
		if (emulated)
			inb(LPT_STATUS(base));
		else
			outb(0x00, LPT_DATA(base));
		irqs_stream_skip(&stream);
	}

	WRITE_ONCE(ev.overrun, false);
	WRITE_ONCE(ev.t_write_ns, ktime_get_ns());
	/* Publishes t_write_ns to the handler, which may run on another CPU. */
	atomic_set_release(&ev.pending, 1);
	if (emulated)
		outb(LPT_CONTROL_EMU_FIRE, LPT_CONTROL(base));
	else
		outb(0xff, LPT_DATA(base));
	return HRTIMER_RESTART;
}

static int __init lpt_check_params(bool *legacy)
{
	int ret = irqs_check_params(period_us, cpu, format, bufsize, legacy);

	if (ret)
		return ret;
	if (!base || base > 0xffff - (LPT_NPORTS - 1)) {
		pr_err("base=0x%lx invalid: accepted 0x1..0x%x\n",
		       base, 0xffff - (LPT_NPORTS - 1));
		return -EINVAL;
	}
	if (irq < 1 || irq >= nr_irqs) {
		pr_err("irq=%d invalid: accepted 1..%d\n", irq, nr_irqs - 1);
		return -EINVAL;
	}
	if (!trigger ||
	    (strcmp(trigger, "loopback") && strcmp(trigger, "emulated"))) {
		pr_err("trigger=%s invalid: accepted loopback or emulated\n",
		       trigger ? trigger : "(null)");
		return -EINVAL;
	}
	emulated = !strcmp(trigger, "emulated");
	return 0;
}

static int __init lpt_latency_init(void)
{
	bool legacy;
	int ret;

	ret = lpt_check_params(&legacy);
	if (ret)
		return ret;
	period_ns = (u64)period_us * NSEC_PER_USEC;
	rec_flags = (IRQS_IFACE_LPT << IRQS_F_IFACE_SHIFT) |
		    (check ? IRQS_F_CHECK : 0);

	ret = irqs_stream_init(&stream, DRV_NAME, bufsize, legacy);
	if (ret)
		return ret;

	if (!request_region(base, LPT_NPORTS, DRV_NAME)) {
		pr_err("I/O ports 0x%lx-0x%lx are busy: unload parport_pc (rmmod lp ppdev parport_pc) first\n",
		       base, base + LPT_NPORTS - 1);
		ret = -EBUSY;
		goto err_stream;
	}
	saved_control = inb(LPT_CONTROL(base));
	outb(0x00, LPT_DATA(base));
	if (emulated)
		inb(LPT_STATUS(base));	/* drop an IRQ left raised in QEMU */

	atomic_set(&ev.pending, 0);
	if (threaded)
		ret = request_threaded_irq(irq, lpt_primary, lpt_handler,
					   IRQF_ONESHOT, DRV_NAME, &stream);
	else
		ret = request_irq(irq, lpt_handler, IRQF_NO_THREAD, DRV_NAME,
				  &stream);
	if (ret) {
		pr_err("cannot get IRQ %d (%d): is it in use? see /proc/interrupts\n",
		       irq, ret);
		goto err_region;
	}
	irq_pinned = irqs_irq_pin(irq, cpu, &saved_affinity);

	/*
	 * Output mode (bit 5 clear) with the ACK interrupt enabled. In QEMU
	 * this write (INIT clear) raises nothing; it arms the next one.
	 */
	outb(LPT_CONTROL_IRQEN, LPT_CONTROL(base));

	ret = irqs_stream_register(&stream);
	if (ret) {
		pr_err("cannot register /dev/%s (%d)\n", DRV_NAME, ret);
		goto err_irq;
	}

	hrtimer_init(&timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_HARD);
	timer.function = lpt_tick;
	ret = irqs_timer_start(&timer, cpu, period_ns);
	if (ret) {
		pr_err("cannot start the timer on CPU %d (%d)\n", cpu, ret);
		goto err_misc;
	}

	pr_info("port 0x%lx irq %d trigger=%s period %u us check=%d cpu=%d format=%s%s\n",
		base, irq, trigger, period_us, check, cpu, format,
		threaded ? " threaded" : "");
	return 0;

err_misc:
	irqs_stream_deregister(&stream);
err_irq:
	lpt_quiet();
	if (irq_pinned)
		irqs_irq_unpin(irq, &saved_affinity);
	free_irq(irq, &stream);
err_region:
	outb(0x00, LPT_DATA(base));
	outb(saved_control, LPT_CONTROL(base));
	release_region(base, LPT_NPORTS);
err_stream:
	irqs_stream_destroy(&stream);
	return ret;
}

static void __exit lpt_latency_exit(void)
{
	hrtimer_cancel(&timer);
	irqs_stream_deregister(&stream);
	lpt_quiet();
	if (irq_pinned)
		irqs_irq_unpin(irq, &saved_affinity);
	free_irq(irq, &stream);
	outb(0x00, LPT_DATA(base));
	outb(saved_control, LPT_CONTROL(base));
	release_region(base, LPT_NPORTS);
	irqs_stream_destroy(&stream);
	pr_info("unloaded: %llu events, %u dropped, %u missed\n",
		(unsigned long long)atomic64_read(&stream.seq), stream.dropped,
		stream.missed);
}

module_init(lpt_latency_init);
module_exit(lpt_latency_exit);

MODULE_DESCRIPTION("Parallel-port IRQ latency with a sequence-numbered record stream");
MODULE_AUTHOR("irq-station contributors");
MODULE_LICENSE("GPL");
