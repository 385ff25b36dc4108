// SPDX-License-Identifier: GPL-2.0
/*
 * gpio_responder.ko: answers every edge on an input GPIO line by driving an
 * output GPIO line, so that an oscilloscope on both lines measures the
 * kernel's response time (the delay from the stimulus edge to the response
 * edge), as in the GPIO response experiment of seed 002.
 *
 * Lines: chip=<label> in=<offset> out=<offset> names two lines of one GPIO
 * chip by the chip's label (e.g. "pinctrl-bcm2835" on a Raspberry Pi 1-3)
 * and the lines' offsets in it. They are resolved through gpiolib's
 * machine lookup tables (Documentation/driver-api/gpio/board.rst): the
 * module registers a device of its own, a lookup table mapping its "in" and
 * "out" connections to <label>:<offset>, and gets the descriptors with
 * gpiod_get() - the ordinary consumer path, which requests the lines, takes
 * a reference on the chip's driver and works on every kernel since the
 * descriptor API. Global GPIO numbers depend on the probe order and on the
 * kernel version (gpiolib allocates them dynamically; a Raspberry Pi's
 * header lines moved from 0..53 to 512.. with newer kernels), so they are
 * only a fallback: gpio_in=<N> gpio_out=<N> (legacy gpio_request()).
 *
 * edge=rising|falling|both selects the interrupt trigger; mode=echo sets the
 * output to the input's level read in the handler (the response copies the
 * stimulus); mode=toggle flips the output at every interrupt.
 *
 * threaded=0: the output is set in the hard interrupt handler
 * (IRQF_NO_THREAD: hard also on PREEMPT_RT or with threadirqs), with
 * gpiod_set_value(), which needs a chip that cannot sleep; a chip that can
 * (a GPIO expander on I2C or SPI) is refused at load. threaded=1: the work
 * is done in the IRQ thread (request_threaded_irq, IRQF_ONESHOT), with the
 * _cansleep accessors, on any chip.
 *
 * "handled" (read-only parameter) counts the interrupts handled, "irq" is
 * the Linux IRQ number of the input line (/proc/irq/<irq>/ to pin it).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/err.h>
#include <linux/gpio.h>
#include <linux/gpio/consumer.h>
#include <linux/gpio/machine.h>
#include <linux/init.h>
#include <linux/interrupt.h>
#include <linux/kernel.h>
#include <linux/limits.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/platform_device.h>
#include <linux/string.h>

#define DRV_NAME	"gpio_responder"
#define CON_IN		"in"
#define CON_OUT		"out"

static char *chip;
module_param(chip, charp, 0444);
MODULE_PARM_DESC(chip, "Label of the GPIO chip holding both lines (e.g. pinctrl-bcm2835); with in= and out=");

static int in_offset = -1;
module_param_named(in, in_offset, int, 0444);
MODULE_PARM_DESC(in, "Offset of the input (stimulus) line in chip=");

static int out_offset = -1;
module_param_named(out, out_offset, int, 0444);
MODULE_PARM_DESC(out, "Offset of the output (response) line in chip=");

static int gpio_in = -1;
module_param(gpio_in, int, 0444);
MODULE_PARM_DESC(gpio_in, "Fallback without chip=: global GPIO number of the input line");

static int gpio_out = -1;
module_param(gpio_out, int, 0444);
MODULE_PARM_DESC(gpio_out, "Fallback without chip=: global GPIO number of the output line");

static char *edge = "both";
module_param(edge, charp, 0444);
MODULE_PARM_DESC(edge, "Input edges answered: rising, falling or both (default both)");

static char *mode = "echo";
module_param(mode, charp, 0444);
MODULE_PARM_DESC(mode, "echo (output := input level read in the handler) or toggle (flip the output per interrupt) (default echo)");

static bool threaded;
module_param(threaded, bool, 0444);
MODULE_PARM_DESC(threaded, "0: set the output in the hard IRQ handler (chip must not sleep); 1: in the IRQ thread (default 0)");

static atomic_t handled = ATOMIC_INIT(0);
static int resp_irq = -1;

static int resp_readonly_set(const char *val, const struct kernel_param *kp)
{
	pr_err("%s is read-only\n", kp->name);
	return -EPERM;
}

static int resp_handled_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%u\n",
			 (unsigned int)atomic_read(&handled));
}

static int resp_irq_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n", READ_ONCE(resp_irq));
}

static const struct kernel_param_ops resp_handled_ops = {
	.set = resp_readonly_set,
	.get = resp_handled_get,
};

static const struct kernel_param_ops resp_irq_ops = {
	.set = resp_readonly_set,
	.get = resp_irq_get,
};

module_param_cb(handled, &resp_handled_ops, NULL, 0444);
MODULE_PARM_DESC(handled, "Read-only: interrupts handled (output set) since load");
module_param_cb(irq, &resp_irq_ops, NULL, 0444);
MODULE_PARM_DESC(irq, "Read-only: Linux IRQ number of the input line");

static struct platform_device *resp_pdev;
static struct gpio_desc *desc_in;
static struct gpio_desc *desc_out;
static bool legacy_numbers;
static bool echo;
static bool level;		/* toggle: the output's current level */
static unsigned long trigger;

