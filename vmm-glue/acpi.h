/* SPDX-License-Identifier: MIT */
/*
 * ACPI tables for a guest without firmware: RSDP (revision 2) -> XSDT -> FADT (hardware-
 * reduced, X_DSDT) and MADT (one enabled local APIC per vCPU, one IOAPIC, interrupt source
 * overrides for the ISA IRQs the VMM uses), DSDT with one Device per virtio-mmio window
 * (_HID "LNRO0005", _UID i, _CRS { Memory32Fixed(ReadWrite, base, size), Interrupt(
 * ResourceConsumer, Level/Edge, ActiveHigh, Exclusive) { gsi } }), the COM1 UART
 * (PNP0501), the VM generation ID device (VGEN, see vmgenid_addr) and its Generic Event
 * Device (GED0, vmgenid_gsi). Every table checksums to zero; the RSDP has both checksums.
 */
#ifndef LZ_VMM_ACPI_H
#define LZ_VMM_ACPI_H

#include <stddef.h>
#include <stdint.h>

#define ACPI_MAX_MMIO_DEVS 32
/*
 * Pins of the KVM in-kernel IOAPIC (GSI base 0). A device's gsi must be below this and not
 * one of the ISA lines (0: the PIT, 2: the 8259 cascade, 4: COM1); devices may share a gsi
 * (their Interrupt descriptors then say Shared; virtio-mmio requests its IRQ shared).
 */
#define ACPI_IOAPIC_PINS 24

struct acpi_mmio_dev {
	uint64_t base;  /* guest-physical, < 4 GiB */
	uint32_t size;
	uint32_t gsi;
};

struct acpi_config {
	unsigned ncpus;                    /* 1..255 local APICs, ids 0..ncpus-1 */
	uint64_t ioapic_addr;              /* 0xfec00000 */
	uint64_t lapic_addr;               /* 0xfee00000 */
	const struct acpi_mmio_dev *devs;  /* virtio-mmio windows */
	unsigned ndevs;
	/*
	 * Guest-physical address of the 16-byte VM generation ID (8-byte aligned, in memory
	 * the e820 map reserves), published by Device (VGEN) { _HID "QEMUVGID", _CID and _DDN
	 * "VM_Gen_Counter", Method ADDR returning Package { low 32 bits, high 32 bits } }, after
	 * the virtio devices. 0: no such device.
	 */
	uint64_t vmgenid_addr;
	/*
	 * With vmgenid_addr: the GSI (an IOAPIC pin of no other device, edge, active high) of
	 * Device (GED0) { _HID "ACPI0013", _CRS { Interrupt { gsi } }, Method (_EVT, 1) {
	 * If (LEqual (Arg0, gsi)) { Notify (\_SB.VGEN, 0x80) } } }: an edge on it makes the
	 * guest re-read the ID (Linux's vmgenid driver reseeds on that notification). 0: none.
	 */
	uint32_t vmgenid_gsi;
};

/*
 * Lay the tables out in buf, which the guest sees at guest-physical address gpa (16-byte
 * aligned), at most len bytes: RSDP first (so *rsdp == gpa), then XSDT, FADT, MADT, DSDT.
 * *used gets the bytes written. Deterministic. -EINVAL for a bad config, -ENOSPC if len is
 * too small.
 */
int acpi_build(const struct acpi_config *c, uint8_t *buf, uint64_t gpa, size_t len,
	       uint64_t *rsdp, size_t *used);

#endif
