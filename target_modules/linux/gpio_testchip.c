// SPDX-License-Identifier: GPL-2.0
/*
 * gpio_testchip.ko: TEST ONLY. A GPIO chip with no hardware behind it, to
 * exercise a GPIO responder (gpio_responder.ko, gpio_responder_user) in a
 * virtual machine through the real gpiolib paths: the chip is registered
 * with gpiolib and has its own interrupt domain (GPIOLIB_IRQCHIP), so
 * gpiod_to_irq() + request_irq(), the GPIO character device and the legacy
 * sysfs interface all work on it. Nothing it does has a timing meaning.
 * Never load it on a machine you measure.
 *
 * Chip label "irqstation-test", two lines:
 *
 *   line 0  input only; its level is set by writing 0 or 1 to
 *           <debugfs>/irqstation-testchip/in. A change of level is an edge:
 *           if the line's interrupt is requested for that edge and not
 *           masked, it is raised from hard interrupt context (an irq_work,
 *           IRQ_WORK_HARD_IRQ, so also on PREEMPT_RT) and the write returns
 *           once the hard handler has run (a threaded handler may still be
 *           running then).
 *   line 1  output only; its level reads in .../out, and .../out_changes
 *           counts its changes of level since load.
 *
 * can_sleep=1 registers the chip as one whose accessors may sleep (as a
 * GPIO expander on I2C or SPI would; its own never do), to test that a
 * consumer refuses or adapts.
 *
 * .../edges counts the edges driven on line 0, .../raised the interrupts
 * delivered for them. An edge the interrupt is not requested for (no
 * consumer, other trigger, or the line masked at that moment) raises
 * nothing and is not remembered. Lines and counters live under one raw
 * spinlock: get and set may be called from hard interrupt context, also on
 * PREEMPT_RT.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/debugfs.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/gpio/driver.h>
#include <linux/init.h>
#include <linux/interrupt.h>
#include <linux/irq.h>
#include <linux/irq_work.h>
#include <linux/irqdomain.h>
#include <linux/kernel.h>
#include <linux/kstrtox.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/platform_device.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>

#define DRV_NAME	"gpio_testchip"
#define TC_LABEL	"irqstation-test"
#define TC_DEBUGFS_DIR	"irqstation-testchip"
#define TC_NGPIO	2
#define TC_LINE_IN	0
#define TC_LINE_OUT	1

struct testchip {
	struct gpio_chip gc;
	struct platform_device *pdev;
	struct dentry *dir;
	struct irq_work raise;
	struct mutex drive_lock;	/* one write to "in" at a time */
	raw_spinlock_t lock;		/* the fields below */
	unsigned int in_level;
	unsigned int out_level;
	unsigned int irq_type;		/* IRQ_TYPE_EDGE_* requested on line 0 */
	bool irq_masked;
	unsigned int pending_edge;	/* IRQ_TYPE_EDGE_* being raised */
	unsigned int edges;
	unsigned int raised;
	unsigned int out_changes;
};

static struct testchip tc;

static bool can_sleep;
module_param(can_sleep, bool, 0444);
MODULE_PARM_DESC(can_sleep, "Register the chip as one that can sleep (like an I2C expander), to test consumers' refusals (default 0)");

static int tc_get_direction(struct gpio_chip *gc, unsigned int offset)
{
	return offset == TC_LINE_IN ? GPIO_LINE_DIRECTION_IN :
				      GPIO_LINE_DIRECTION_OUT;
}

static void tc_set_out(int value)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&tc.lock, flags);
	if (tc.out_level != !!value) {
		tc.out_level = !!value;
		tc.out_changes++;
	}
	raw_spin_unlock_irqrestore(&tc.lock, flags);
}

static int tc_direction_input(struct gpio_chip *gc, unsigned int offset)
{
	return offset == TC_LINE_IN ? 0 : -EPERM;
}

static int tc_direction_output(struct gpio_chip *gc, unsigned int offset,
			       int value)
{
	if (offset != TC_LINE_OUT)
		return -EPERM;
	tc_set_out(value);
	return 0;
}

