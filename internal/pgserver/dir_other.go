//go:build !linux

package pgserver

// memoryDir returns "": only Linux's /dev/shm is known to be a tmpfs.
func memoryDir() string { return "" }
