// SPDX-License-Identifier: GPL-2.0
/*
 * pcie_latency.ko: IRQ latency of the DE4 PCIe IRQ echoer,
 * mainline Linux and PREEMPT_RT.
 *
 * Every period_us a pinned hard hrtimer takes a timestamp and writes an
 * event tag to SEND; the board raises its IRQ (MSI where available) and
 * irqflagtap, the pin a scope watches. The handler takes a timestamp first
 * thing, then clears the IRQ by reading RECV, which also returns the tag so
 * that one read both checks and clears (check=0). With check=1 it first
 * reads STATUS, the PCIe analogue of the LPT "inb" check. Boards whose
 * VERSION says they have timestamps report the pulse width they measured,
 * in board clock cycles, in WIDTH; it goes into the record as hw_width_ns.
 *
 * profile=edu (emulation only) drives QEMU's "edu" device (PCI 1234:11e8)
 * instead, so that the same timer, handler, ring and character device run in
 * a VM: the write raises the IRQ through 0x60 with the tag as its value, and
 * the handler acknowledges through 0x64, with check=1 first reading the
 * interrupt status at 0x24. Its timing is QEMU's, not a bus's; it has no
 * board timestamps.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/hrtimer.h>
#include <linux/init.h>
#include <linux/interrupt.h>
#include <linux/io.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/pci.h>
#include <linux/string.h>

#include "../include/echoer_regs.h"
#include "../include/irqs_params.h"
#include "irqs_common.h"

#define DRV_NAME		"pcie_latency"
#define ECHOER_VENDOR		0x1172	/* Altera */
#define ECHOER_DEVICE		0x0de4

/* QEMU's educational PCI device (hw/misc/edu.c): emulation only. */
#define EDU_VENDOR		0x1234	/* QEMU */
#define EDU_DEVICE		0x11e8
#define EDU_BAR			0
#define EDU_REG_SPAN		0x80	/* 32-bit registers; BAR0 is 1 MiB */
#define EDU_REG_IDENT		0x00	/* 0xMMmm00ed: version major.minor */
#define EDU_IDENT_MAGIC		0xed
#define EDU_REG_IRQ_STATUS	0x24	/* OR of the values raised, not acked */
#define EDU_REG_IRQ_RAISE	0x60	/* ORs the value in, raises the IRQ */
#define EDU_REG_IRQ_ACK		0x64	/* clears the bits written */

static unsigned int period_us = 100;
module_param(period_us, uint, 0444);
MODULE_PARM_DESC(period_us, IRQS_DESC_PERIOD_US);

static bool check = true;
module_param(check, bool, 0444);
MODULE_PARM_DESC(check, IRQS_DESC_CHECK_PCIE);

static int cpu = -1;
module_param(cpu, int, 0444);
MODULE_PARM_DESC(cpu, IRQS_DESC_CPU("periodic timer"));

static char *format = "v1";
module_param(format, charp, 0444);
MODULE_PARM_DESC(format, IRQS_DESC_FORMAT);

static unsigned int bufsize = 65536;
module_param(bufsize, uint, 0444);
MODULE_PARM_DESC(bufsize, IRQS_DESC_BUFSIZE);

static bool threaded;
module_param(threaded, bool, 0444);
MODULE_PARM_DESC(threaded, "Handle the IRQ in an IRQ thread instead of hard IRQ context (default 0)");

static char *profile = "de4";
module_param(profile, charp, 0444);
MODULE_PARM_DESC(profile, "Device: de4 (DE4 IRQ echoer, PCI 1172:0de4) or edu (QEMU's edu device, PCI 1234:11e8, emulation only) (default de4)");

static struct irqs_stream stream;
module_param_cb(dropped, &irqs_counter_ops, &stream.dropped, 0444);
MODULE_PARM_DESC(dropped, "Read-only: records dropped because the ring was full");
module_param_cb(missed, &irqs_counter_ops, &stream.missed, 0444);
MODULE_PARM_DESC(missed, "Read-only: writes abandoned because no IRQ came");

struct echoer {
	struct pci_dev *pdev;
	bool edu;		/* profile=edu: QEMU's edu device */
	void __iomem *regs;
	unsigned int irq;
	u32 version;
	u32 clock_hz;		/* 0: no board-side timestamps */
	bool has_status;	/* STATUS exists (not a seed-era design) */
	u32 tag;		/* value of the last SEND, published via ev */
	struct irqs_event ev;
	struct hrtimer timer;
	bool irq_pinned;
	struct cpumask saved_affinity;
};