static struct gpiod_lookup_table resp_lookup = {
	.dev_id = DRV_NAME,
	.table = {
		GPIO_LOOKUP_IDX(NULL, 0, CON_IN, 0, GPIO_ACTIVE_HIGH),
		GPIO_LOOKUP_IDX(NULL, 0, CON_OUT, 0, GPIO_ACTIVE_HIGH),
		{ },
	},
};

/* Hard interrupt context: the chip cannot sleep (checked at load). */
static irqreturn_t resp_hard_irq(int irq, void *dev_id)
{
	if (echo) {
		gpiod_set_value(desc_out, gpiod_get_value(desc_in));
	} else {
		level = !level;
		gpiod_set_value(desc_out, level);
	}
	atomic_inc(&handled);
	return IRQ_HANDLED;
}

/* The IRQ thread: any chip. */
static irqreturn_t resp_thread_irq(int irq, void *dev_id)
{
	if (echo) {
		gpiod_set_value_cansleep(desc_out,
					 gpiod_get_value_cansleep(desc_in));
	} else {
		level = !level;
		gpiod_set_value_cansleep(desc_out, level);
	}
	atomic_inc(&handled);
	return IRQ_HANDLED;
}

static int __init resp_check_params(void)
{
	bool by_chip = chip && *chip;

	if (!edge || !strcmp(edge, "both")) {
		trigger = IRQF_TRIGGER_RISING | IRQF_TRIGGER_FALLING;
	} else if (!strcmp(edge, "rising")) {
		trigger = IRQF_TRIGGER_RISING;
	} else if (!strcmp(edge, "falling")) {
		trigger = IRQF_TRIGGER_FALLING;
	} else {
		pr_err("edge=%s unknown: accepted rising, falling or both\n",
		       edge);
		return -EINVAL;
	}
	if (!mode || !strcmp(mode, "echo")) {
		echo = true;
	} else if (!strcmp(mode, "toggle")) {
		echo = false;
	} else {
		pr_err("mode=%s unknown: accepted echo or toggle\n", mode);
		return -EINVAL;
	}

	if (by_chip && (gpio_in >= 0 || gpio_out >= 0)) {
		pr_err("give chip= with in= and out=, or gpio_in= and gpio_out= without chip=, not both\n");
		return -EINVAL;
	}
	if (by_chip) {
		if (in_offset < 0 || in_offset >= U16_MAX ||
		    out_offset < 0 || out_offset >= U16_MAX) {
			pr_err("chip=%s needs in=<offset> and out=<offset> (0..%u), got in=%d out=%d\n",
			       chip, U16_MAX - 1, in_offset, out_offset);
			return -EINVAL;
		}
		if (in_offset == out_offset) {
			pr_err("in=%d and out=%d are the same line\n",
			       in_offset, out_offset);
			return -EINVAL;
		}
		return 0;
	}
	if (gpio_in < 0 || gpio_out < 0) {
		pr_err("no lines given: chip=<label> in=<offset> out=<offset> (or gpio_in=<N> gpio_out=<N>)\n");
		return -EINVAL;
	}
	if (gpio_in == gpio_out) {
		pr_err("gpio_in=%d and gpio_out=%d are the same line\n",
		       gpio_in, gpio_out);
		return -EINVAL;
	}
	return 0;
}

