package demo

import "syscall"

// sysProcAttr makes the kernel kill an agent if the demo dies without
// cleaning up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
