//go:build unix && !linux

package stdio

import "syscall"

// setPdeathsig does nothing: only Linux has a parent-death signal. On macOS
// and the BSDs a bridge that crashes leaves the child to notice its stdin
// closing (MCP stdio servers exit then); a clean shutdown stops the group.
func setPdeathsig(*syscall.SysProcAttr) {}
