//go:build !unix

package fastpath

import "syscall"

const syscallEMFILE = syscall.Errno(24)