static struct gpio_desc *resp_get_by_chip(const char *con_id, int offset)
{
	struct gpio_desc *desc;

	desc = gpiod_get(&resp_pdev->dev, con_id, GPIOD_ASIS);
	if (IS_ERR(desc)) {
		int ret = PTR_ERR(desc);

		/* gpiolib defers when no chip has the label */
		if (ret == -EPROBE_DEFER) {
			pr_err("%s line: no GPIO chip labelled \"%s\" (is its driver loaded? see the labels in /sys/bus/gpio/devices/*/ or gpiodetect)\n",
			       con_id, chip);
			return ERR_PTR(-ENODEV);
		}
		if (ret == -EINVAL)
			pr_err("%s line: offset %d is not a line of chip %s\n",
			       con_id, offset, chip);
		else if (ret == -EBUSY)
			pr_err("%s line: %s line %d is already in use (see gpioinfo)\n",
			       con_id, chip, offset);
		else
			pr_err("%s line: cannot get %s line %d (%d)\n",
			       con_id, chip, offset, ret);
	}
	return desc;
}

static struct gpio_desc *resp_get_by_number(const char *con_id, int gpio)
{
	int ret = gpio_request(gpio, DRV_NAME);

	/* gpiolib defers a number no chip covers (yet) */
	if (ret == -EPROBE_DEFER) {
		pr_err("%s line: no GPIO chip has global GPIO %d (see the base and ngpio files in /sys/class/gpio/gpiochip*/)\n",
		       con_id, gpio);
		return ERR_PTR(-ENODEV);
	}
	if (ret) {
		pr_err("%s line: cannot request global GPIO %d (%d)%s\n",
		       con_id, gpio, ret,
		       ret == -EBUSY ? ": already in use" : "");
		return ERR_PTR(ret);
	}
	return gpio_to_desc(gpio);
}

static void resp_put(struct gpio_desc *desc, int gpio)
{
	if (legacy_numbers)
		gpio_free(gpio);
	else
		gpiod_put(desc);
}

static int __init resp_get_lines(void)
{
	int ret;

	legacy_numbers = !(chip && *chip);
	if (legacy_numbers) {
		desc_in = resp_get_by_number(CON_IN, gpio_in);
		if (IS_ERR(desc_in))
			return PTR_ERR(desc_in);
		desc_out = resp_get_by_number(CON_OUT, gpio_out);
		if (IS_ERR(desc_out)) {
			gpio_free(gpio_in);
			return PTR_ERR(desc_out);
		}
		return 0;
	}

	resp_lookup.table[0].key = chip;
	resp_lookup.table[0].chip_hwnum = in_offset;
	resp_lookup.table[1].key = chip;
	resp_lookup.table[1].chip_hwnum = out_offset;
	gpiod_add_lookup_table(&resp_lookup);
	desc_in = resp_get_by_chip(CON_IN, in_offset);
	if (IS_ERR(desc_in)) {
		ret = PTR_ERR(desc_in);
		goto out_table;
	}
	desc_out = resp_get_by_chip(CON_OUT, out_offset);
	if (IS_ERR(desc_out)) {
		ret = PTR_ERR(desc_out);
		gpiod_put(desc_in);
		goto out_table;
	}
	ret = 0;
out_table:
	gpiod_remove_lookup_table(&resp_lookup);
	return ret;
}