static struct echoer echoer;	/* one board per module instance */
static u64 period_ns;
static u16 rec_flags;
static bool use_edu;		/* profile=edu */

/* After the device's clear (hard IRQ context, or the thread with threaded=1). */
static void echoer_push(struct echoer *e, u16 flags, u64 now, u32 width)
{
	u64 t_write = READ_ONCE(e->ev.t_write_ns);
	int hard_cpu = threaded ? READ_ONCE(e->ev.hard_cpu)
				: smp_processor_id();

	flags |= irqs_off_cpu(e->irq_pinned, cpu, hard_cpu);
	irqs_stream_push(&stream, flags, t_write, now - t_write, width);
}

/* threaded=1's primary handler (hard IRQ context): where and when. */
static irqreturn_t echoer_primary(int irqn, void *dev_id)
{
	struct echoer *e = dev_id;

	irqs_note_hard_irq(&e->ev);
	return IRQ_WAKE_THREAD;
}

/* Hard IRQ context (or the IRQ thread with threaded=1). */
static irqreturn_t echoer_handler(int irqn, void *dev_id)
{
	struct echoer *e = dev_id;
	u16 flags = rec_flags | irqs_test_hold();	/* 0 but in a test */
	u64 now = ktime_get_ns();	/* first: end of t_SW */
	u32 width = 0;
	u32 status, value, cycles;

	if (check) {
		status = ioread32(e->regs + ECHOER_REG_STATUS);
		/*
		 * A seed-era board has no STATUS (the read returns
		 * ECHOER_OTHER_VALUE): it is still made, for its bus time,
		 * and RECV's value decides.
		 */
		if (e->has_status && !(status & ECHOER_STATUS_IRQ)) {
			echoer_push(e, flags | IRQS_F_NOT_OURS, now, 0);
			return IRQ_NONE;	/* a device sharing INTx */
		}
	}

	value = ioread32(e->regs + ECHOER_REG_RECV);	/* clears, ends pulse */

	/* Book-keeping after the clear: it does not lengthen the pulse. */
	if (value != READ_ONCE(e->tag) ||
	    irqs_answers_earlier(&e->ev, threaded) ||
	    !atomic_xchg(&e->ev.pending, 0)) {
		echoer_push(e, flags | IRQS_F_NOT_OURS, now, 0);
		return IRQ_NONE;
	}
	if (READ_ONCE(e->ev.overrun))
		flags |= IRQS_F_OVERRUN;
	if (e->clock_hz) {
		cycles = ioread32(e->regs + ECHOER_REG_WIDTH);
		width = min_t(u64, U32_MAX,
			      div_u64((u64)cycles * NSEC_PER_SEC, e->clock_hz));
		flags |= IRQS_F_HW_WIDTH;
	}
	echoer_push(e, flags, now, width);
	return IRQ_HANDLED;
}

/*
 * profile=edu. Hard IRQ context (or the IRQ thread with threaded=1, where
 * IRQF_ONESHOT keeps a level INTx masked until the acknowledge). edu's INTx
 * stays asserted until the acknowledge, so it is done here, never deferred.
 * check=1: read the interrupt status (is it ours?), then acknowledge what it
 * showed, two bus operations like the LPT inb + outb. check=0: acknowledge
 * the last raised tag at once, one write and no ownership test.
 */
static irqreturn_t edu_handler(int irqn, void *dev_id)
{
	struct echoer *e = dev_id;
	u16 flags = rec_flags | irqs_test_hold();	/* 0 but in a test */
	u64 now = ktime_get_ns();	/* first: end of t_SW */
	u32 status;

	if (check) {
		status = ioread32(e->regs + EDU_REG_IRQ_STATUS);
		if (!status) {
			echoer_push(e, flags | IRQS_F_NOT_OURS, now, 0);
			return IRQ_NONE;	/* a device sharing INTx */
		}
		iowrite32(status, e->regs + EDU_REG_IRQ_ACK);
	} else {
		status = READ_ONCE(e->tag);
		iowrite32(status, e->regs + EDU_REG_IRQ_ACK);
	}

	/* Book-keeping after the acknowledge, as for the echoer. */
	if (status != READ_ONCE(e->tag) ||
	    irqs_answers_earlier(&e->ev, threaded) ||
	    !atomic_xchg(&e->ev.pending, 0)) {
		/* Acknowledged, but not the outstanding event (or none). */
		echoer_push(e, flags | IRQS_F_NOT_OURS, now, 0);
		return IRQ_HANDLED;
	}
	if (READ_ONCE(e->ev.overrun))
		flags |= IRQS_F_OVERRUN;
	echoer_push(e, flags, now, 0);	/* no board timestamps: no HW_WIDTH */
	return IRQ_HANDLED;
}

