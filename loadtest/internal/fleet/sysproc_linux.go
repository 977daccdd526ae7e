package fleet

import "syscall"

// sysProcAttr makes the kernel stop children when the load generator dies,
// so a killed benchmark leaves no fleet behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