static int tc_get(struct gpio_chip *gc, unsigned int offset)
{
	unsigned long flags;
	int value;

	raw_spin_lock_irqsave(&tc.lock, flags);
	value = offset == TC_LINE_IN ? tc.in_level : tc.out_level;
	raw_spin_unlock_irqrestore(&tc.lock, flags);
	return value;
}

static void tc_set(struct gpio_chip *gc, unsigned int offset, int value)
{
	if (offset == TC_LINE_OUT)
		tc_set_out(value);
}

/* Only the input line can interrupt. */
static void tc_init_irq_valid_mask(struct gpio_chip *gc,
				   unsigned long *valid_mask,
				   unsigned int ngpios)
{
	bitmap_zero(valid_mask, ngpios);
	set_bit(TC_LINE_IN, valid_mask);
}

static void tc_irq_mask(struct irq_data *d)
{
	unsigned long flags;

	raw_spin_lock_irqsave(&tc.lock, flags);
	tc.irq_masked = true;
	raw_spin_unlock_irqrestore(&tc.lock, flags);
	gpiochip_disable_irq(&tc.gc, irqd_to_hwirq(d));
}

static void tc_irq_unmask(struct irq_data *d)
{
	unsigned long flags;

	gpiochip_enable_irq(&tc.gc, irqd_to_hwirq(d));
	raw_spin_lock_irqsave(&tc.lock, flags);
	tc.irq_masked = false;
	raw_spin_unlock_irqrestore(&tc.lock, flags);
}

static int tc_irq_set_type(struct irq_data *d, unsigned int type)
{
	unsigned long flags;

	/* Edges only: the line has no level that stays asserted. */
	if (type & ~IRQ_TYPE_EDGE_BOTH)
		return -EINVAL;
	raw_spin_lock_irqsave(&tc.lock, flags);
	tc.irq_type = type;
	raw_spin_unlock_irqrestore(&tc.lock, flags);
	return 0;
}

static const struct irq_chip tc_irq_chip = {
	.name = TC_LABEL,
	.irq_mask = tc_irq_mask,
	.irq_unmask = tc_irq_unmask,
	.irq_set_type = tc_irq_set_type,
	.flags = IRQCHIP_IMMUTABLE | IRQCHIP_SKIP_SET_WAKE,
	GPIOCHIP_IRQ_RESOURCE_HELPERS,
};

/* Hard interrupt context (IRQ_WORK_HARD_IRQ): as a GPIO controller's IRQ. */
static void tc_raise_irq(struct irq_work *work)
{
	unsigned int irq = irq_find_mapping(tc.gc.irq.domain, TC_LINE_IN);
	bool deliver;

	raw_spin_lock(&tc.lock);
	deliver = irq && !tc.irq_masked && (tc.irq_type & tc.pending_edge);
	if (deliver)
		tc.raised++;
	raw_spin_unlock(&tc.lock);
	if (deliver)
		generic_handle_irq(irq);
}

static ssize_t tc_in_write(struct file *file, const char __user *ubuf,
			   size_t len, loff_t *ppos)
{
	unsigned long flags;
	bool level, edge;
	int ret;

	ret = kstrtobool_from_user(ubuf, len, &level);
	if (ret)
		return ret;

	mutex_lock(&tc.drive_lock);
	raw_spin_lock_irqsave(&tc.lock, flags);
	edge = tc.in_level != level;
	if (edge) {
		tc.in_level = level;
		tc.edges++;
		tc.pending_edge = level ? IRQ_TYPE_EDGE_RISING :
					  IRQ_TYPE_EDGE_FALLING;
	}
	raw_spin_unlock_irqrestore(&tc.lock, flags);
	if (edge) {
		irq_work_queue(&tc.raise);
		irq_work_sync(&tc.raise);	/* the hard handler has run */
	}
	mutex_unlock(&tc.drive_lock);
	return len;
}

static ssize_t tc_read_value(char __user *ubuf, size_t len, loff_t *ppos,
			     const unsigned int *field)
{
	unsigned long flags;
	unsigned int value;
	char buf[16];
	int n;

	raw_spin_lock_irqsave(&tc.lock, flags);
	value = *field;
	raw_spin_unlock_irqrestore(&tc.lock, flags);
	n = scnprintf(buf, sizeof(buf), "%u\n", value);
	return simple_read_from_buffer(ubuf, len, ppos, buf, n);
}