/* Hard hrtimer context, pinned to @cpu when cpu >= 0. */
static enum hrtimer_restart echoer_tick(struct hrtimer *t)
{
	struct echoer *e = container_of(t, struct echoer, timer);
	u32 tag;

	hrtimer_forward_now(t, ns_to_ktime(period_ns));

	if (atomic_read(&e->ev.pending)) {
		/* A SEND while pending would not raise a new edge. */
		WRITE_ONCE(e->ev.overrun, true);
		if (!irqs_event_stale(&e->ev, ktime_get_ns(), period_ns))
			return HRTIMER_RESTART;
		if (atomic_cmpxchg(&e->ev.pending, 1, 0) != 1)
			return HRTIMER_RESTART;	/* the handler took it */
		if (e->edu)
			iowrite32(e->tag, e->regs + EDU_REG_IRQ_ACK);
		else
			ioread32(e->regs + ECHOER_REG_RECV);
		irqs_stream_skip(&stream);
	}

	tag = e->tag + 1;
	if (e->edu && !tag)
		tag = 1;	/* edu raises nothing for a value of 0 */
	WRITE_ONCE(e->tag, tag);
	WRITE_ONCE(e->ev.overrun, false);
	WRITE_ONCE(e->ev.t_write_ns, ktime_get_ns());
	/* Publishes tag and t_write_ns to the handler on any CPU. */
	atomic_set_release(&e->ev.pending, 1);
	iowrite32(tag, e->regs + (e->edu ? EDU_REG_IRQ_RAISE : ECHOER_REG_SEND));
	return HRTIMER_RESTART;
}

static void echoer_identify(struct echoer *e)
{
	struct device *dev = &e->pdev->dev;

	e->version = ioread32(e->regs + ECHOER_REG_VERSION);
	e->has_status = e->version != ECHOER_OTHER_VALUE;
	e->clock_hz = 0;
	if (!e->has_status) {
		dev_info(dev, "seed-era echoer (no VERSION register): no STATUS, no board timestamps\n");
		return;
	}
	if (ECHOER_VERSION_MAJOR(e->version) >= ECHOER_VERSION_MAJOR_TIMESTAMPS) {
		e->clock_hz = ioread32(e->regs + ECHOER_REG_CLOCK_HZ);
		if (!e->clock_hz || e->clock_hz == ECHOER_OTHER_VALUE) {
			dev_warn(dev, "CLOCK_HZ reads %u: board widths disabled\n",
				 e->clock_hz);
			e->clock_hz = 0;
		}
	}
	dev_info(dev, "echoer version %u.%u, board clock %u Hz\n",
		 ECHOER_VERSION_MAJOR(e->version),
		 ECHOER_VERSION_MINOR(e->version), e->clock_hz);
}

static int edu_identify(struct echoer *e)
{
	u32 ident = ioread32(e->regs + EDU_REG_IDENT);

	if ((ident & 0xff) != EDU_IDENT_MAGIC) {
		dev_err(&e->pdev->dev, "IDENT reads 0x%08x: not QEMU's edu device\n",
			ident);
		return -ENODEV;
	}
	e->version = ident;
	e->has_status = false;
	e->clock_hz = 0;
	dev_info(&e->pdev->dev, "QEMU edu device %u.%u: emulation only, no board timestamps\n",
		 ident >> 24, (ident >> 16) & 0xff);
	return 0;
}

