/* SPDX-License-Identifier: Apache-2.0 */
/*
 * B2 baselines (bench/file_bench.cc): BPF LSM programs that allow everything.
 * Attached host-wide (LSM programs are global), they measure the floor any
 * BPF LSM file enforcement pays: the trampoline entry and exit of
 * security_file_open (once per open) and of security_inode_permission (once
 * per path component looked up, and once more on open).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("lsm/file_open")
int BPF_PROG(bench_file_open, struct file *file)
{
	return 0;
}

SEC("lsm/inode_permission")
int BPF_PROG(bench_inode_permission, struct inode *inode, int mask)
{
	return 0;
}