static ssize_t tc_in_read(struct file *file, char __user *ubuf, size_t len,
			  loff_t *ppos)
{
	return tc_read_value(ubuf, len, ppos, &tc.in_level);
}

static ssize_t tc_counter_read(struct file *file, char __user *ubuf,
			       size_t len, loff_t *ppos)
{
	return tc_read_value(ubuf, len, ppos, file->private_data);
}

static const struct file_operations tc_in_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = tc_in_read,
	.write = tc_in_write,
	.llseek = default_llseek,
};

static const struct file_operations tc_counter_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = tc_counter_read,
	.llseek = default_llseek,
};

static void tc_debugfs_init(void)
{
	tc.dir = debugfs_create_dir(TC_DEBUGFS_DIR, NULL);
	debugfs_create_file("in", 0600, tc.dir, NULL, &tc_in_fops);
	debugfs_create_file("out", 0400, tc.dir, &tc.out_level,
			    &tc_counter_fops);
	debugfs_create_file("out_changes", 0400, tc.dir, &tc.out_changes,
			    &tc_counter_fops);
	debugfs_create_file("edges", 0400, tc.dir, &tc.edges,
			    &tc_counter_fops);
	debugfs_create_file("raised", 0400, tc.dir, &tc.raised,
			    &tc_counter_fops);
}

static int __init gpio_testchip_init(void)
{
	struct gpio_irq_chip *girq;
	int ret;

	raw_spin_lock_init(&tc.lock);
	mutex_init(&tc.drive_lock);
	tc.raise = IRQ_WORK_INIT_HARD(tc_raise_irq);
	tc.irq_masked = true;

	tc.pdev = platform_device_register_simple(DRV_NAME, PLATFORM_DEVID_NONE,
						  NULL, 0);
	if (IS_ERR(tc.pdev)) {
		ret = PTR_ERR(tc.pdev);
		pr_err("cannot register the platform device %s (%d)\n",
		       DRV_NAME, ret);
		return ret;
	}

	tc.gc.label = TC_LABEL;
	tc.gc.parent = &tc.pdev->dev;
	tc.gc.owner = THIS_MODULE;
	tc.gc.base = -1;
	tc.gc.ngpio = TC_NGPIO;
	tc.gc.can_sleep = can_sleep;
	tc.gc.get_direction = tc_get_direction;
	tc.gc.direction_input = tc_direction_input;
	tc.gc.direction_output = tc_direction_output;
	tc.gc.get = tc_get;
	tc.gc.set = tc_set;

	girq = &tc.gc.irq;
	gpio_irq_chip_set_chip(girq, &tc_irq_chip);
	girq->handler = handle_simple_irq;
	girq->default_type = IRQ_TYPE_NONE;
	girq->init_valid_mask = tc_init_irq_valid_mask;

	ret = gpiochip_add_data(&tc.gc, &tc);
	if (ret) {
		pr_err("cannot register GPIO chip %s (%d)\n", TC_LABEL, ret);
		platform_device_unregister(tc.pdev);
		return ret;
	}
	tc_debugfs_init();
	pr_info("TEST ONLY: GPIO chip %s%s, %d lines from global GPIO %d: line %d input (debugfs %s/in), line %d output\n",
		TC_LABEL, can_sleep ? " (can sleep)" : "", TC_NGPIO,
		tc.gc.base, TC_LINE_IN, TC_DEBUGFS_DIR, TC_LINE_OUT);
	return 0;
}

static void __exit gpio_testchip_exit(void)
{
	debugfs_remove_recursive(tc.dir);	/* waits for writers */
	irq_work_sync(&tc.raise);
	gpiochip_remove(&tc.gc);
	platform_device_unregister(tc.pdev);
	pr_info("unloaded: %u input edges, %u interrupts raised, %u output changes\n",
		tc.edges, tc.raised, tc.out_changes);
}

module_init(gpio_testchip_init);
module_exit(gpio_testchip_exit);

MODULE_DESCRIPTION("TEST ONLY: a GPIO chip driven through debugfs, with an interrupt on its input line, to test GPIO responders");
MODULE_AUTHOR("irq-station contributors");
MODULE_LICENSE("GPL");