static int echoer_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct echoer *e = &echoer;
	unsigned short want_vendor = use_edu ? EDU_VENDOR : ECHOER_VENDOR;
	unsigned short want_device = use_edu ? EDU_DEVICE : ECHOER_DEVICE;
	const char *what = use_edu ? "edu device" : "echoer";
	int bar = use_edu ? EDU_BAR : ECHOER_BAR;
	unsigned int span = use_edu ? EDU_REG_SPAN : ECHOER_REG_SPAN;
	unsigned long irqflags;
	int ret;

	/* Only the selected profile's id is in id_table; new_id may add more. */
	if (pdev->vendor != want_vendor || pdev->device != want_device) {
		dev_info(&pdev->dev, "not binding: profile=%s drives PCI %04x:%04x only\n",
			 profile, want_vendor, want_device);
		return -ENODEV;
	}
	if (e->pdev) {
		dev_err(&pdev->dev, "%s drives one echoer; %s already has it\n",
			DRV_NAME, pci_name(e->pdev));
		return -EBUSY;
	}
	e->pdev = pdev;
	e->edu = use_edu;

	ret = pci_enable_device(pdev);
	if (ret) {
		dev_err(&pdev->dev, "cannot enable device (%d)\n", ret);
		goto err_claim;
	}
	ret = pci_request_regions(pdev, DRV_NAME);
	if (ret) {
		dev_err(&pdev->dev, "BARs busy (%d)\n", ret);
		goto err_disable;
	}
	if (pci_resource_len(pdev, bar) < span) {
		dev_err(&pdev->dev, "BAR%d is %llu bytes, the %s needs %u\n",
			bar, (unsigned long long)pci_resource_len(pdev, bar),
			what, span);
		ret = -ENODEV;
		goto err_regions;
	}
	e->regs = pci_iomap(pdev, bar, span);
	if (!e->regs) {
		ret = -ENOMEM;
		goto err_regions;
	}
	pci_set_master(pdev);	/* MSI is a memory write by the device */

	if (ioread32(e->regs + (e->edu ? EDU_REG_IDENT : ECHOER_REG_VERSION)) ==
	    U32_MAX) {
		dev_err(&pdev->dev, "BAR%d reads all ones: board not responding\n",
			bar);
		ret = -EIO;
		goto err_master;
	}
	if (e->edu) {
		ret = edu_identify(e);
		if (ret)
			goto err_master;
	} else {
		echoer_identify(e);
	}

	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSI | PCI_IRQ_LEGACY);
	if (ret < 0) {
		dev_err(&pdev->dev, "no IRQ vector (%d)\n", ret);
		goto err_master;
	}
	e->irq = pci_irq_vector(pdev, 0);
	/* Clear an IRQ left pending by an earlier run. */
	if (e->edu)
		iowrite32(U32_MAX, e->regs + EDU_REG_IRQ_ACK);
	else
		ioread32(e->regs + ECHOER_REG_RECV);

	atomic_set(&e->ev.pending, 0);
	irqflags = pdev->msi_enabled ? 0 : IRQF_SHARED;
	if (threaded)
		ret = request_threaded_irq(e->irq, echoer_primary,
					   e->edu ? edu_handler : echoer_handler,
					   irqflags | IRQF_ONESHOT, DRV_NAME, e);
	else
		ret = request_irq(e->irq, e->edu ? edu_handler : echoer_handler,
				  irqflags | IRQF_NO_THREAD, DRV_NAME, e);
	if (ret) {
		dev_err(&pdev->dev, "cannot get IRQ %u (%d)\n", e->irq, ret);
		goto err_vectors;
	}
	e->irq_pinned = irqs_irq_pin(e->irq, cpu, &e->saved_affinity);

	hrtimer_init(&e->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_HARD);
	e->timer.function = echoer_tick;
	ret = irqs_timer_start(&e->timer, cpu, period_ns);
	if (ret) {
		dev_err(&pdev->dev, "cannot start the timer on CPU %d (%d)\n",
			cpu, ret);
		goto err_irq;
	}

	pci_set_drvdata(pdev, e);
	dev_info(&pdev->dev, "profile=%s irq %u (%s) period %u us check=%d cpu=%d format=%s%s\n",
		 profile, e->irq, pdev->msi_enabled ? "MSI" : "INTx",
		 period_us, check, cpu, format, threaded ? " threaded" : "");
	return 0;

err_irq:
	if (e->irq_pinned)
		irqs_irq_unpin(e->irq, &e->saved_affinity);
	free_irq(e->irq, e);
err_vectors:
	pci_free_irq_vectors(pdev);
