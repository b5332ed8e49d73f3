//go:build unix

package fastpath

import "syscall"

// syscallEMFILE is the accept error when out of file descriptors, worth retrying.
const syscallEMFILE = syscall.EMFILE