static int __init gpio_responder_init(void)
{
	irq_handler_t hard = resp_hard_irq;
	irq_handler_t thread = NULL;
	unsigned long flags;
	int ret, irq;

	ret = resp_check_params();
	if (ret)
		return ret;

	resp_pdev = platform_device_register_simple(DRV_NAME,
						    PLATFORM_DEVID_NONE,
						    NULL, 0);
	if (IS_ERR(resp_pdev)) {
		ret = PTR_ERR(resp_pdev);
		pr_err("cannot register the platform device %s (%d)\n",
		       DRV_NAME, ret);
		return ret;
	}
	ret = resp_get_lines();
	if (ret)
		goto err_pdev;

	if (!threaded && (gpiod_cansleep(desc_in) || gpiod_cansleep(desc_out))) {
		pr_err("the GPIO chip of the %s line can sleep (an expander on I2C/SPI?): its lines cannot be read or set in hard IRQ context; load with threaded=1\n",
		       gpiod_cansleep(desc_in) ? CON_IN : CON_OUT);
		ret = -EINVAL;
		goto err_lines;
	}
	ret = gpiod_direction_input(desc_in);
	if (ret) {
		pr_err("cannot make the in line an input (%d)\n", ret);
		goto err_lines;
	}
	/* echo: the response starts at the stimulus's level; toggle: low */
	level = echo && gpiod_get_value_cansleep(desc_in) > 0;
	ret = gpiod_direction_output(desc_out, level);
	if (ret) {
		pr_err("cannot make the out line an output (%d)\n", ret);
		goto err_lines;
	}
	gpiod_set_consumer_name(desc_in, DRV_NAME "-in");
	gpiod_set_consumer_name(desc_out, DRV_NAME "-out");

	irq = gpiod_to_irq(desc_in);
	if (irq < 0) {
		pr_err("the in line cannot interrupt: gpiod_to_irq() failed (%d)\n",
		       irq);
		ret = irq;
		goto err_lines;
	}

	flags = trigger;
	if (threaded) {
		hard = NULL;
		thread = resp_thread_irq;
		flags |= IRQF_ONESHOT;
	} else {
		flags |= IRQF_NO_THREAD;
	}
	ret = request_threaded_irq(irq, hard, thread, flags, DRV_NAME, &handled);
	if (ret) {
		pr_err("cannot request IRQ %d of the in line (%d)\n", irq, ret);
		goto err_lines;
	}
	WRITE_ONCE(resp_irq, irq);

	if (legacy_numbers)
		pr_info("GPIO %d -> GPIO %d, IRQ %d, edge=%s mode=%s %s\n",
			gpio_in, gpio_out, irq, edge, mode,
			threaded ? "threaded" : "hard IRQ");
	else
		pr_info("%s line %d -> line %d, IRQ %d, edge=%s mode=%s %s\n",
			chip, in_offset, out_offset, irq, edge, mode,
			threaded ? "threaded" : "hard IRQ");
	return 0;

err_lines:
	resp_put(desc_out, gpio_out);
	resp_put(desc_in, gpio_in);
err_pdev:
	platform_device_unregister(resp_pdev);
	return ret;
}

static void __exit gpio_responder_exit(void)
{
	free_irq(resp_irq, &handled);
	resp_put(desc_out, gpio_out);
	resp_put(desc_in, gpio_in);
	platform_device_unregister(resp_pdev);
	pr_info("unloaded: %u interrupts handled\n",
		(unsigned int)atomic_read(&handled));
}

module_init(gpio_responder_init);
module_exit(gpio_responder_exit);

MODULE_DESCRIPTION("Answers each edge on an input GPIO line by driving an output GPIO line (echo or toggle), in the hard IRQ handler or an IRQ thread");
MODULE_AUTHOR("irq-station contributors");
MODULE_LICENSE("GPL");