err_master:
	pci_clear_master(pdev);
	pci_iounmap(pdev, e->regs);
err_regions:
	pci_release_regions(pdev);
err_disable:
	pci_disable_device(pdev);
err_claim:
	e->pdev = NULL;
	return ret;
}

static void echoer_remove(struct pci_dev *pdev)
{
	struct echoer *e = pci_get_drvdata(pdev);

	hrtimer_cancel(&e->timer);
	if (e->irq_pinned)
		irqs_irq_unpin(e->irq, &e->saved_affinity);
	free_irq(e->irq, e);
	if (e->edu)
		iowrite32(U32_MAX, e->regs + EDU_REG_IRQ_ACK);
	else
		ioread32(e->regs + ECHOER_REG_RECV);	/* leave irqflagtap low */
	pci_free_irq_vectors(pdev);
	pci_clear_master(pdev);
	pci_iounmap(pdev, e->regs);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	e->pdev = NULL;
}

/* Only the DE4 is exported for autoloading: edu is chosen by hand. */
static const struct pci_device_id echoer_ids[] = {
	{ PCI_DEVICE(ECHOER_VENDOR, ECHOER_DEVICE) },
	{ }
};
MODULE_DEVICE_TABLE(pci, echoer_ids);

static const struct pci_device_id edu_ids[] = {
	{ PCI_DEVICE(EDU_VENDOR, EDU_DEVICE) },
	{ }
};

static struct pci_driver echoer_driver = {
	.name = DRV_NAME,
	.id_table = echoer_ids,
	.probe = echoer_probe,
	.remove = echoer_remove,
};

static int __init pcie_latency_init(void)
{
	bool legacy;
	int ret;

	ret = irqs_check_params(period_us, cpu, format, bufsize, &legacy);
	if (ret)
		return ret;
	if (!profile || (strcmp(profile, "de4") && strcmp(profile, "edu"))) {
		pr_err("profile=%s invalid: accepted de4 or edu\n",
		       profile ? profile : "(null)");
		return -EINVAL;
	}
	use_edu = !strcmp(profile, "edu");
	/* The driver binds the selected profile's device, never the other. */
	echoer_driver.id_table = use_edu ? edu_ids : echoer_ids;
	period_ns = (u64)period_us * NSEC_PER_USEC;
	rec_flags = (IRQS_IFACE_PCIE << IRQS_F_IFACE_SHIFT) |
		    (check ? IRQS_F_CHECK : 0);

	ret = irqs_stream_init(&stream, DRV_NAME, bufsize, legacy);
	if (ret)
		return ret;
	ret = irqs_stream_register(&stream);
	if (ret) {
		pr_err("cannot register /dev/%s (%d)\n", DRV_NAME, ret);
		goto err_stream;
	}
	ret = pci_register_driver(&echoer_driver);
	if (ret)
		goto err_misc;
	/* Probing is synchronous: no board bound now means none is there. */
	if (!echoer.pdev) {
		if (use_edu)
			pr_err("profile=edu: no QEMU edu device (PCI %04x:%04x) found or bound (QEMU needs -device edu)\n",
			       EDU_VENDOR, EDU_DEVICE);
		else
			pr_err("profile=de4: no DE4 echoer (PCI %04x:%04x) found or bound (in QEMU with -device edu, load with profile=edu)\n",
			       ECHOER_VENDOR, ECHOER_DEVICE);
		ret = -ENODEV;
		goto err_driver;
	}
	return 0;

err_driver:
	pci_unregister_driver(&echoer_driver);
err_misc:
	irqs_stream_deregister(&stream);
err_stream:
	irqs_stream_destroy(&stream);
	return ret;
}

static void __exit pcie_latency_exit(void)
{
	pci_unregister_driver(&echoer_driver);
	irqs_stream_deregister(&stream);
	irqs_stream_destroy(&stream);
	pr_info("unloaded: %llu events, %u dropped, %u missed\n",
		(unsigned long long)atomic64_read(&stream.seq), stream.dropped,
		stream.missed);
}

module_init(pcie_latency_init);
module_exit(pcie_latency_exit);

MODULE_DESCRIPTION("PCIe (DE4 IRQ echoer) IRQ latency with a sequence-numbered record stream");
MODULE_AUTHOR("irq-station contributors");
MODULE_LICENSE("GPL");
