package stdio

import "syscall"

// setPdeathsig has the kernel send SIGKILL to the child when the bridge
// dies, even by SIGKILL. It covers the direct child only (the group leader);
// grandchildren such as node under npx then see their stdin close, on
// which MCP stdio servers exit. Pdeathsig fires when the OS thread that
// forked the child exits; the Go runtime only ends threads of goroutines
// that exit while locked to their thread, which this package never does.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
