package demo

import "syscall"

// sysProcAttr makes the kernel kill an agent if the demo dies without
// cleaning up, and puts it in its own process group: a Ctrl-C at the
// terminal reaches the demo, which stops the agents itself (an agent that
// got the terminal's SIGINT and then the demo's SIGTERM would take the
// second signal for "stop at once").
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
