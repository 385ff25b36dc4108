// SPDX-License-Identifier: GPL-2.0
/* pcie_latency's object of ../irqs_stream.c: see ../Kbuild. */
#include "../irqs_stream.c"
