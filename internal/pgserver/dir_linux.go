package pgserver

import "syscall"

// tmpfsDir is the shared memory file system of Linux.
const tmpfsDir = "/dev/shm"

// tmpfsMinFree is the space a server's directory needs on tmpfs, kept
// from the machine's memory: its data directory (about 40 MB), the
// tests' databases, and its WAL (max_wal_size).
const tmpfsMinFree = 2 << 30

// memoryDir returns /dev/shm when it is a tmpfs with tmpfsMinFree left,
// else "". A test server creates and deletes hundreds of files per
// database it clones and drops: on ext4 the kernel's inode allocation,
// which skips recently deleted inodes, took 3 times the CPU of the tests
// themselves; on tmpfs a fraction.
func memoryDir() string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(tmpfsDir, &st); err != nil {
		return ""
	}
	const tmpfsMagic = 0x01021994
	if st.Type != tmpfsMagic || uint64(st.Bavail)*uint64(st.Bsize) < tmpfsMinFree {
		return ""
	}
	return tmpfsDir
}
